//go:build js && wasm

// The wasm exports: one per bridge method, each publishing the buffers after
// the call (see publish). wasm/js/runtime.mjs calls them through instance.exports.

package main

//lint:file-ignore U1000 the //go:wasmexport functions are called by the JavaScript host, not from Go.

import "runtime"

// published publishes the buffers after a bridge call and returns the call's
// status: return published(br.Method(args)).
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

//go:wasmexport lf_clock_monotonic
func clockMonotonic(n int32) int32 {
	return published(br.ClockMonotonic(n))
}

//go:wasmexport lf_clock_manual
func clockManual(n int32) int32 {
	return published(br.ClockManual(n))
}

//go:wasmexport lf_clock_custom
func clockCustom(reader uint32, n int32) int32 {
	return published(br.ClockCustom(reader, n))
}

//go:wasmexport lf_clock_now
func clockNow(h uint32) int32 {
	return published(br.ClockNow(h))
}

//go:wasmexport lf_clock_advance
func clockAdvance(h uint32, n int32) int32 {
	return published(br.ClockAdvance(h, n))
}

//go:wasmexport lf_clock_set
func clockSet(h uint32, n int32) int32 {
	return published(br.ClockSet(h, n))
}

//go:wasmexport lf_instant_since
func instantSince(n int32) int32 {
	return published(br.InstantSince(n))
}

//go:wasmexport lf_coord_new
func coordNew(n int32) int32 {
	return published(br.CoordNew(n))
}

//go:wasmexport lf_coord_acquire
func coordAcquire(h uint32, n int32) int32 {
	return published(br.CoordAcquire(h, n))
}

//go:wasmexport lf_coord_renew
func coordRenew(h uint32, n int32) int32 {
	return published(br.CoordRenew(h, n))
}

//go:wasmexport lf_coord_release
func coordRelease(h uint32, n int32) int32 {
	return published(br.CoordRelease(h, n))
}

//go:wasmexport lf_coord_issued
func coordIssued(h uint32) int32 {
	return published(br.CoordIssued(h))
}

//go:wasmexport lf_client_new
func clientNew(n int32) int32 {
	return published(br.ClientNew(n))
}

//go:wasmexport lf_client_begin_acquire
func clientBeginAcquire(h uint32, n int32) int32 {
	return published(br.ClientBeginAcquire(h, n))
}

//go:wasmexport lf_client_begin_renewal
func clientBeginRenewal(h uint32, n int32) int32 {
	return published(br.ClientBeginRenewal(h, n))
}

//go:wasmexport lf_client_complete_acquire
func clientCompleteAcquire(h uint32, n int32) int32 {
	return published(br.ClientCompleteAcquire(h, n))
}

//go:wasmexport lf_client_complete_renewal
func clientCompleteRenewal(h uint32, n int32) int32 {
	return published(br.ClientCompleteRenewal(h, n))
}

//go:wasmexport lf_lease_has_expired
func leaseHasExpired(h uint32, deadline float64) int32 {
	return published(br.LeaseHasExpired(h, deadline))
}

//go:wasmexport lf_lease_would_admit
func leaseWouldAdmit(n int32) int32 {
	return published(br.LeaseWouldAdmit(n))
}

//go:wasmexport lf_gate_new
func gateNew(n int32) int32 {
	return published(br.GateNew(n))
}

//go:wasmexport lf_gate_commit
func gateCommit(h uint32, n int32) int32 {
	return published(br.GateCommit(h, n))
}

//go:wasmexport lf_gate_admit
func gateAdmit(h uint32, n int32) int32 {
	return published(br.GateAdmit(h, n))
}

//go:wasmexport lf_gate_check
func gateCheck(h uint32, n int32, refuseStale bool) int32 {
	return published(br.GateCheck(h, n, refuseStale))
}

//go:wasmexport lf_gate_floor
func gateFloor(h uint32) int32 {
	return published(br.GateFloor(h))
}

//go:wasmexport lf_gate_rejections
func gateRejections(h uint32, after float64) int32 {
	return published(br.GateRejections(h, after))
}

//go:wasmexport lf_gate_rejection_count
func gateRejectionCount(h uint32) int32 {
	return published(br.GateRejectionCount(h))
}

//go:wasmexport lf_naive_new
func naiveNew(n int32) int32 {
	return published(br.NaiveNew(n))
}

//go:wasmexport lf_naive_valid
func naiveValid(h uint32) int32 {
	return published(br.NaiveValid(h))
}

//go:wasmexport lf_naive_renewed
func naiveRenewed(h uint32) int32 {
	return published(br.NaiveRenewed(h))
}

//go:wasmexport lf_naive_expires_at
func naiveExpiresAt(h uint32) int32 {
	return published(br.NaiveExpiresAt(h))
}

//go:wasmexport lf_grow
func grow(used, need int32) int32 {
	return published(br.Grow(used, need))
}

//go:wasmexport lf_free
func free(h uint32) {
	br.Free(h)
}

//go:wasmexport lf_intern
func intern(n int32) int32 {
	return published(br.Intern(n))
}

//go:wasmexport lf_reset_ids
func resetIDs() {
	br.ResetIDs()
}

//go:wasmexport lf_client_begin_acquire_id
func clientBeginAcquireID(h, resource uint32) int32 {
	return published(br.ClientBeginAcquireID(h, resource))
}

//go:wasmexport lf_coord_acquire_last
func coordAcquireLast(h uint32) int32 {
	return published(br.CoordAcquireLast(h))
}

//go:wasmexport lf_client_complete_last
func clientCompleteLast(h uint32) int32 {
	return published(br.ClientCompleteLast(h))
}

//go:wasmexport lf_coord_release_ids
func coordReleaseIDs(h, resource, holder uint32, fence float64) int32 {
	return published(br.CoordReleaseIDs(h, resource, holder, fence))
}

//go:wasmexport lf_gate_commit_ids
func gateCommitIDs(h, resource, holder uint32, fence float64) int32 {
	return published(br.GateCommitIDs(h, resource, holder, fence))
}
