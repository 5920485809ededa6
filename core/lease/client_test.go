package lease_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// BeginAcquire stamps the client's reading at the moment of sending.
func TestBeginAcquireStampsSendInstant(t *testing.T) {
	clk := manual(t, "agent-a", t950, 1)
	cl := newClient(t, clk, "agent-a", 0)
	req, err := cl.BeginAcquire("deploy-slot")
	if err != nil {
		t.Fatal(err)
	}
	want := lease.Request{Kind: lease.KindAcquire, RequestID: "agent-a-1", Resource: "deploy-slot", HolderID: "agent-a", SentAt: clock.At("agent-a", t950)}
	if req != want {
		t.Fatalf("request %+v, want %+v", req, want)
	}
	if clk.Peek().Millis != t950+1 {
		t.Fatal("BeginAcquire did not read the clock exactly once")
	}
	if cl.HolderID() != "agent-a" || cl.Domain() != "agent-a" || cl.ClockSkew() != 0 {
		t.Fatal(cl.HolderID(), cl.Domain(), cl.ClockSkew())
	}
}

// deadline = sentAt + ttl - clockSkew, whatever the coordinator's clock says
// and however late the reply arrives.
func TestDeadlineIsAnchoredAtSend(t *testing.T) {
	cases := []struct {
		name   string
		sent   float64
		ttl    time.Duration
		skew   time.Duration
		coord  float64 // the coordinator's reading when it processed the request
		want   float64
		expiry bool // dead on arrival
	}{
		{"NoSkew", t0, time.Second, 0, t40, 1000, false},
		{"Skew500", t0, 30 * time.Second, 500 * time.Millisecond, 1e9, 29_500, false},
		{"SentLate", t950, time.Second, 100 * time.Millisecond, 7, 1850, false},
		{"FractionalMillis", 0.25, 1500 * time.Microsecond, 250 * time.Microsecond, 0, 1.5, false},
		{"SkewLongerThanTTL", t500, time.Second, 2 * time.Second, 0, -500, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := manual(t, "agent-a", tc.sent, 0)
			cl := newClient(t, clk, "agent-a", tc.skew)
			co := newCoordinator(t, manual(t, coordDomain, 0, 0), tc.ttl, 0)
			req, err := cl.BeginAcquire("r")
			if err != nil {
				t.Fatal(err)
			}
			g := mustGrant(t)(co.AcquireAt(at(tc.coord), req))
			l, err := cl.CompleteAcquire(req, g)
			if err != nil {
				t.Fatal(err)
			}
			if l.Deadline() != clock.At("agent-a", tc.want) {
				t.Fatalf("deadline %v, want %v", l.Deadline(), tc.want)
			}
			if l.Token() != (fence.Token{Resource: "r", HolderID: "agent-a", Fence: 1}) || l.Grant() != g {
				t.Fatalf("token %v grant %+v", l.Token(), l.Grant())
			}
			exp, err := l.HasExpiredAt(clock.At("agent-a", tc.sent))
			if err != nil || exp != tc.expiry {
				t.Fatalf("HasExpiredAt(sent) = %v, %v; want %v", exp, err, tc.expiry)
			}
		})
	}
}

