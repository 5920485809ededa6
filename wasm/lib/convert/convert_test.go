package convert

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

var (
	t0  = clock.At("agent-a", 1000.5)
	req = lease.Request{Kind: lease.KindAcquire, RequestID: "r1", Resource: "slot", HolderID: "agent-a", SentAt: t0}
	ren = lease.Request{Kind: lease.KindRenew, RequestID: "r2", Resource: "slot", HolderID: "agent-a", SentAt: t0, Fence: 7}
	grt = lease.Grant{RequestID: "r1", Resource: "slot", HolderID: "agent-a", Fence: 7, TTL: 30 * time.Second,
		CoordinatorExpiresAt: clock.At("coordinator", 31000)}
)

func TestRoundTrips(t *testing.T) {
	for _, q := range []lease.Request{req, ren} {
		var w ArgWriter
		r := NewReader(w.PutArgRequest(q).B)
		got := r.Request("request", q.Kind)
		if err := r.End(); err != nil || got != q {
			t.Errorf("request %+v: got %+v, %v", q, got, err)
		}
		var out Writer
		out.PutRequest(q)
		if back := (&OutReader{B: out.B}).GetRequest(); back != q {
			t.Errorf("result request %+v read back as %+v", q, back)
		}
	}
	var w ArgWriter
	r := NewReader(w.PutArgGrant(grt).B)
	if got, err := r.Grant("grant"), r.End(); err != nil || got != grt {
		t.Errorf("grant: got %+v, %v", got, err)
	}
	tok := fence.Token{Resource: "slot", HolderID: "a", Fence: MaxSafeInteger}
	w = ArgWriter{}
	r = NewReader(w.PutArgToken(tok).B)
	if got, err := r.Token("token"), r.End(); err != nil || got != tok {
		t.Errorf("token: got %+v, %v", got, err)
	}
}

// step is one decoding of an argument list, and the error it must give.
type step struct {
	name    string
	args    func(w *ArgWriter)
	decode  func(r *Reader) error
	wantArg string // "" for success
	wantMsg string // a substring of the message
}

func run(t *testing.T, steps []step) {
	t.Helper()
	for _, s := range steps {
		var w ArgWriter
		s.args(&w)
		err := s.decode(NewReader(w.B))
		if s.wantArg == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", s.name, err)
			}
			continue
		}
		var ae *ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("%s: got %v, want an *ArgumentError", s.name, err)
			continue
		}
		if ae.Arg != s.wantArg || !strings.Contains(ae.Error(), s.wantMsg) || !ae.InvalidArgument() {
			t.Errorf("%s: got %q (arg %q), want arg %q and %q", s.name, ae.Error(), ae.Arg, s.wantArg, s.wantMsg)
		}
	}
}

func str(r *Reader) error   { r.NonEmpty("s"); return r.Err() }
func fin(r *Reader) error   { r.Finite("n"); return r.Err() }
func cnt(r *Reader) error   { r.Count("n"); return r.Err() }
func ocnt(r *Reader) error  { r.OptCount("n"); return r.Err() }
func ttl(r *Reader) error   { r.Span("ttl", true, false); return r.Err() }
func skew(r *Reader) error  { r.Span("skew", false, true); return r.Err() }
func tok(r *Reader) error   { r.Token("token"); return r.Err() }
func acq(r *Reader) error   { r.Request("request", lease.KindAcquire); return r.Err() }
func rnw(r *Reader) error   { r.Request("request", lease.KindRenew); return r.Err() }
func grant(r *Reader) error { r.Grant("grant"); return r.Err() }
func clk(r *Reader) error   { r.Handle("clock", KindClock, "a clock"); return r.Err() }

