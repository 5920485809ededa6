//go:build js && wasm

// Command lib is the lease-fence library compiled for JavaScript
// (GOOS=js GOARCH=wasm). It exports the methods of package bridge with
// //go:wasmexport; wasm/js/lease-fence.mjs loads it, runs main once, and then
// calls the exports directly with numbers, sharing two byte buffers in the
// wasm memory for everything else. It does not use syscall/js: the one call
// into JavaScript (reading a createClock source) is a //go:wasmimport.
package main

//lint:file-ignore U1000 the //go:wasmexport functions are called by the JavaScript host, not from Go.

import (
	"unsafe"

	"github.com/lease-fence/lease-fence/wasm/lib/bridge"
)

var br = bridge.New()

// hdr tells JavaScript where the buffers are: argument buffer address and
// length, result address and length, and a version of the layout.
var hdr [5]uint32

const layoutVersion = 1

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
	return uint32(uintptr(unsafe.Pointer(&hdr)))
}

// hostRead is lease-fence.mjs's host.read: the reading of the createClock
// source registered as id, or NaN (a source that throws has its exception
// kept in JavaScript and rethrown when the call returns). Importing it
// directly keeps syscall/js out of the module.
//
//go:wasmimport lease_fence read
func hostRead(id uint32) float64

func main() {
	br.HostRead = hostRead
	// Keep the instance alive for the exports; JavaScript calls them
	// directly, so main has nothing more to do.
	select {}
}