// A request completes once; a second completion is a *CompletedError, also
// for a copy of the request.
func TestCompleteTwiceIsAnError(t *testing.T) {
	cl := newClient(t, manual(t, "agent-a", 0, 1), "agent-a", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	req, _ := cl.BeginAcquire("r")
	g := mustGrant(t)(co.Acquire(req))
	l, err := cl.CompleteAcquire(req, g)
	if err != nil || l == nil {
		t.Fatal(err)
	}
	copied := req
	l2, err := cl.CompleteAcquire(copied, g)
	wantErrKind(t, err, "completed")
	if l2 != nil || !strings.Contains(err.Error(), `"agent-a-1"`) {
		t.Fatalf("lease %v, message %q", l2, err)
	}
	// The retried grant from the replay cache cannot complete it either.
	g2 := mustGrant(t)(co.Acquire(req))
	if _, err := cl.CompleteAcquire(req, g2); errKind(err) != "completed" {
		t.Fatalf("completing with the replayed grant: %v", err)
	}
	// Nor can a renewal started from it be completed twice.
	rreq, err := cl.BeginRenewal(l)
	if err != nil {
		t.Fatal(err)
	}
	rg := mustGrant(t)(co.Renew(rreq))
	if _, err := cl.CompleteRenewal(rreq, rg); err != nil {
		t.Fatal(err)
	}
	_, err = cl.CompleteRenewal(rreq, rg)
	wantErrKind(t, err, "completed")
}

// A grant that does not answer the request is an error, makes no lease and
// leaves the request open: the right grant still completes it.
func TestMismatchedGrants(t *testing.T) {
	cl := newClient(t, manual(t, "agent-a", 0, 1), "agent-a", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	req, _ := cl.BeginAcquire("r")
	g := mustGrant(t)(co.Acquire(req))
	cases := []struct {
		name  string
		mut   func(*lease.Grant)
		kind  string
		field string
	}{
		{"OtherRequestID", func(g *lease.Grant) { g.RequestID = "agent-a-99" }, "mismatch", "requestId"},
		{"OtherResource", func(g *lease.Grant) { g.Resource = "db" }, "mismatch", "resource"},
		{"OtherHolder", func(g *lease.Grant) { g.HolderID = "agent-b" }, "mismatch", "holderId"},
		{"ZeroFence", func(g *lease.Grant) { g.Fence = 0 }, "arg", "grant.fence"},
		{"ZeroTTL", func(g *lease.Grant) { g.TTL = 0 }, "arg", "grant.ttl"},
		{"NegativeTTL", func(g *lease.Grant) { g.TTL = -time.Second }, "arg", "grant.ttl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := g
			tc.mut(&bad)
			l, err := cl.CompleteAcquire(req, bad)
			wantErrKind(t, err, tc.kind)
			if l != nil {
				t.Fatal("made a lease")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("message %q does not name %s", err, tc.field)
			}
		})
	}
	if _, err := cl.CompleteRenewal(req, g); errKind(err) != "mismatch" {
		t.Fatalf("acquire request completed as a renewal: %v", err)
	}
	l, err := cl.CompleteAcquire(req, g)
	if err != nil || l.Token().Fence != 1 {
		t.Fatalf("request was not left open: %v", err)
	}
}

func TestMismatchedRenewalFence(t *testing.T) {
	cl := newClient(t, manual(t, "agent-a", 0, 1), "agent-a", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	l := acquire(t, cl, co, "r")
	rreq, err := cl.BeginRenewal(l)
	if err != nil {
		t.Fatal(err)
	}
	if rreq.Kind != lease.KindRenew || rreq.Fence != 1 || rreq.Resource != "r" || rreq.RequestID != "agent-a-2" {
		t.Fatalf("renewal request %+v", rreq)
	}
	rg := mustGrant(t)(co.Renew(rreq))
	bad := rg
	bad.Fence = 2
	l2, err := cl.CompleteRenewal(rreq, bad)
	wantErrKind(t, err, "mismatch")
	if l2 != nil || !strings.Contains(err.Error(), "fence") {
		t.Fatalf("lease %v, message %q", l2, err)
	}
	if _, err := cl.CompleteAcquire(rreq, rg); errKind(err) != "mismatch" {
		t.Fatalf("renewal completed as an acquisition: %v", err)
	}
	if _, err := cl.CompleteRenewal(rreq, rg); err != nil {
		t.Fatalf("renewal was not left open: %v", err)
	}
}

// Requests the client did not make, or that were changed after they were
// made, are refused.
func TestCompleteForeignOrAlteredRequest(t *testing.T) {
	clk := manual(t, "agent-a", 0, 1)
	cl := newClient(t, clk, "agent-a", 0)
	other := newClient(t, manual(t, "agent-b", 0, 1), "agent-b", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	req, _ := cl.BeginAcquire("r")
	g := mustGrant(t)(co.Acquire(req))

	cases := []struct {
		name string
		req  func() lease.Request
		kind string
	}{
		{"OtherHoldersRequest", func() lease.Request {
			r, _ := other.BeginAcquire("r")
			return r
		}, "arg"},
		{"SentAtMovedLater", func() lease.Request { r := req; r.SentAt.Millis += 500; return r }, "arg"},
		{"SentAtForeignDomain", func() lease.Request { r := req; r.SentAt.Domain = coordDomain; return r }, "domain"},
		{"SentAtNaN", func() lease.Request { r := req; r.SentAt.Millis = math.NaN(); return r }, "arg"},
		{"NeverBegun", func() lease.Request { r := req; r.RequestID = "forged"; return r }, "arg"},
		{"EmptyRequestID", func() lease.Request { r := req; r.RequestID = ""; return r }, "arg"},
		// The grant is changed to match, so only the record of the request
		// tells.
		{"ResourceChanged", func() lease.Request { r := req; r.Resource = "other"; return r }, "arg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req()
			gr := g
			gr.RequestID, gr.Resource, gr.HolderID = r.RequestID, r.Resource, r.HolderID
			l, err := cl.CompleteAcquire(r, gr)
			wantErrKind(t, err, tc.kind)
			if l != nil {
				t.Fatal("made a lease")
			}
		})
	}
	// A request id the client never issued, with a grant that matches it.
	forged := req
	forged.RequestID = "forged"
	gf := g
	gf.RequestID = "forged"
	_, err := cl.CompleteAcquire(forged, gf)
	wantErrKind(t, err, "arg")
	if !strings.Contains(err.Error(), "not begun") {
		t.Fatalf("message %q", err)
	}
	if _, err := cl.CompleteAcquire(req, g); err != nil {
		t.Fatalf("original request no longer completes: %v", err)
	}
}

func TestNewClientArguments(t *testing.T) {
	clk := manual(t, "agent-a", 0, 0)
	cases := []struct {
		name string
		cfg  lease.ClientConfig
		arg  string
	}{
		{"NilClock", lease.ClientConfig{HolderID: "a"}, "clock"},
		{"EmptyHolder", lease.ClientConfig{Clock: clk}, "holderId"},
		{"NegativeSkew", lease.ClientConfig{Clock: clk, HolderID: "a", ClockSkew: -time.Millisecond}, "clockSkew"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := lease.NewClient(tc.cfg)
			wantErrKind(t, err, "arg")
			if cl != nil || !strings.Contains(err.Error(), tc.arg) {
				t.Fatalf("client %v, message %q", cl, err)
			}
		})
	}
}

// Bad input to Begin* is refused before the clock is read, so a stepping
// clock does not move and nothing is pending.
func TestBeginBadInput(t *testing.T) {
	clk := manual(t, "agent-a", t0, 10)
	cl := newClient(t, clk, "agent-a", 0)
	otherClk := manual(t, "agent-b", t0, 0)
	other := newClient(t, otherClk, "agent-b", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	otherLease := acquire(t, other, co, "r")
	cases := []struct {
		name string
		call func() (lease.Request, error)
		kind string
	}{
		{"EmptyResource", func() (lease.Request, error) { return cl.BeginAcquire("") }, "arg"},
		{"EmptyResourceAt", func() (lease.Request, error) { return cl.BeginAcquireAt(clock.At("agent-a", 5), "") }, "arg"},
		{"ForeignDomainInstant", func() (lease.Request, error) { return cl.BeginAcquireAt(clock.At(coordDomain, 5), "r") }, "domain"},
		{"NaNInstant", func() (lease.Request, error) { return cl.BeginAcquireAt(clock.At("agent-a", math.NaN()), "r") }, "arg"},
		{"InfInstant", func() (lease.Request, error) { return cl.BeginAcquireAt(clock.At("agent-a", math.Inf(1)), "r") }, "arg"},
		{"NilLease", func() (lease.Request, error) { return cl.BeginRenewal(nil) }, "arg"},
		{"OtherClientsLease", func() (lease.Request, error) { return cl.BeginRenewal(otherLease) }, "arg"},
		{"OtherClientsLeaseAt", func() (lease.Request, error) { return cl.BeginRenewalAt(clock.At("agent-a", 5), otherLease) }, "arg"},
		{"ZeroLease", func() (lease.Request, error) { return cl.BeginRenewal(&lease.Lease{}) }, "arg"},
		{"OfOtherHolder", func() (lease.Request, error) {
			return cl.BeginRenewalOf(otherLease.Token(), "agent-a")
		}, "arg"},
		{"OfOtherDomain", func() (lease.Request, error) {
			return cl.BeginRenewalOf(fence.Token{Resource: "r", HolderID: "agent-a", Fence: 1}, "agent-b")
		}, "arg"},
		{"OfEmptyResource", func() (lease.Request, error) {
			return cl.BeginRenewalOf(fence.Token{HolderID: "agent-a", Fence: 1}, "agent-a")
		}, "arg"},
		{"OfFenceZero", func() (lease.Request, error) {
			return cl.BeginRenewalOf(fence.Token{Resource: "r", HolderID: "agent-a"}, "agent-a")
		}, "arg"},
		{"OfFenceAboveMax", func() (lease.Request, error) {
			return cl.BeginRenewalOf(fence.Token{Resource: "r", HolderID: "agent-a", Fence: lease.MaxFence + 1}, "agent-a")
		}, "arg"},
		{"OfZeroClient", func() (lease.Request, error) {
			return (&lease.Client{}).BeginRenewalOf(fence.Token{Resource: "r", HolderID: "agent-a", Fence: 1}, "agent-a")
		}, "arg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := clk.Peek()
			req, err := tc.call()
			wantErrKind(t, err, tc.kind)
			if req != (lease.Request{}) {
				t.Fatalf("returned %+v with the error", req)
			}
			if clk.Peek() != before {
				t.Fatal("a refused call read the clock")
			}
		})
	}
	// Nothing was made pending: the next id is the first.
	req, err := cl.BeginAcquire("r")
	if err != nil || req.RequestID != "agent-a-1" {
		t.Fatalf("next request %+v, %v", req, err)
	}
}

// The request-id generator must hand out fresh, non-empty ids.
func TestRequestIDGenerator(t *testing.T) {
	clk := manual(t, "agent-a", 0, 0)
	ids := []string{"x", "x", "", "y"}
	n := 0
	cl, err := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "a", NewRequestID: func() string { n++; return ids[n-1] }})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "arg", "arg", ""}
	for i, w := range want {
		_, err := cl.BeginAcquire("r")
		if errKind(err) != w {
			t.Fatalf("begin %d (id %q): %v, want %q", i, ids[i], err, w)
		}
	}
	// The default generator gives distinct 128-bit hex ids.
	def, err := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		r, err := def.BeginAcquire("r")
		if err != nil || len(r.RequestID) != 32 || strings.Trim(r.RequestID, "0123456789abcdef") != "" || seen[r.RequestID] {
			t.Fatalf("default id %q, %v", r.RequestID, err)
		}
		seen[r.RequestID] = true
	}
}