func TestChecks(t *testing.T) {
	run(t, []step{
		{"string", func(w *ArgWriter) { w.String("x") }, str, "", ""},
		{"empty string", func(w *ArgWriter) { w.String("") }, str, "s", "must not be empty"},
		{"number for string", func(w *ArgWriter) { w.Number(1.5) }, str, "s", "got number 1.5"},
		{"array for string", func(w *ArgWriter) { w.Tag(TagArray) }, str, "s", "got array"},
		{"lone surrogate", func(w *ArgWriter) { w.Tag(TagIllFormed) }, str, "s", "not well-formed"},
		{"too long", func(w *ArgWriter) { w.Tag(TagTooLong) }, str, "s", "longer than 1048576"},
		{"long string quoted short", func(w *ArgWriter) { w.String(strings.Repeat("y", 500)) }, fin, "n", `"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy..."`},
		{"NaN", func(w *ArgWriter) { w.Number(math.NaN()) }, fin, "n", "finite number, got number NaN"},
		{"infinity", func(w *ArgWriter) { w.Number(math.Inf(-1)) }, fin, "n", "got number -Inf"},
		{"null for number", func(w *ArgWriter) { w.Tag(TagNull) }, fin, "n", "got null"},
		{"count", func(w *ArgWriter) { w.Number(MaxSafeInteger) }, cnt, "", ""},
		{"count above 2^53-1", func(w *ArgWriter) { w.Number(MaxSafeInteger + 1) }, cnt, "n", "2^53-1"},
		{"fractional count", func(w *ArgWriter) { w.Number(1.5) }, cnt, "n", "integer"},
		{"negative count", func(w *ArgWriter) { w.Number(-1) }, cnt, "n", "got number -1"},
		{"undefined count", func(w *ArgWriter) { w.Tag(TagUndefined) }, cnt, "n", "got undefined"},
		{"optional count", func(w *ArgWriter) { w.Tag(TagUndefined) }, ocnt, "", ""},
		{"optional count given a string", func(w *ArgWriter) { w.String("3") }, ocnt, "n", `got string "3"`},
		{"ttl", func(w *ArgWriter) { w.Number(0.5) }, ttl, "", ""},
		{"zero ttl", func(w *ArgWriter) { w.Number(0) }, ttl, "ttl", "must be positive"},
		{"sub-nanosecond ttl", func(w *ArgWriter) { w.Number(1e-9) }, ttl, "ttl", "must be positive"},
		{"huge ttl", func(w *ArgWriter) { w.Number(1e300) }, ttl, "ttl", "from 0 to"},
		{"missing ttl", func(w *ArgWriter) { w.Tag(TagUndefined) }, ttl, "ttl", "got undefined"},
		{"absent skew", func(w *ArgWriter) { w.Tag(TagUndefined) }, skew, "", ""},
		{"negative skew", func(w *ArgWriter) { w.Number(-5) }, skew, "skew", "got number -5"},
		{"token", func(w *ArgWriter) { w.PutArgToken(fence.Token{Resource: "r", HolderID: "h", Fence: 1}) }, tok, "", ""},
		{"token fence 0", func(w *ArgWriter) { w.PutArgToken(fence.Token{Resource: "r", HolderID: "h"}) }, tok, "token.fence", "at least 1"},
		{"token of a function", func(w *ArgWriter) { w.Tag(TagFunction) }, tok, "token", "must be an object, got function"},
		{"token missing holder", func(w *ArgWriter) { w.Object().String("r").Tag(TagUndefined) }, tok, "token.holderId", "got undefined"},
		{"acquire", func(w *ArgWriter) { w.PutArgRequest(req) }, acq, "", ""},
		{"acquire with explicit fence 0", func(w *ArgWriter) {
			w.Object().String("acquire").String("r").String("s").String("h").Object().Number(1).String("d").Number(0)
		}, acq, "", ""},
		{"acquire with a fence", func(w *ArgWriter) {
			w.Object().String("acquire").String("r").String("s").String("h").Object().Number(1).String("d").Number(3)
		}, acq, "request.fence", "absent or 0"},
		{"renewal given to acquire", func(w *ArgWriter) { w.PutArgRequest(ren) }, acq, "request.kind", `must be "acquire", got string "renew"`},
		{"renewal", func(w *ArgWriter) { w.PutArgRequest(ren) }, rnw, "", ""},
		{"renewal without fence", func(w *ArgWriter) {
			w.Object().String("renew").String("r").String("s").String("h").Object().Number(1).String("d").Tag(TagUndefined)
		}, rnw, "request.fence", "got undefined"},
		{"sentAt NaN", func(w *ArgWriter) {
			w.Object().String("acquire").String("r").String("s").String("h").Object().Number(math.NaN()).String("d")
		}, acq, "request.sentAt.millis", "NaN"},
		{"sentAt empty domain", func(w *ArgWriter) {
			w.Object().String("acquire").String("r").String("s").String("h").Object().Number(1).String("")
		}, acq, "request.sentAt.domain", "must not be empty"},
		{"sentAt a string", func(w *ArgWriter) {
			w.Object().String("acquire").String("r").String("s").String("h").String("now")
		}, acq, "request.sentAt", "must be an object"},
		{"grant", func(w *ArgWriter) { w.PutArgGrant(grt) }, grant, "", ""},
		{"grant without expiry", func(w *ArgWriter) {
			w.Object().String("r").String("s").String("h").Number(1).Number(10).Tag(TagUndefined)
		}, grant, "grant.coordinatorExpiresAt", "got undefined"},
		{"grant ttl string", func(w *ArgWriter) {
			w.Object().String("r").String("s").String("h").Number(1).String("10")
		}, grant, "grant.ttlMillis", `got string "10"`},
		{"grant with TagSame and no request", func(w *ArgWriter) {
			w.Object().Tag(TagSame)
		}, grant, "arguments", "malformed"},
		{"TagSame for a string", func(w *ArgWriter) { w.Tag(TagSame) }, str, "arguments", "malformed"},
		{"clock handle", func(w *ArgWriter) { w.Handle(KindClock, 3) }, clk, "", ""},
		{"gate for clock", func(w *ArgWriter) { w.Handle(KindGate, 3) }, clk, "clock", "got a FenceGate"},
		{"plain object for clock", func(w *ArgWriter) { w.Object() }, clk, "clock", "got object"},
		{"truncated number", func(w *ArgWriter) { w.B = append(w.B, byte(TagNumber), 1, 2) }, fin, "arguments", "malformed"},
		{"string longer than buffer", func(w *ArgWriter) { w.B = append(w.B, byte(TagString), 255, 255, 255, 255, 'x') }, str, "arguments", "malformed"},
		{"unknown tag", func(w *ArgWriter) { w.B = append(w.B, 200) }, str, "arguments", "malformed"},
		{"empty buffer", func(w *ArgWriter) {}, str, "arguments", "malformed"},
	})
}

