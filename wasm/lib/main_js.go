//go:build js && wasm

// Command lib is the lease-fence library compiled for JavaScript
// (GOOS=js GOARCH=wasm). It exports the methods of package bridge with
// //go:wasmexport; wasm/js/runtime.mjs loads it, runs main once, and then
// calls the exports directly with numbers, sharing two byte buffers in the
// wasm memory for everything else. It does not use syscall/js, and it never
// calls into JavaScript: JavaScript reads createClock sources itself, between
// two calls (see bridge.Reading).
package main

//lint:file-ignore U1000 the //go:wasmexport functions are called by the JavaScript host, not from Go.

import (
	"unsafe"

	"github.com/lease-fence/lease-fence/wasm/lib/bridge"
)

var br = bridge.New()

// hdr tells JavaScript where the buffers are: argument buffer address and
// length, result address and length, a version of the layout, and the
// address of br.Reading.
var hdr [6]uint32

const layoutVersion = 2

func addr(b []byte) uint32 {
	if cap(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// publish records where In and Out are now; both move when they grow.
func publish() {
	hdr[0] = addr(br.In)
	hdr[1] = uint32(len(br.In))
	hdr[2] = addr(br.Out.B)
	hdr[3] = uint32(len(br.Out.B))
}

//go:wasmexport lf_header
func header() uint32 {
	publish()
	hdr[4] = layoutVersion
	hdr[5] = uint32(uintptr(unsafe.Pointer(&br.Reading)))
	return uint32(uintptr(unsafe.Pointer(&hdr)))
}

func main() {
	// Keep the instance alive for the exports; JavaScript calls them
	// directly, so main has nothing more to do.
	select {}
}