// The client remembers at most MaxPending open requests; the oldest is
// forgotten and can no longer complete. Completed requests do not count.
func TestPendingBound(t *testing.T) {
	cl := newClient(t, manual(t, "agent-a", 0, 0), "agent-a", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Hour, 0)
	// Many completed round trips never evict an open request.
	open, _ := cl.BeginAcquire("keep")
	for i := 0; i < 3*lease.MaxPending; i++ {
		r, err := cl.BeginAcquire("r" + itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		g := mustGrant(t)(co.AcquireAt(at(0), r))
		if _, err := cl.CompleteAcquire(r, g); err != nil {
			t.Fatal(err)
		}
	}
	og := mustGrant(t)(co.AcquireAt(at(0), open))
	// MaxPending more open requests push the first one out.
	for i := 0; i < lease.MaxPending; i++ {
		if _, err := cl.BeginAcquire("p"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := cl.CompleteAcquire(open, og)
	wantErrKind(t, err, "arg")
	if !strings.Contains(err.Error(), "forgotten") {
		t.Fatalf("message %q", err)
	}
}

// Renewal keeps the fence and anchors the new deadline at the renewal's send
// instant; the old Lease value keeps its deadline.
func TestRenewalAnchoredAtItsSend(t *testing.T) {
	clk := manual(t, "agent-a", t0, 0)
	cc := manual(t, coordDomain, t0, 0)
	cl := newClient(t, clk, "agent-a", 100*time.Millisecond)
	co := newCoordinator(t, cc, time.Second, 0)
	l1 := acquire(t, cl, co, "r")
	must(t, clk.Set(t500))
	rreq, _ := cl.BeginRenewal(l1)
	must(t, cc.Set(t900))
	rg := mustGrant(t)(co.Renew(rreq))
	must(t, clk.Set(t1400)) // the reply arrives 900ms after it was sent
	l2, err := cl.CompleteRenewal(rreq, rg)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() != l1.Token() {
		t.Fatalf("renewal changed the token: %v -> %v", l1.Token(), l2.Token())
	}
	if l1.Deadline().Millis != 900 || l2.Deadline().Millis != 1400 {
		t.Fatalf("deadlines %v, %v; want 900 and 1400 (500 + 1000 - 100)", l1.Deadline(), l2.Deadline())
	}
	if rg.CoordinatorExpiresAt != at(1900) {
		t.Fatalf("coordinator's copy ends at %v", rg.CoordinatorExpiresAt)
	}
}

// HasExpired and WouldAdmit answer for the instant they are asked; measuring
// a lease against the coordinator's clock is a *clock.DomainError.
func TestAdvisoryQueries(t *testing.T) {
	clk := manual(t, "agent-a", t0, 0)
	cl := newClient(t, clk, "agent-a", 0)
	co := newCoordinator(t, manual(t, coordDomain, t0, 0), time.Second, 0)
	req, _ := cl.BeginAcquire("r")
	g := mustGrant(t)(co.Acquire(req))
	l, err := cl.CompleteAcquire(req, g)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		at   clock.Instant
		want bool
		kind string
	}{
		{"At0", clock.At("agent-a", t0), false, ""},
		{"At999", clock.At("agent-a", t999), false, ""},
		{"AtDeadline", clock.At("agent-a", t1000), true, ""},
		{"After", clock.At("agent-a", t2000), true, ""},
		{"CoordinatorExpiresAt", g.CoordinatorExpiresAt, false, "domain"},
		{"NaN", clock.At("agent-a", math.NaN()), false, "arg"},
		{"NoDomain", clock.Instant{Millis: 5}, false, "arg"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			got, err := l.HasExpiredAt(s.at)
			wantErrKind(t, err, s.kind)
			if got != s.want {
				t.Fatalf("HasExpiredAt(%v) = %v", s.at, got)
			}
		})
	}
	if exp, err := l.HasExpired(); err != nil || exp {
		t.Fatalf("HasExpired at 0 = %v, %v", exp, err)
	}
	must(t, clk.Set(t1000))
	if exp, err := l.HasExpired(); err != nil || !exp {
		t.Fatalf("HasExpired at 1000 = %v, %v", exp, err)
	}
	var zero lease.Lease
	if _, err := zero.HasExpired(); errKind(err) != "arg" {
		t.Fatalf("zero Lease: %v", err)
	}

	gate, _ := fence.NewGate("r", fence.Options{})
	if ok, err := l.WouldAdmit(gate); err != nil || !ok {
		t.Fatalf("WouldAdmit = %v, %v", ok, err)
	}
	must(t, gate.Admit(fence.Token{Resource: "r", HolderID: "b", Fence: 2}))
	if ok, err := l.WouldAdmit(gate); err != nil || ok {
		t.Fatalf("WouldAdmit after a newer fence = %v, %v", ok, err)
	}
	if _, err := l.WouldAdmit(nil); errKind(err) != "arg" {
		t.Fatalf("WouldAdmit(nil): %v", err)
	}
	other, _ := fence.NewGate("db", fence.Options{})
	if _, err := l.WouldAdmit(other); err == nil {
		t.Fatal("WouldAdmit on another resource's gate")
	}
}

// Fixed acquisition, renewal, and re-acquisition after an Expired renewal,
// as a client sees them.
func TestExpiredRenewalMeansReacquire(t *testing.T) {
	clk := manual(t, "agent-a", t0, 0)
	cc := manual(t, coordDomain, t0, 0)
	cl := newClient(t, clk, "agent-a", 0)
	co := newCoordinator(t, cc, time.Second, 0)
	l := acquire(t, cl, co, "r")
	must(t, clk.Set(t2000))
	must(t, cc.Set(t2000))
	rreq, _ := cl.BeginRenewal(l)
	out, err := co.Renew(rreq)
	if err != nil || out.OK || out.Reason != lease.Expired {
		t.Fatalf("renewal of an expired lease = %+v, %v", out, err)
	}
	l2 := acquire(t, cl, co, "r")
	if l2.Token().Fence != 2 {
		t.Fatalf("re-acquired %v", l2)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BeginRenewalOf begins, from a lease's data, the same renewal BeginRenewal
// begins from the lease, and the renewal completes into a lease.
func TestBeginRenewalOf(t *testing.T) {
	clk := manual(t, "agent-a", t0, 0)
	cl := newClient(t, clk, "agent-a", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	l := acquire(t, cl, co, "r")
	if err := clk.Advance(7); err != nil {
		t.Fatal(err)
	}
	rreq, err := cl.BeginRenewalOf(l.Token(), l.Deadline().Domain)
	if err != nil {
		t.Fatal(err)
	}
	if rreq.Kind != lease.KindRenew || rreq.Resource != "r" || rreq.HolderID != "agent-a" || rreq.Fence != l.Token().Fence ||
		rreq.SentAt != clock.At("agent-a", t0+7) || rreq.RequestID == "" {
		t.Fatalf("renewal request %+v", rreq)
	}
	l2, err := cl.CompleteRenewal(rreq, mustGrant(t)(co.Renew(rreq)))
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() != l.Token() || l2.Deadline() != clock.At("agent-a", t0+7+1000) {
		t.Fatalf("renewed lease %v %v", l2.Token(), l2.Deadline())
	}
}

// TestRequestMemoryModel drives one client with a seeded mix of begins,
// completions and second completions, many more than it remembers, against
// a plain model of what it must remember: the last MaxPending open requests
// (the oldest open one is forgotten first) and the last 1024 completed ones.
// Every completion must answer as the model says: a lease, a
// *CompletedError, or an argument error for a forgotten request.
func TestRequestMemoryModel(t *testing.T) {
	const remembered = 1024 // completed ids a client remembers
	rng := rand.New(rand.NewPCG(13, 7))
	cl, err := lease.NewClient(lease.ClientConfig{Clock: manual(t, "agent-a", 0, 0), HolderID: "h", NewRequestID: seqIDs("q")})
	if err != nil {
		t.Fatal(err)
	}
	var (
		reqs      []lease.Request
		open      = map[string]bool{}
		openOrder []string
		done      = map[string]bool{}
		doneOrder []string
	)
	for step := range 40_000 {
		if len(reqs) == 0 || rng.IntN(100) < 60 {
			r, err := cl.BeginAcquire("r")
			if err != nil {
				t.Fatal(err)
			}
			for len(open) >= lease.MaxPending {
				if id := openOrder[0]; open[id] {
					delete(open, id)
				}
				openOrder = openOrder[1:]
			}
			reqs = append(reqs, r)
			open[r.RequestID] = true
			openOrder = append(openOrder, r.RequestID)
			continue
		}
		// Mostly recent requests, some from long ago.
		i := len(reqs) - 1 - rng.IntN(min(len(reqs), 64))
		if rng.IntN(4) == 0 {
			i = rng.IntN(len(reqs))
		}
		r := reqs[i]
		_, err := cl.CompleteAcquire(r, lease.Grant{RequestID: r.RequestID, Resource: "r", HolderID: "h", Fence: 1, TTL: time.Second})
		switch {
		case done[r.RequestID]:
			if errKind(err) != "completed" {
				t.Fatalf("step %d: completing %s again: %v, want a *CompletedError", step, r.RequestID, err)
			}
		case open[r.RequestID]:
			if err != nil {
				t.Fatalf("step %d: completing open %s: %v", step, r.RequestID, err)
			}
			delete(open, r.RequestID)
			if len(doneOrder) == remembered {
				delete(done, doneOrder[0])
				doneOrder = doneOrder[1:]
			}
			done[r.RequestID] = true
			doneOrder = append(doneOrder, r.RequestID)
		default:
			if errKind(err) != "arg" || !strings.Contains(err.Error(), "forgotten") {
				t.Fatalf("step %d: completing forgotten %s: %v, want an argument error", step, r.RequestID, err)
			}
		}
	}
	if len(open) < lease.MaxPending/2 {
		t.Fatalf("only %d requests open at the end: the run never reached MaxPending", len(open))
	}
}

// A client remembers the last 1024 completed request ids: a second
// completion of one of them is a *CompletedError; older ones are forgotten.
func TestCompletedMemoryIs1024(t *testing.T) {
	cl := newClient(t, manual(t, "agent-a", 0, 0), "agent-a", 0)
	complete := func() (lease.Request, lease.Grant) {
		r, err := cl.BeginAcquire("r")
		if err != nil {
			t.Fatal(err)
		}
		g := lease.Grant{RequestID: r.RequestID, Resource: "r", HolderID: "agent-a", Fence: 1, TTL: time.Second}
		if _, err := cl.CompleteAcquire(r, g); err != nil {
			t.Fatal(err)
		}
		return r, g
	}
	first, g := complete()
	for range 1023 {
		complete()
	}
	_, err := cl.CompleteAcquire(first, g)
	wantErrKind(t, err, "completed")
	complete()
	_, err = cl.CompleteAcquire(first, g)
	wantErrKind(t, err, "arg")
}
