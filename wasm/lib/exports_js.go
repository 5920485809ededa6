//go:build js && wasm

// The wasm exports: one per bridge method, each publishing the buffers after
// the call (see publish). lease-fence.mjs calls them through instance.exports.

package main

//lint:file-ignore U1000 the //go:wasmexport functions are called by the JavaScript host, not from Go.

//go:wasmexport lf_clock_monotonic
func clockMonotonic(n int32) int32 {
	st := br.ClockMonotonic(n)
	publish()
	return st
}

//go:wasmexport lf_clock_manual
func clockManual(n int32) int32 {
	st := br.ClockManual(n)
	publish()
	return st
}

//go:wasmexport lf_clock_custom
func clockCustom(reader uint32, n int32) int32 {
	st := br.ClockCustom(reader, n)
	publish()
	return st
}

//go:wasmexport lf_clock_now
func clockNow(h uint32) int32 {
	st := br.ClockNow(h)
	publish()
	return st
}

//go:wasmexport lf_clock_advance
func clockAdvance(h uint32, n int32) int32 {
	st := br.ClockAdvance(h, n)
	publish()
	return st
}

//go:wasmexport lf_clock_set
func clockSet(h uint32, n int32) int32 {
	st := br.ClockSet(h, n)
	publish()
	return st
}

//go:wasmexport lf_instant_since
func instantSince(n int32) int32 {
	st := br.InstantSince(n)
	publish()
	return st
}

//go:wasmexport lf_coord_new
func coordNew(n int32) int32 {
	st := br.CoordNew(n)
	publish()
	return st
}

//go:wasmexport lf_coord_acquire
func coordAcquire(h uint32, n int32) int32 {
	st := br.CoordAcquire(h, n)
	publish()
	return st
}

//go:wasmexport lf_coord_renew
func coordRenew(h uint32, n int32) int32 {
	st := br.CoordRenew(h, n)
	publish()
	return st
}

//go:wasmexport lf_coord_release
func coordRelease(h uint32, n int32) int32 {
	st := br.CoordRelease(h, n)
	publish()
	return st
}

//go:wasmexport lf_coord_issued
func coordIssued(h uint32) int32 {
	st := br.CoordIssued(h)
	publish()
	return st
}

//go:wasmexport lf_client_new
func clientNew(n int32) int32 {
	st := br.ClientNew(n)
	publish()
	return st
}

//go:wasmexport lf_client_begin_acquire
func clientBeginAcquire(h uint32, n int32) int32 {
	st := br.ClientBeginAcquire(h, n)
	publish()
	return st
}

//go:wasmexport lf_client_begin_renewal
func clientBeginRenewal(h uint32, n int32) int32 {
	st := br.ClientBeginRenewal(h, n)
	publish()
	return st
}

//go:wasmexport lf_client_complete_acquire
func clientCompleteAcquire(h uint32, n int32) int32 {
	st := br.ClientCompleteAcquire(h, n)
	publish()
	return st
}

//go:wasmexport lf_client_complete_renewal
func clientCompleteRenewal(h uint32, n int32) int32 {
	st := br.ClientCompleteRenewal(h, n)
	publish()
	return st
}

//go:wasmexport lf_lease_has_expired
func leaseHasExpired(h uint32) int32 {
	st := br.LeaseHasExpired(h)
	publish()
	return st
}

//go:wasmexport lf_lease_would_admit
func leaseWouldAdmit(h uint32, n int32) int32 {
	st := br.LeaseWouldAdmit(h, n)
	publish()
	return st
}

//go:wasmexport lf_gate_new
func gateNew(n int32) int32 {
	st := br.GateNew(n)
	publish()
	return st
}

//go:wasmexport lf_gate_commit
func gateCommit(h uint32, n int32) int32 {
	st := br.GateCommit(h, n)
	publish()
	return st
}

//go:wasmexport lf_gate_admit
func gateAdmit(h uint32, n int32) int32 {
	st := br.GateAdmit(h, n)
	publish()
	return st
}

//go:wasmexport lf_gate_floor
func gateFloor(h uint32) int32 {
	st := br.GateFloor(h)
	publish()
	return st
}

//go:wasmexport lf_gate_rejections
func gateRejections(h uint32, from uint32) int32 {
	st := br.GateRejections(h, from)
	publish()
	return st
}

//go:wasmexport lf_naive_new
func naiveNew(n int32) int32 {
	st := br.NaiveNew(n)
	publish()
	return st
}

//go:wasmexport lf_naive_valid
func naiveValid(h uint32) int32 {
	st := br.NaiveValid(h)
	publish()
	return st
}

//go:wasmexport lf_naive_renewed
func naiveRenewed(h uint32) int32 {
	st := br.NaiveRenewed(h)
	publish()
	return st
}

//go:wasmexport lf_naive_expires_at
func naiveExpiresAt(h uint32) int32 {
	st := br.NaiveExpiresAt(h)
	publish()
	return st
}

//go:wasmexport lf_grow
func grow(used, need int32) int32 {
	st := br.Grow(used, need)
	publish()
	return st
}

//go:wasmexport lf_free
func free(h uint32) {
	br.Free(h)
}

//go:wasmexport lf_intern
func intern(n int32) int32 {
	st := br.Intern(n)
	publish()
	return st
}

//go:wasmexport lf_reset_ids
func resetIDs() {
	br.ResetIDs()
}

//go:wasmexport lf_gate_commit_ids
func gateCommitIDs(h, resource, holder uint32, fence float64) int32 {
	st := br.GateCommitIDs(h, resource, holder, fence)
	publish()
	return st
}