// TestGrantFor checks that TagSame in a grant stands for its request's
// fields, that the strings may still be sent in full, and that TagSame is
// malformed in the grant's other fields.
func TestGrantFor(t *testing.T) {
	q := lease.Request{Kind: lease.KindAcquire, RequestID: "id1", Resource: "res", HolderID: "hold", SentAt: clock.At("dom", 5)}
	decode := func(w *ArgWriter) (lease.Grant, error) {
		r := NewReader(w.B)
		g := r.GrantFor("grant", &q)
		return g, r.End()
	}
	var w ArgWriter
	w.Object().Tag(TagSame).Tag(TagSame).Tag(TagSame).Number(7).Number(10).Object().Number(15).Tag(TagSame)
	g, err := decode(&w)
	want := lease.Grant{RequestID: "id1", Resource: "res", HolderID: "hold", Fence: 7, TTL: clock.FromMillis(10),
		CoordinatorExpiresAt: clock.At("dom", 15)}
	if err != nil || g != want {
		t.Fatalf("all TagSame: %+v, %v; want %+v", g, err, want)
	}
	var full ArgWriter
	other := lease.Grant{RequestID: "id2", Resource: "res2", HolderID: "h2", Fence: 7, TTL: clock.FromMillis(10),
		CoordinatorExpiresAt: clock.At("dom2", 15)}
	if g, err := decode(full.PutArgGrant(other)); err != nil || g != other {
		t.Fatalf("full strings: %+v, %v; want %+v", g, err, other)
	}
	var bad ArgWriter
	bad.Object().Tag(TagSame).Tag(TagSame).Tag(TagSame).Tag(TagSame)
	if _, err := decode(&bad); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("TagSame for the fence: %v, want malformed", err)
	}
	var empty ArgWriter
	empty.Object().String("").Tag(TagSame)
	if _, err := decode(&empty); err == nil || !strings.Contains(err.Error(), "grant.requestId") {
		t.Fatalf("empty requestId: %v", err)
	}
}

func TestEnd(t *testing.T) {
	var w ArgWriter
	r := NewReader(w.String("a").String("b").B)
	if r.Str("a"); r.Err() != nil {
		t.Fatal(r.Err())
	}
	if r.End() == nil {
		t.Error("End accepted a buffer with a value left over")
	}
	if r.Str("b"); r.Err() != nil || r.End() != nil || r.Rest() != 0 {
		t.Errorf("second value: %v, End %v", r.Err(), r.End())
	}
}

func TestInterner(t *testing.T) {
	var in Interner
	a := in.String([]byte("holder"))
	b := in.String([]byte("holder"))
	if a != "holder" || b != a {
		t.Fatalf("got %q %q", a, b)
	}
	if n := testing.AllocsPerRun(100, func() { in.String([]byte("holder")) }); n != 0 {
		t.Errorf("a known string allocated %v times", n)
	}
	// Every string comes back equal to its bytes, however many share a
	// slot, and a string still in its slot is not allocated again.
	for i := 0; i < 4*internSlots; i++ {
		b := []byte{byte(i), byte(i >> 8), 'x', byte(i % 7), byte(i % 5)}
		if s := in.String(b); s != string(b) {
			t.Fatalf("got %q for %q", s, b)
		}
		if s := in.String(b[:i%6]); s != string(b[:i%6]) {
			t.Fatalf("got %q for %q", s, b[:i%6])
		}
	}
	id := []byte("0123456789abcdef0123456789abcdef")
	in.String(id)
	if n := testing.AllocsPerRun(100, func() { in.String(id) }); n != 0 {
		t.Errorf("a request id just seen allocated %v times", n)
	}
	// An added string is what decoding its bytes returns.
	made := strings.Repeat("fedcba9876543210", 3)
	in.Add(made)
	if n := testing.AllocsPerRun(100, func() {
		if in.String([]byte(made)) != made {
			t.Fatal("added string not returned")
		}
	}); n > 1 { // the []byte conversion of the test itself may allocate
		t.Errorf("an added string allocated %v times", n)
	}
	long := strings.Repeat("z", internLen+1)
	if in.String([]byte(long)) != long {
		t.Error("long string changed")
	}
	var w ArgWriter
	r := Reader{Strings: &in}
	r.Reset(w.String("holder").B)
	if s, err := r.Str("s"), r.Err(); err != nil || s != "holder" {
		t.Errorf("interned read: %q %v", s, err)
	}
}
