package bridge

import (
	"math"
	"testing"
	"unsafe"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// asks checks that st is a request for a reading of source reader and
// returns its ticket.
func asks(t *testing.T, b *Bridge, st int32, reader uint32) uint32 {
	t.Helper()
	if st != ReadSource {
		t.Fatalf("status %d, want ReadSource", st)
	}
	out := &convert.OutReader{B: b.Out.B}
	if r := uint32(out.F64()); r != reader {
		t.Fatalf("asked for source %d, want %d", r, reader)
	}
	return uint32(out.F64())
}

// sourceWorld is a coordinator and a client whose clocks are JavaScript
// sources 1 (the coordinator's) and 2 (the client's).
type sourceWorld struct {
	b                *Bridge
	coordClock, aClk uint32
	coord, client    uint32
}

func newSourceWorld(t *testing.T) *sourceWorld {
	t.Helper()
	b := New()
	w := &sourceWorld{b: b}
	w.coordClock = handle(t, b, b.do("clock_custom", Call{H: 1, N: call(b, args().String("coordinator").Tag(convert.TagFunction))}))
	w.aClk = handle(t, b, b.do("clock_custom", Call{H: 2, N: call(b, args().String("agent-a").Tag(convert.TagFunction))}))
	w.coord = handle(t, b, b.do("coord_new", Call{N: call(b, args().Object().Handle(convert.KindClock, w.coordClock).Number(1000).Tag(convert.TagUndefined))}))
	w.client = handle(t, b, b.do("client_new", Call{N: call(b, args().Object().Handle(convert.KindClock, w.aClk).String("agent-a").Number(0))}))
	return w
}

func TestReadingSlotLayout(t *testing.T) {
	// wasm/js/runtime.mjs writes Value, Reader and Ticket at these offsets.
	var r Reading
	if unsafe.Offsetof(r.Value) != 0 || unsafe.Offsetof(r.Reader) != 8 || unsafe.Offsetof(r.Ticket) != 12 || unsafe.Sizeof(r) != 16 {
		t.Fatalf("Reading layout: Value@%d Reader@%d Ticket@%d size %d, want 0, 8, 12, 16",
			unsafe.Offsetof(r.Value), unsafe.Offsetof(r.Reader), unsafe.Offsetof(r.Ticket), unsafe.Sizeof(r))
	}
}

// A call that needs a source's reading stops, changing nothing and holding
// no lock, and acts on the reading when it is made again with it.
func TestSourceIsReadBetweenTwoCalls(t *testing.T) {
	w := newSourceWorld(t)
	b := w.b
	begin := call(b, args().String("slot"))
	ticket := asks(t, b, b.do("client_begin_acquire", Call{H: w.client, N: begin}), 2)

	// Between the two calls nothing is locked: every object can be used,
	// including the coordinator whose clock has the same kind of source.
	must(t, b, b.do("coord_issued", Call{H: w.coord}))
	other := handle(t, b, b.do("clock_manual", Call{N: call(b, args().String("m").Tag(convert.TagUndefined))}))
	must(t, b, b.do("clock_now", Call{H: other}))

	b.Reading = Reading{Value: 40, Reader: 2, Ticket: ticket}
	out := must(t, b, b.do("client_begin_acquire", Call{H: w.client, N: call(b, args().String("slot"))}))
	req := lease.Request{Kind: lease.KindAcquire, RequestID: out.Str(), Resource: "slot", HolderID: "agent-a", SentAt: clock.At("agent-a", out.F64())}
	if req.SentAt.Millis != 40 {
		t.Fatalf("sentAt %v, want the reading 40", req.SentAt.Millis)
	}

	acquire := func() int32 { return b.do("coord_acquire", Call{H: w.coord, N: call(b, args().PutArgRequest(req))}) }
	ticket = asks(t, b, acquire(), 1)
	if f := must(t, b, b.do("coord_issued", Call{H: w.coord})).F64(); f != 0 {
		t.Fatalf("issued %v before the reading, want 0", f)
	}
	b.Reading = Reading{Value: 100, Reader: 1, Ticket: ticket}
	out = must(t, b, acquire())
	if code := out.F64(); code != Granted {
		t.Fatalf("outcome %v", code)
	}
	if g := grantOf(out, req); g.Fence != 1 || g.CoordinatorExpiresAt.Millis != 1100 {
		t.Fatalf("grant %+v, want fence 1 expiring at 100+1000", g)
	}
}

// A call refused for anything that does not depend on the time asks for no
// reading, so the source is not read.
func TestRefusedCallAsksForNoReading(t *testing.T) {
	w := newSourceWorld(t)
	b := w.b
	ren := lease.Request{Kind: lease.KindRenew, RequestID: "r", Resource: "slot", HolderID: "a", Fence: 1, SentAt: clock.At("agent-a", 1)}
	fail(t, b, b.do("coord_acquire", Call{H: w.coord, N: call(b, args().PutArgRequest(ren))}), ErrInvalidArgument, `must be "acquire"`)
	fail(t, b, b.do("coord_renew", Call{H: w.coord, N: call(b, args().PutArgRequest(ren))}), ErrInvalidArgument, "never issued")
	fail(t, b, b.do("coord_release", Call{H: w.coord, N: call(b, args().PutArgToken(lease.Grant{Resource: "slot", HolderID: "a"}.Token()))}), ErrInvalidArgument, "fence")
	fail(t, b, b.do("client_begin_acquire", Call{H: w.client, N: call(b, args().String(""))}), ErrInvalidArgument, "resource")
	fail(t, b, b.do("client_begin_renewal", Call{H: w.client, N: call(b, args().Number(1))}), ErrInvalidArgument, "lease")
	fail(t, b, b.do("clock_now", Call{H: 9999}), ErrInvalidArgument, "not a live clock")
	if b.ticket != 0 {
		t.Fatalf("%d readings asked for, want none", b.ticket)
	}
}

// A reading is used only by the request it answers (its reader and ticket),
// and only once; one that the call does not use is dropped.
func TestReadingAnswersOneRequestOnce(t *testing.T) {
	w := newSourceWorld(t)
	b := w.b
	now := func() int32 { return b.do("clock_now", Call{H: w.coordClock}) }
	t1 := asks(t, b, now(), 1)
	b.Reading = Reading{Value: 5, Reader: 2, Ticket: t1} // another source
	t2 := asks(t, b, now(), 1)
	if t2 == t1 {
		t.Fatal("a new request got the same ticket")
	}
	b.Reading = Reading{Value: 5, Reader: 1, Ticket: t1} // an earlier request
	t3 := asks(t, b, now(), 1)
	b.Reading = Reading{Value: 5, Reader: 1, Ticket: t3}
	if ms := must(t, b, now()).F64(); ms != 5 {
		t.Fatalf("read %v, want 5", ms)
	}
	if b.Reading.Reader != 0 {
		t.Fatal("the reading was not used up")
	}
	t4 := asks(t, b, now(), 1) // used once
	b.Reading = Reading{Value: 9, Reader: 1, Ticket: t4}
	must(t, b, b.do("coord_issued", Call{H: w.coord})) // a call in between drops it
	asks(t, b, now(), 1)
	// Reader 0 is no source (JavaScript numbers them from 1): a clock made
	// with it never gets a reading, even from a zero Reading and ticket.
	z := handle(t, b, b.do("clock_custom", Call{H: 0, N: call(b, args().String("z").Tag(convert.TagFunction))}))
	b.Reading = Reading{}
	b.ticket = 0
	fail(t, b, b.do("clock_now", Call{H: z}), ErrClockReading, "not a number")
}

// The guard applies to readings taken between calls as to any other.
func TestSourceReadingsAreGuarded(t *testing.T) {
	w := newSourceWorld(t)
	b := w.b
	readings := []float64{10, 3, math.Inf(1), math.NaN(), 10, 12}
	read := func(uint32) float64 {
		v := readings[0]
		readings = readings[1:]
		return v
	}
	now := func() int32 { return b.do("clock_now", Call{H: w.coordClock}) }
	if ms := must(t, b, withSource(b, read, now)).F64(); ms != 10 {
		t.Fatalf("read %v", ms)
	}
	fail(t, b, withSource(b, read, now), ErrClockReading, "lower than an earlier reading")
	fail(t, b, withSource(b, read, now), ErrClockReading, "infinite")
	fail(t, b, withSource(b, read, now), ErrClockReading, "not a number")
	for _, want := range []float64{10, 12} {
		if ms := must(t, b, withSource(b, read, now)).F64(); ms != want {
			t.Fatalf("read %v, want %v", ms, want)
		}
	}
}
