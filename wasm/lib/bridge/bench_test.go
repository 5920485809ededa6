package bridge

import (
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// The operations the benchmarks run, looked up once.
var (
	opClientBeginAcquire    = opNamed("client_begin_acquire")
	opClientCompleteAcquire = opNamed("client_complete_acquire")
	opClientCompleteLast    = opNamed("client_complete_last")
	opCoordAcquire          = opNamed("coord_acquire")
	opCoordAcquireLast      = opNamed("coord_acquire_last")
	opCoordRelease          = opNamed("coord_release")
	opCoordReleaseIds       = opNamed("coord_release_ids")
	opGateCommit            = opNamed("gate_commit")
	opGateCommitIds         = opNamed("gate_commit_ids")
	opGateFloor             = opNamed("gate_floor")
	opIntern                = opNamed("intern")
)

// BenchmarkGateCommit is the Go half of gate.commit from JavaScript:
// decoding the token and callback tag, the floor check, and the status.
func BenchmarkGateCommit(b *testing.B) {
	w := newWorld(b)
	loop(b, w.b, opGateCommit, Call{H: w.gate, N: call(w.b, args().PutArgToken(fence.Token{Resource: "slot", HolderID: "agent-a", Fence: 1}).Tag(convert.TagFunction))})
}

// BenchmarkGateFloor is the smallest call: a handle lookup and one number.
func BenchmarkGateFloor(b *testing.B) {
	w := newWorld(b)
	loop(b, w.b, opGateFloor, Call{H: w.gate})
}

// BenchmarkBeginAcquire is the Go half of client.beginAcquire.
func BenchmarkBeginAcquire(b *testing.B) {
	w := newWorld(b)
	loop(b, w.b, opClientBeginAcquire, Call{H: w.client, N: call(w.b, args().String("deploy-slot"))})
}

// BenchmarkAcquireDenied is the Go half of coordinator.acquire on a held
// resource.
func BenchmarkAcquireDenied(b *testing.B) {
	w := newWorld(b)
	w.acquire(b)
	loop(b, w.b, opCoordAcquire, Call{H: w.coord, N: call(w.b, args().PutArgRequest(w.beginAcquire(b, "slot")))})
}

// loop runs op with c on br for each round of b; a status other than OK
// fails it.
func loop(b *testing.B, br *Bridge, op *Op, c Call) {
	b.ReportAllocs()
	for b.Loop() {
		if st := br.run(op, c); st != OK {
			b.Fatal(st)
		}
	}
}

// BenchmarkCycle is the Go half of a whole lease from JavaScript: begin,
// acquire, complete, commit, release (a lease is plain data: no handle).
func BenchmarkCycle(b *testing.B) {
	w := newWorld(b)
	br := w.b
	ok := func(st int32) *convert.OutReader { return must(b, br, st) }
	b.ReportAllocs()
	for b.Loop() {
		out := ok(br.run(opClientBeginAcquire, Call{H: w.client, N: call(br, args().String("slot"))}))
		id := out.Str()
		req := lease.Request{Kind: lease.KindAcquire, RequestID: id, Resource: "slot", HolderID: "agent-a",
			SentAt: clock.At("agent-a", out.F64())}
		out = ok(br.run(opCoordAcquire, Call{H: w.coord, N: call(br, args().PutArgRequest(req))}))
		out.F64()
		g := grantOf(out, req)
		// As the JavaScript wrapper sends it: the grant's strings that
		// repeat the request's go as TagSame (its expiry's domain is the
		// coordinator's, another clock's, so it goes in full).
		ok(br.run(opClientCompleteAcquire, Call{H: w.client, N: call(br, args().PutArgRequest(req).Object().
			Tag(convert.TagSame).Tag(convert.TagSame).Tag(convert.TagSame).Number(float64(g.Fence)).Number(clock.Millis(g.TTL)).
			Object().Number(g.CoordinatorExpiresAt.Millis).String(g.CoordinatorExpiresAt.Domain))}))
		tok := g.Token()
		ok(br.run(opGateCommit, Call{H: w.gate, N: call(br, args().PutArgToken(tok).Tag(convert.TagFunction))}))
		ok(br.run(opCoordRelease, Call{H: w.coord, N: call(br, args().PutArgToken(tok))}))
	}
}

// BenchmarkCycleReused is the Go half of a whole lease from JavaScript as
// the wrapper makes it when the calls pass back the objects it returned:
// begin, acquire and complete of the last request and grant (no
// arguments), commit and release with interned ids.
func BenchmarkCycleReused(b *testing.B) {
	w := newWorld(b)
	br := w.b
	ok := func(st int32) *convert.OutReader { return must(b, br, st) }
	slot := uint32(ok(br.run(opIntern, Call{N: call(br, args().String("slot"))})).F64())
	agent := uint32(ok(br.run(opIntern, Call{N: call(br, args().String("agent-a"))})).F64())
	begin := call(br, args().String("slot"))
	b.ReportAllocs()
	for b.Loop() {
		ok(br.run(opClientBeginAcquire, Call{H: w.client, N: begin}))
		out := ok(br.run(opCoordAcquireLast, Call{H: w.coord}))
		out.F64()
		f := out.F64()
		ok(br.run(opClientCompleteLast, Call{H: w.client}))
		ok(br.run(opGateCommitIds, Call{H: w.gate, ID1: slot, ID2: agent, X: f}))
		ok(br.run(opCoordReleaseIds, Call{H: w.coord, ID1: slot, ID2: agent, X: f}))
	}
}
