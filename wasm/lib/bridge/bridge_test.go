package bridge

import (
	"math"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// call copies args into b.In as JavaScript would and returns the length.
func call(b *Bridge, w *convert.ArgWriter) int32 {
	if w == nil {
		return 0
	}
	b.Grow(0, int32(len(w.B)))
	copy(b.In, w.B)
	return int32(len(w.B))
}

func args() *convert.ArgWriter { return &convert.ArgWriter{} }

// opNamed returns the operation named name.
func opNamed(name string) *Op {
	for i := range Ops {
		if Ops[i].Name == name {
			return &Ops[i]
		}
	}
	panic("no operation " + name)
}

// do runs the operation named name, as its wasm export does.
func (b *Bridge) do(name string, c Call) int32 {
	return b.run(opNamed(name), c)
}

// live returns how many handles are in use.
func (b *Bridge) live() int { return len(b.objs) - 1 - len(b.free) }

// run runs op with the numbers in c.
func (b *Bridge) run(op *Op, c Call) int32 {
	return b.Do(op, c.H, c.N, c.ID1, c.ID2, c.X, c.Flag)
}

// withSource makes the call op as the JavaScript glue does: if it stops
// for the reading of a clock source (ReadSource), it takes read(reader),
// puts it in b.Reading with the ticket and makes the call again.
func withSource(b *Bridge, read func(reader uint32) float64, op func() int32) int32 {
	st := op()
	if st != ReadSource {
		return st
	}
	out := &convert.OutReader{B: b.Out.B}
	reader, ticket := uint32(out.F64()), uint32(out.F64())
	b.Reading = Reading{Value: read(reader), Reader: reader, Ticket: ticket}
	return op()
}

func must(t testing.TB, b *Bridge, st int32) *convert.OutReader {
	t.Helper()
	out := &convert.OutReader{B: b.Out.B}
	if st != OK {
		t.Fatalf("status %d: %s", st, out.Str())
	}
	return out
}

func fail(t *testing.T, b *Bridge, st, want int32, msg string) *convert.OutReader {
	t.Helper()
	out := &convert.OutReader{B: b.Out.B}
	if st != want {
		t.Fatalf("status %d, want %d", st, want)
	}
	if m := out.Str(); !strings.Contains(m, msg) {
		t.Fatalf("message %q does not contain %q", m, msg)
	}
	return out
}

func handle(t testing.TB, b *Bridge, st int32) uint32 {
	t.Helper()
	return uint32(must(t, b, st).F64())
}

type world struct {
	b                  *Bridge
	coordClock, aClock uint32
	coord, client      uint32
	gate               uint32
}

func newWorld(t testing.TB) *world {
	t.Helper()
	b := New()
	w := &world{b: b}
	w.coordClock = handle(t, b, b.do("clock_manual", Call{N: call(b, args().String("coordinator").Object().Number(0).Number(1))}))
	w.aClock = handle(t, b, b.do("clock_manual", Call{N: call(b, args().String("agent-a").Tag(convert.TagUndefined))}))
	w.coord = handle(t, b, b.do("coord_new", Call{N: call(b, args().Object().Handle(convert.KindClock, w.coordClock).Number(1000).Tag(convert.TagUndefined))}))
	w.client = handle(t, b, b.do("client_new", Call{N: call(b, args().Object().Handle(convert.KindClock, w.aClock).String("agent-a").Number(10))}))
	w.gate = handle(t, b, b.do("gate_new", Call{N: call(b, args().String("slot").Tag(convert.TagNull))}))
	return w
}

// beginAcquire runs ClientBeginAcquire on resource and builds the request
// from its output as JavaScript does (the client is "agent-a", on the clock
// of domain "agent-a").
func (w *world) beginAcquire(t testing.TB, resource string) lease.Request {
	t.Helper()
	out := must(t, w.b, w.b.do("client_begin_acquire", Call{H: w.client, N: call(w.b, args().String(resource))}))
	id := out.Str()
	return lease.Request{Kind: lease.KindAcquire, RequestID: id, Resource: resource, HolderID: "agent-a",
		SentAt: clock.At("agent-a", out.F64())}
}

// grantOf reads a granted outcome's numbers (after its code) and builds the
// grant answering req as JavaScript does (the coordinator's clock has domain
// "coordinator").
func grantOf(out *convert.OutReader, req lease.Request) lease.Grant {
	g := lease.Grant{RequestID: req.RequestID, Resource: req.Resource, HolderID: req.HolderID, Fence: uint64(out.F64())}
	g.TTL = clock.FromMillis(out.F64())
	g.CoordinatorExpiresAt = clock.At("coordinator", out.F64())
	return g
}

// acquire runs beginAcquire, acquire and completeAcquire, and returns the
// grant.
func (w *world) acquire(t testing.TB) lease.Grant {
	t.Helper()
	b := w.b
	req := w.beginAcquire(t, "slot")
	out := must(t, b, b.do("coord_acquire", Call{H: w.coord, N: call(b, args().PutArgRequest(req))}))
	if code := out.F64(); code != Granted {
		t.Fatalf("outcome %v, want granted", code)
	}
	g := grantOf(out, req)
	live := b.live()
	out = must(t, b, b.do("client_complete_acquire", Call{H: w.client, N: call(b, args().PutArgRequest(req).PutArgGrant(g))}))
	if f, ms, ttl, exp := out.F64(), out.F64(), out.F64(), out.F64(); f != float64(g.Fence) || ms != req.SentAt.Millis+1000-10 ||
		ttl != 1000 || exp != g.CoordinatorExpiresAt.Millis {
		t.Fatalf("lease fence %v deadline %v ttl %v expiry %v; want %v, sentAt+ttl-skew, 1000, %v", f, ms, ttl, exp, g.Fence, g.CoordinatorExpiresAt.Millis)
	}
	if b.live() != live {
		t.Fatal("a lease made a handle: a lease is plain data")
	}
	return g
}

func TestRoundTripAndStale(t *testing.T) {
	w := newWorld(t)
	b := w.b
	g := w.acquire(t)
	tok := g.Token()
	must(t, b, b.do("gate_commit", Call{H: w.gate, N: call(b, args().PutArgToken(tok).Tag(convert.TagFunction))}))
	if f := must(t, b, b.do("gate_floor", Call{H: w.gate})).F64(); f != float64(g.Fence) {
		t.Fatalf("floor %v", f)
	}
	newer := tok
	newer.Fence, newer.HolderID = tok.Fence+1, "agent-b"
	must(t, b, b.do("gate_admit", Call{H: w.gate, N: call(b, args().PutArgToken(newer))}))
	out := fail(t, b, b.do("gate_commit", Call{H: w.gate, N: call(b, args().PutArgToken(tok).Tag(convert.TagFunction))}), ErrStaleFence, "stale write")
	if seq, res, refused, rf, admitted, af := out.F64(), out.Str(), out.Str(), out.F64(), out.Str(), out.F64(); seq != 1 || res != "slot" ||
		refused != "agent-a" || rf != float64(tok.Fence) || admitted != "agent-b" || af != float64(newer.Fence) {
		t.Fatalf("rejection %v %s %s %v %s %v", seq, res, refused, rf, admitted, af)
	}
	out = must(t, b, b.do("gate_rejections", Call{H: w.gate, X: 0}))
	if count, max, n := out.F64(), out.F64(), out.F64(); count != 1 || max != 1000 || n != 1 {
		t.Fatalf("count %v, max %v, %v entries", count, max, n)
	}
	out = must(t, b, b.do("gate_rejections", Call{H: w.gate, X: 1}))
	if count, _, n := out.F64(), out.F64(), out.F64(); count != 1 || n != 0 {
		t.Fatalf("count %v, %v entries after the first", count, n)
	}
}

func TestBadCallsChangeNothing(t *testing.T) {
	w := newWorld(t)
	b := w.b
	// A commit whose callback is not a function is refused before the floor moves.
	tok := args().PutArgToken(lease.Grant{Resource: "slot", HolderID: "x", Fence: 5}.Token())
	fail(t, b, b.do("gate_commit", Call{H: w.gate, N: call(b, tok.Tag(convert.TagNull))}), ErrInvalidArgument, "fn must be a function")
	if f := must(t, b, b.do("gate_floor", Call{H: w.gate})).F64(); f != 0 {
		t.Fatalf("floor moved to %v", f)
	}
	// A request of the wrong kind does not read (and so step) the coordinator's clock.
	ren := lease.Request{Kind: lease.KindRenew, RequestID: "r", Resource: "slot", HolderID: "a", Fence: 1}
	ren.SentAt.Millis, ren.SentAt.Domain = 1, "agent-a"
	out := fail(t, b, b.do("coord_acquire", Call{H: w.coord, N: call(b, args().PutArgRequest(ren))}), ErrInvalidArgument, `must be "acquire"`)
	if arg := out.Str(); arg != "request.kind" {
		t.Fatalf("argument %q", arg)
	}
	if ms := must(t, b, b.do("clock_now", Call{H: w.coordClock})).F64(); ms != 0 {
		t.Fatalf("coordinator clock at %v, want untouched 0", ms)
	}
	// Wrong handles and kinds.
	fail(t, b, b.do("gate_floor", Call{H: w.coord}), ErrInvalidArgument, "not a live FenceGate")
	fail(t, b, b.do("clock_now", Call{H: 9999}), ErrInvalidArgument, "not a live clock")
	fail(t, b, b.do("clock_advance", Call{H: w.coordClock, N: call(b, args().Number(-1))}), ErrInvalidArgument, "must not be negative")
	fail(t, b, b.do("clock_set", Call{H: w.coordClock, N: call(b, args().Number(-1))}), ErrClockReading, "lower than an earlier reading")
	fail(t, b, b.do("clock_now", Call{H: 0}), ErrInvalidArgument, "not a live clock")
	fail(t, b, b.do("clock_manual", Call{N: -1}), ErrInvalidArgument, "out of range")
}

func TestErrorsMapToCodes(t *testing.T) {
	w := newWorld(t)
	b := w.b
	fail(t, b, b.do("instant_since", Call{N: call(b, args().Object().Number(1).String("a").Object().Number(0).String("b"))}), ErrClockDomain, "cannot be measured")
	if d := must(t, b, b.do("instant_since", Call{N: call(b, args().Object().Number(5).String("a").Object().Number(2).String("a"))})).F64(); d != 3 {
		t.Fatalf("since = %v", d)
	}
	req := w.beginAcquire(t, "slot")
	out := must(t, b, b.do("coord_acquire", Call{H: w.coord, N: call(b, args().PutArgRequest(req))}))
	out.F64()
	g := grantOf(out, req)
	other := g
	other.Resource = "other"
	fail(t, b, b.do("client_complete_acquire", Call{H: w.client, N: call(b, args().PutArgRequest(req).PutArgGrant(other))}), ErrGrantMismatch, "does not answer")
	must(t, b, b.do("client_complete_acquire", Call{H: w.client, N: call(b, args().PutArgRequest(req).PutArgGrant(g))}))
	fail(t, b, b.do("client_complete_acquire", Call{H: w.client, N: call(b, args().PutArgRequest(req).PutArgGrant(g))}), ErrRequestCompleted, "already completed")

	nan := New()
	h := handle(t, nan, nan.do("clock_custom", Call{H: 1, N: call(nan, args().String("src").Tag(convert.TagFunction))}))
	out = fail(t, nan, withSource(nan, func(uint32) float64 { return math.NaN() }, func() int32 { return nan.do("clock_now", Call{H: h}) }),
		ErrClockReading, "not a number")
	if d, p := out.Str(), out.Str(); d != "src" || p != "not a number" {
		t.Fatalf("reading error fields %q %q", d, p)
	}
}

func TestPanicBecomesInternalError(t *testing.T) {
	b := New()
	explode := func() (st int32) {
		defer b.guard(&st)
		panic("exploded")
	}
	fail(t, b, explode(), ErrInternal, "exploded")
	// The bridge goes on working.
	g := handle(t, b, b.do("gate_new", Call{N: call(b, args().String("g").Tag(convert.TagUndefined))}))
	must(t, b, b.do("gate_admit", Call{H: g, N: call(b, args().PutArgToken(lease.Grant{Resource: "g", HolderID: "a", Fence: 3}.Token()))}))
	if f := must(t, b, b.do("gate_floor", Call{H: g})).F64(); f != 3 {
		t.Fatalf("floor %v after a recovered panic, want 3", f)
	}
}

func TestHandlesAreReused(t *testing.T) {
	b := New()
	h := handle(t, b, b.do("gate_new", Call{N: call(b, args().String("g").Tag(convert.TagUndefined))}))
	if b.live() != 1 {
		t.Fatalf("live %d", b.live())
	}
	b.Free(h)
	b.Free(h) // twice is harmless
	b.Free(12345)
	if b.live() != 0 {
		t.Fatalf("live %d after free", b.live())
	}
	fail(t, b, b.do("gate_floor", Call{H: h}), ErrInvalidArgument, "not a live FenceGate")
	if h2 := handle(t, b, b.do("gate_new", Call{N: call(b, args().String("g2").Tag(convert.TagUndefined))})); h2 != h {
		t.Fatalf("handle %d not reused (got %d)", h, h2)
	}
}

func TestCoordReleaseIDs(t *testing.T) {
	w := newWorld(t)
	b := w.b
	g := w.acquire(t)
	intern := func(s string) uint32 {
		return uint32(must(t, b, b.do("intern", Call{N: call(b, args().String(s))})).F64())
	}
	slot, a, other := intern(g.Resource), intern(g.HolderID), intern("other")
	f := float64(g.Fence)
	if must(t, b, b.do("coord_release_ids", Call{H: w.coord, ID1: slot, ID2: other, X: f})).Bool() {
		t.Fatal("released for another holder")
	}
	if must(t, b, b.do("coord_release_ids", Call{H: w.coord, ID1: slot, ID2: a, X: f + 1})).Bool() {
		t.Fatal("released for another fence")
	}
	for _, bad := range []float64{0, -1, 1.5, math.NaN(), 1 << 53} {
		fail(t, b, b.do("coord_release_ids", Call{H: w.coord, ID1: slot, ID2: a, X: bad}), ErrInvalidArgument, "token.fence")
	}
	fail(t, b, b.do("coord_release_ids", Call{H: w.coord, ID1: 0, ID2: a, X: f}), ErrInvalidArgument, "not interned")
	fail(t, b, b.do("coord_release_ids", Call{H: w.coord, ID1: slot, ID2: 99, X: f}), ErrInvalidArgument, "not interned")
	fail(t, b, b.do("coord_release_ids", Call{H: w.gate, ID1: slot, ID2: a, X: f}), ErrInvalidArgument, "LeaseCoordinator")
	if !must(t, b, b.do("coord_release_ids", Call{H: w.coord, ID1: slot, ID2: a, X: f})).Bool() {
		t.Fatal("the holder's token did not release")
	}
	if must(t, b, b.do("coord_release_ids", Call{H: w.coord, ID1: slot, ID2: a, X: f})).Bool() {
		t.Fatal("released twice")
	}
	b.ResetIDs()
	fail(t, b, b.do("coord_release_ids", Call{H: w.coord, ID1: slot, ID2: a, X: f}), ErrInvalidArgument, "not interned")
}

func TestGateCommitIDs(t *testing.T) {
	b := New()
	gate := handle(t, b, b.do("gate_new", Call{N: call(b, args().String("slot").Tag(convert.TagUndefined))}))
	intern := func(s string) uint32 {
		return uint32(must(t, b, b.do("intern", Call{N: call(b, args().String(s))})).F64())
	}
	slot, a, other := intern("slot"), intern("agent-a"), intern("other")
	must(t, b, b.do("gate_commit_ids", Call{H: gate, ID1: slot, ID2: a, X: 3}))
	if f := must(t, b, b.do("gate_floor", Call{H: gate})).F64(); f != 3 {
		t.Fatalf("floor %v", f)
	}
	fail(t, b, b.do("gate_commit_ids", Call{H: gate, ID1: slot, ID2: a, X: 2}), ErrStaleFence, "stale write")
	fail(t, b, b.do("gate_commit_ids", Call{H: gate, ID1: other, ID2: a, X: 9}), ErrInvalidArgument, "presented to the gate")
	for _, bad := range []float64{0, -1, 1.5, math.NaN(), math.Inf(1), 1 << 53} {
		out := fail(t, b, b.do("gate_commit_ids", Call{H: gate, ID1: slot, ID2: a, X: bad}), ErrInvalidArgument, "token.fence")
		if arg := out.Str(); arg != "token.fence" {
			t.Errorf("fence %v: argument %q", bad, arg)
		}
	}
	fail(t, b, b.do("gate_commit_ids", Call{H: gate, ID1: 0, ID2: a, X: 4}), ErrInvalidArgument, "not interned")
	fail(t, b, b.do("gate_commit_ids", Call{H: gate, ID1: slot, ID2: 99, X: 4}), ErrInvalidArgument, "not interned")
	fail(t, b, b.do("gate_commit_ids", Call{H: slot + 100, ID1: slot, ID2: a, X: 4}), ErrInvalidArgument, "not a live FenceGate")
	must(t, b, b.do("intern", Call{N: call(b, args().String(strings.Repeat("x", MaxIDBytes)))}))
	fail(t, b, b.do("intern", Call{N: call(b, args().String(strings.Repeat("x", MaxIDBytes+1)))}), ErrInvalidArgument, "cannot be interned")
	fail(t, b, b.do("intern", Call{N: call(b, args().Number(1))}), ErrInvalidArgument, "must be a string")
	b.ResetIDs()
	fail(t, b, b.do("gate_commit_ids", Call{H: gate, ID1: slot, ID2: a, X: 4}), ErrInvalidArgument, "not interned")
	for i := 0; i < MaxIDs; i++ {
		intern("x")
	}
	fail(t, b, b.do("intern", Call{N: call(b, args().String("y"))}), ErrInvalidArgument, "table is full")
	if f := must(t, b, b.do("gate_floor", Call{H: gate})).F64(); f != 3 {
		t.Fatalf("floor moved to %v by refused calls", f)
	}
}

// GateCheck refuses what GateCommit would refuse as bad input and changes
// nothing; with refuseStale it also refuses (and logs) a token already below
// the floor, leaving the floor as it was.
func TestGateCheck(t *testing.T) {
	w := newWorld(t)
	b := w.b
	tok := func(holder string, f float64) *convert.ArgWriter {
		return args().Object().String("slot").String(holder).Number(f)
	}
	must(t, b, b.do("gate_admit", Call{H: w.gate, N: call(b, tok("b", 5))}))
	for _, refuseStale := range []bool{false, true} {
		must(t, b, b.do("gate_check", Call{H: w.gate, N: call(b, tok("a", 7).Tag(convert.TagFunction)), Flag: refuseStale}))
		must(t, b, b.do("gate_check", Call{H: w.gate, N: call(b, tok("a", 5).Tag(convert.TagFunction)), Flag: refuseStale}))
		fail(t, b, b.do("gate_check", Call{H: w.gate, N: call(b, tok("a", 0).Tag(convert.TagFunction)), Flag: refuseStale}), ErrInvalidArgument, "token.fence")
		fail(t, b, b.do("gate_check", Call{H: w.gate, N: call(b, tok("a", 7).Tag(convert.TagNull)), Flag: refuseStale}), ErrInvalidArgument, "fn must be a function")
		fail(t, b, b.do("gate_check", Call{H: w.gate, N: call(b, args().Object().String("other").String("a").Number(7).Tag(convert.TagFunction)), Flag: refuseStale}), ErrInvalidArgument, "presented to the gate")
		fail(t, b, b.do("gate_check", Call{H: w.client, N: call(b, tok("a", 7).Tag(convert.TagFunction)), Flag: refuseStale}), ErrInvalidArgument, "not a live")
	}
	must(t, b, b.do("gate_check", Call{H: w.gate, N: call(b, tok("a", 1).Tag(convert.TagFunction)), Flag: false})) // stale, but only checked
	if n := must(t, b, b.do("gate_rejection_count", Call{H: w.gate})).F64(); n != 0 {
		t.Fatalf("%v rejections, want 0", n)
	}
	fail(t, b, b.do("gate_check", Call{H: w.gate, N: call(b, tok("a", 1).Tag(convert.TagFunction)), Flag: true}), ErrStaleFence, "stale")
	if n := must(t, b, b.do("gate_rejection_count", Call{H: w.gate})).F64(); n != 1 {
		t.Fatalf("%v rejections, want 1", n)
	}
	if f := must(t, b, b.do("gate_floor", Call{H: w.gate})).F64(); f != 5 {
		t.Fatalf("floor %v, want 5", f)
	}
}

// A gate keeps the newest maxRejections refusals and counts all of them;
// GateRejections returns those after a Seq.
func TestGateRejectionRing(t *testing.T) {
	b := New()
	h := handle(t, b, b.do("gate_new", Call{N: call(b, args().String("slot").Object().Tag(convert.TagUndefined).Number(3))}))
	must(t, b, b.do("gate_admit", Call{H: h, N: call(b, args().Object().String("slot").String("b").Number(100))}))
	for f := 1; f <= 10; f++ {
		fail(t, b, b.do("gate_admit", Call{H: h, N: call(b, args().Object().String("slot").String("a").Number(float64(f)))}), ErrStaleFence, "stale")
	}
	if n := must(t, b, b.do("gate_rejection_count", Call{H: h})).F64(); n != 10 {
		t.Fatalf("count %v, want 10", n)
	}
	out := must(t, b, b.do("gate_rejections", Call{H: h, X: 0}))
	if count, max, n := out.F64(), out.F64(), out.F64(); count != 10 || max != 3 || n != 3 {
		t.Fatalf("count %v, max %v, %v entries; want 10, 3, 3", count, max, n)
	}
	for want := 8.0; want <= 10; want++ {
		if seq := out.F64(); seq != want {
			t.Fatalf("seq %v, want %v", seq, want)
		}
		out.Str()
		out.Str()
		out.F64()
		out.Str()
		out.F64()
	}
	out = must(t, b, b.do("gate_rejections", Call{H: h, X: 9}))
	if _, _, n := out.F64(), out.F64(), out.F64(); n != 1 {
		t.Fatalf("%v entries after seq 9, want 1", n)
	}
	for _, bad := range []float64{-1, 1.5, 1<<20 + 1} {
		fail(t, b, b.do("gate_new", Call{N: call(b, args().String("slot").Object().Tag(convert.TagUndefined).Number(bad))}), ErrInvalidArgument, "maxRejections")
	}
}

// A lease is plain data on the JavaScript side: beginRenewal, hasExpired and
// wouldAdmit take its data, and anything not tagged as a lease is refused.
func TestLeaseAsData(t *testing.T) {
	w := newWorld(t)
	b := w.b
	g := w.acquire(t)
	tok := g.Token()
	leaseArg := func(domain string) *convert.ArgWriter {
		return args().Handle(convert.KindLease, 0).PutArgToken(tok).String(domain)
	}
	req := must(t, b, b.do("client_begin_renewal", Call{H: w.client, N: call(b, leaseArg("agent-a"))})).GetRequest()
	if req.Kind != lease.KindRenew || req.Resource != "slot" || req.HolderID != "agent-a" || req.Fence != g.Fence {
		t.Fatalf("renewal %+v", req)
	}
	out := fail(t, b, b.do("client_begin_renewal", Call{H: w.client, N: call(b, args().Object().String("slot"))}), ErrInvalidArgument, "must be a lease")
	if arg := out.Str(); arg != "lease" {
		t.Fatalf("argument %q", arg)
	}
	fail(t, b, b.do("client_begin_renewal", Call{H: w.client, N: call(b, args().Handle(convert.KindGate, w.gate))}), ErrInvalidArgument, "must be a lease")
	fail(t, b, b.do("client_begin_renewal", Call{H: w.client, N: call(b, leaseArg("agent-b"))}), ErrInvalidArgument, "another client")

	now := must(t, b, b.do("clock_now", Call{H: w.aClock})).F64()
	if exp := must(t, b, b.do("lease_has_expired", Call{H: w.aClock, X: now + 1000})).Bool(); exp {
		t.Fatal("expired before its deadline")
	}
	if exp := must(t, b, b.do("lease_has_expired", Call{H: w.aClock, X: now})).Bool(); !exp {
		t.Fatal("not expired at its deadline")
	}
	fail(t, b, b.do("lease_has_expired", Call{H: w.gate, X: now}), ErrInvalidArgument, "not a live clock")

	if ok := must(t, b, b.do("lease_would_admit", Call{N: call(b, args().PutArgToken(tok).Handle(convert.KindGate, w.gate))})).Bool(); !ok {
		t.Fatal("a fresh gate would not admit the lease")
	}
	out = fail(t, b, b.do("lease_would_admit", Call{N: call(b, args().PutArgToken(tok).Object())}), ErrInvalidArgument, "must be a FenceGate")
	if arg := out.Str(); arg != "gate" {
		t.Fatalf("argument %q", arg)
	}
}

// TestLastRequestAndGrant: CoordAcquireLast and ClientCompleteLast (no
// arguments: the last request begun and the last grant CoordAcquireLast
// made) answer exactly as CoordAcquire and ClientCompleteAcquire do with
// those values encoded, in twin worlds whose manual clocks read the same:
// grants, denials, a second completion, a bad handle; and with nothing to
// reuse they are an argument error.
func TestLastRequestAndGrant(t *testing.T) {
	fresh := newWorld(t)
	fail(t, fresh.b, fresh.b.do("coord_acquire_last", Call{H: fresh.coord}), ErrInvalidArgument, "is not the last one")
	fail(t, fresh.b, fresh.b.do("client_complete_last", Call{H: fresh.client}), ErrInvalidArgument, "is not the last one")
	fresh.beginAcquire(t, "slot")
	fail(t, fresh.b, fresh.b.do("client_complete_last", Call{H: fresh.client}), ErrInvalidArgument, "is not the last one")

	fast, slow := newWorld(t), newWorld(t)
	same := func(step string, stFast, stSlow int32) {
		t.Helper()
		if stFast != stSlow || string(fast.b.Out.B) != string(slow.b.Out.B) {
			t.Fatalf("%s: status %d, out %q by the reused values; status %d, out %q by the encoded ones",
				step, stFast, fast.b.Out.B, stSlow, slow.b.Out.B)
		}
	}
	w := slow.b
	for round := range 3 {
		resource := "slot"
		if round == 2 {
			resource = "other"
		}
		fast.beginAcquire(t, resource)
		req := slow.beginAcquire(t, resource)
		// A bad coordinator handle first: refused alike, nothing changed.
		same("acquire on a client handle", fast.b.do("coord_acquire_last", Call{H: fast.client}), w.do("coord_acquire", Call{H: slow.client, N: call(w, args().PutArgRequest(req))}))
		stFast := fast.b.do("coord_acquire_last", Call{H: fast.coord})
		stSlow := w.do("coord_acquire", Call{H: slow.coord, N: call(w, args().PutArgRequest(req))})
		same("acquire", stFast, stSlow)
		out := &convert.OutReader{B: w.Out.B}
		code := out.F64()
		if want := [...]float64{Granted, Denied, Granted}[round]; code != want {
			t.Fatalf("round %d: outcome %v, want %v", round, code, want)
		}
		if code != Granted {
			continue
		}
		g := grantOf(out, req)
		same("complete on a gate handle", fast.b.do("client_complete_last", Call{H: fast.gate}), w.do("client_complete_acquire", Call{H: slow.gate, N: call(w, args().PutArgRequest(req).PutArgGrant(g))}))
		same("complete", fast.b.do("client_complete_last", Call{H: fast.client}), w.do("client_complete_acquire", Call{H: slow.client, N: call(w, args().PutArgRequest(req).PutArgGrant(g))}))
		stFast = fast.b.do("client_complete_last", Call{H: fast.client})
		stSlow = w.do("client_complete_acquire", Call{H: slow.client, N: call(w, args().PutArgRequest(req).PutArgGrant(g))})
		if stFast != ErrRequestCompleted || stSlow != ErrRequestCompleted {
			t.Fatalf("second completion: status %d and %d, want %d", stFast, stSlow, ErrRequestCompleted)
		}
	}
}
