//go:build js && wasm

// Command lib is the lease-fence library compiled for JavaScript
// (GOOS=js GOARCH=wasm). It exports the operations of package bridge with
// //go:wasmexport (exports_js.go, generated from bridge.Ops); wasm/js/runtime.mjs loads it, runs main once, and then
// calls the exports directly with numbers, sharing two byte buffers in the
// wasm memory for everything else. It does not use syscall/js, and it never
// calls into JavaScript: JavaScript reads createClock sources itself, between
// two calls (see bridge.Reading).
package main

//lint:file-ignore U1000 the //go:wasmexport functions are called by the JavaScript host, not from Go.

import (
	"runtime"
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

// published publishes the buffers after a bridge call and returns the call's
// status: return published(br.Do(op, call)).
func published(st int32) int32 {
	publish()
	return st
}

// yield lets the garbage collector's background mark worker run, if a mark
// phase is in progress; otherwise there is nothing else to run and it
// returns at once. Once a //go:wasmexport function returns, Go runs nothing
// until JavaScript calls in again, so without this the worker never gets a
// turn of its own and a mark phase lasts until the assists that allocation
// pays for have finished it: in the lease benchmark of bench-js, about 0.75 s
// per collection, with the write barrier slowing every pointer write
// throughout (about a fifth of a lease's time); with it, 72 ms. runtime.mjs
// calls it from a microtask (with an almost empty JavaScript stack) after
// every 1,024 calls. No other goroutine touches the bridge, and the yielding
// goroutine stays runnable, so the instance never idles back to JavaScript
// in between.
//
//go:wasmexport lf_yield
func yield() {
	runtime.Gosched()
}

//go:wasmexport lf_grow
func grow(used, need int32) int32 {
	return published(br.Grow(used, need))
}

//go:wasmexport lf_free
func free(h uint32) {
	br.Free(h)
}

//go:wasmexport lf_reset_ids
func resetIDs() {
	br.ResetIDs()
}
