package lease_test

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// A typed nil *clock.Manual (or *clock.Guarded) passes a nil check but has
// no domain: both constructors refuse it instead of panicking later.
func TestTypedNilClockIsRefused(t *testing.T) {
	var m *clock.Manual
	var g *clock.Guarded
	for _, clk := range []clock.Clock{m, g, &clock.Manual{}, &clock.Guarded{}} {
		co, err := lease.NewCoordinator(lease.CoordinatorConfig{Clock: clk, TTL: time.Second})
		if co != nil {
			t.Fatalf("NewCoordinator(%T) returned a coordinator", clk)
		}
		wantErrKind(t, err, "arg")
		cl, err := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "h"})
		if cl != nil {
			t.Fatalf("NewClient(%T) returned a client", clk)
		}
		wantErrKind(t, err, "arg")
	}
}

// Every method of a nil or zero Lease answers without panicking: the value
// getters return zero values (which every gate and client refuses), the
// others an argument error.
func TestNilAndZeroLease(t *testing.T) {
	gate, _ := fence.NewGate("r", fence.Options{})
	for name, l := range map[string]*lease.Lease{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			if l.Token() != (fence.Token{}) || l.Deadline() != (clock.Instant{}) || l.Grant() != (lease.Grant{}) {
				t.Fatalf("values %v %v %+v", l.Token(), l.Deadline(), l.Grant())
			}
			_, err := l.HasExpired()
			wantErrKind(t, err, "arg")
			_, err = l.HasExpiredAt(clock.At("agent", 0))
			wantErrKind(t, err, "arg")
			_, err = l.WouldAdmit(gate)
			wantErrKind(t, err, "arg")
			if err := gate.Commit(l.Token(), func() error { return nil }); err == nil {
				t.Fatal("a gate admitted the token of a nil lease")
			}
			cl := newClient(t, manual(t, "agent", 0, 0), "h", 0)
			_, err = cl.BeginRenewal(l)
			wantErrKind(t, err, "arg")
			_, err = cl.BeginRenewalAt(clock.At("agent", 0), l)
			wantErrKind(t, err, "arg")
		})
	}
}

// A nil or zero Client refuses every call with an argument error.
func TestNilAndZeroClient(t *testing.T) {
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	real := newClient(t, manual(t, "agent-h", 0, 0), "h", 0)
	req, _ := real.BeginAcquire("r")
	g := mustGrant(t)(co.Acquire(req))
	l, _ := real.CompleteAcquire(req, g)
	var nilClient *lease.Client
	for name, cl := range map[string]*lease.Client{"nil": nilClient, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			if cl.Domain() != "" || cl.HolderID() != "" || cl.ClockSkew() != 0 {
				t.Fatalf("getters %q %q %v", cl.Domain(), cl.HolderID(), cl.ClockSkew())
			}
			_, err := cl.BeginAcquire("r")
			wantErrKind(t, err, "arg")
			_, err = cl.BeginAcquireAt(clock.At("agent-h", 0), "r")
			wantErrKind(t, err, "arg")
			_, err = cl.BeginRenewal(l)
			wantErrKind(t, err, "arg")
			_, err = cl.BeginRenewalAt(clock.At("agent-h", 0), l)
			wantErrKind(t, err, "arg")
			_, err = cl.CompleteAcquire(req, g)
			wantErrKind(t, err, "arg")
			_, err = cl.CompleteRenewal(req, g)
			wantErrKind(t, err, "arg")
		})
	}
}

// A nil or zero Coordinator refuses every call with an argument error and
// its getters return zero values.
func TestNilAndZeroCoordinator(t *testing.T) {
	var nilCo *lease.Coordinator
	req := acquireReq("a1", "a", "r")
	tok := fence.Token{Resource: "r", HolderID: "a", Fence: 1}
	for name, c := range map[string]*lease.Coordinator{"nil": nilCo, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			if c.Domain() != "" || c.TTL() != 0 || c.IssuedFence() != 0 {
				t.Fatalf("getters %q %v %d", c.Domain(), c.TTL(), c.IssuedFence())
			}
			for _, op := range []struct {
				name string
				run  func() error
			}{
				{"Acquire", func() error { _, err := c.Acquire(req); return err }},
				{"AcquireAt", func() error { _, err := c.AcquireAt(at(0), req); return err }},
				{"Renew", func() error { _, err := c.Renew(renewReq("a2", "a", "r", 1)); return err }},
				{"RenewAt", func() error { _, err := c.RenewAt(at(0), renewReq("a2", "a", "r", 1)); return err }},
				{"Release", func() error { _, err := c.Release(tok); return err }},
				{"ReleaseAt", func() error { _, err := c.ReleaseAt(at(0), tok); return err }},
				{"Holder", func() error { _, _, _, _, err := c.Holder(at(0), "r"); return err }},
				{"Restore", func() error { return c.Restore(lease.Snapshot{}) }},
			} {
				err := op.run()
				wantErrKind(t, err, "arg")
				if !strings.Contains(err.Error(), "NewCoordinator") {
					t.Fatalf("%s: %v", op.name, err)
				}
			}
			if s := c.Snapshot(); s.IssuedFence != 0 || s.Leases != nil {
				t.Fatalf("Snapshot = %+v", s)
			}
			if _, ok := c.LeaseOf("r"); ok {
				t.Fatal("LeaseOf found a lease")
			}
		})
	}
}

// A call refused for a reason that does not depend on the time leaves a
// stepping coordinator clock where it was: a malformed request, a request
// id reused by another holder or for another resource, a renewal of a fence
// never issued, a bad token.
func TestRefusedCallsDoNotReadTheClock(t *testing.T) {
	clk := manual(t, coordDomain, 0, 1)
	c := newCoordinator(t, clk, time.Hour, 0)
	mustGrant(t)(c.Acquire(acquireReq("a1", "a", "r")))
	malformed := acquireReq("x", "b", "r")
	malformed.SentAt.Domain = ""
	cases := []struct {
		name string
		run  func() error
	}{
		{"MalformedAcquire", func() error { _, err := c.Acquire(malformed); return err }},
		{"AcquireWithFence", func() error { r := acquireReq("x", "b", "r"); r.Fence = 3; _, err := c.Acquire(r); return err }},
		{"IDReusedByOtherHolder", func() error { _, err := c.Acquire(acquireReq("a1", "b", "r")); return err }},
		{"IDReusedForOtherResource", func() error { _, err := c.Acquire(acquireReq("a1", "a", "r2")); return err }},
		{"MalformedRenewal", func() error { _, err := c.Renew(renewReq("x", "", "r", 1)); return err }},
		{"RenewFenceNeverIssued", func() error { _, err := c.Renew(renewReq("x", "a", "r", 2)); return err }},
		{"ReleaseBadToken", func() error { _, err := c.Release(fence.Token{Resource: "r", HolderID: "a"}); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := clk.Peek()
			wantErrKind(t, tc.run(), "arg")
			if clk.Peek() != before {
				t.Fatalf("the refused call read the clock: %v, then %v", before, clk.Peek())
			}
		})
	}
	if c.IssuedFence() != 1 {
		t.Fatalf("IssuedFence = %d", c.IssuedFence())
	}
}

// Once the fences are used up, an acquisition that is not a retry of the
// current grant is refused without reading the clock; a retry of the last
// grant is still answered.
func TestExhaustedFencesRefuseBeforeReading(t *testing.T) {
	clk := manual(t, coordDomain, 0, 1)
	c := newCoordinator(t, clk, time.Hour, lease.MaxFence-1)
	g := mustGrant(t)(c.Acquire(acquireReq("last", "a", "r")))
	if g.Fence != lease.MaxFence {
		t.Fatalf("fence %d", g.Fence)
	}
	before := clk.Peek()
	_, err := c.Acquire(acquireReq("next", "b", "s"))
	wantErrKind(t, err, "arg")
	if clk.Peek() != before {
		t.Fatal("the refused acquisition read the clock")
	}
	if again := mustGrant(t)(c.Acquire(acquireReq("last", "a", "r"))); again != g {
		t.Fatalf("retry = %+v, want %+v", again, g)
	}
}

// Holder is a query: asking about a far later instant does not hold back
// the operations that follow.
func TestHolderDoesNotRecordItsReading(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	mustGrant(t)(c.AcquireAt(at(0), acquireReq("a1", "a", "r")))
	if _, _, _, ok, err := c.Holder(at(1e12), "r"); ok || err != nil {
		t.Fatalf("Holder(1e12) = %v, %v", ok, err)
	}
	g := mustGrant(t)(c.AcquireAt(at(t1000), acquireReq("b1", "b", "s")))
	if g.Fence != 2 {
		t.Fatalf("fence %d", g.Fence)
	}
	// A reading earlier than one acted on is still refused by Holder.
	_, _, _, _, err := c.Holder(at(t500), "r")
	wantErrKind(t, err, "reading")
}

// A send instant later than the client clock's current reading would anchor
// the deadline at a send that has not happened: BeginAcquireAt and
// BeginRenewalAt refuse it, and accept the present and the past.
func TestAnchorFromTheFutureIsRefused(t *testing.T) {
	clk := manual(t, "agent-h", t1000, 0)
	cl := newClient(t, clk, "h", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Hour, 0)
	_, err := cl.BeginAcquireAt(clock.At("agent-h", t1000+0.001), "r")
	wantErrKind(t, err, "arg")
	if !strings.Contains(err.Error(), "future") {
		t.Fatalf("message %q", err)
	}
	req, err := cl.BeginAcquireAt(clock.At("agent-h", t1000), "r")
	must(t, err)
	l, err := cl.CompleteAcquire(req, mustGrant(t)(co.AcquireAt(at(0), req)))
	must(t, err)
	_, err = cl.BeginRenewalAt(clock.At("agent-h", t2000), l)
	wantErrKind(t, err, "arg")
	if _, err := cl.BeginRenewalAt(clock.At("agent-h", t500), l); err != nil {
		t.Fatalf("a past anchor: %v", err)
	}
}

// WouldAdmit answers true for a token whose fence equals the gate's floor:
// the gate admits the generation it last admitted.
func TestWouldAdmitAtTheFloor(t *testing.T) {
	cl := newClient(t, manual(t, "agent-h", 0, 0), "h", 0)
	co := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Hour, 4)
	req, _ := cl.BeginAcquire("r")
	l, err := cl.CompleteAcquire(req, mustGrant(t)(co.AcquireAt(at(0), req)))
	must(t, err)
	gate, _ := fence.NewGate("r", fence.Options{InitialFloor: 5})
	if ok, err := l.WouldAdmit(gate); err != nil || !ok {
		t.Fatalf("fence 5 at floor 5: WouldAdmit = %v, %v", ok, err)
	}
	must(t, gate.Commit(l.Token(), func() error { return nil }))
	if ok, err := l.WouldAdmit(gate); err != nil || !ok {
		t.Fatalf("after its own write: WouldAdmit = %v, %v", ok, err)
	}
}

// yieldingClock hands out 0, 1, 2, ... in the coordinator's domain and, for
// every even reading, yields to the other goroutines before returning it. A
// coordinator that read its clock outside its lock would let the odd reading
// taken second be acted on before the even one taken first, and then refuse
// the even one as backwards; read under the lock, the other callers wait and
// the yields only cost time.
type yieldingClock struct {
	mu   sync.Mutex
	next float64
}

func (y *yieldingClock) Domain() string { return coordDomain }

func (y *yieldingClock) Now() (clock.Instant, error) {
	y.mu.Lock()
	v := y.next
	y.next++
	y.mu.Unlock()
	if int64(v)%2 == 0 {
		for range 50 {
			runtime.Gosched()
		}
	}
	return at(v), nil
}

func TestCoordinatorReadsItsClockUnderItsLock(t *testing.T) {
	c := newCoordinator(t, &yieldingClock{}, time.Hour, 0)
	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			res := "r" + itoa(w)
			for i := range 100 {
				id := res + "-" + itoa(i)
				out, err := c.Acquire(acquireReq(id+"a", "h"+itoa(w), res))
				if err == nil && out.OK {
					out, err = c.Renew(renewReq(id+"r", "h"+itoa(w), res, out.Grant.Fence))
				}
				if err == nil && out.OK {
					_, err = c.Release(out.Grant.Token())
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("concurrent callers sharing the coordinator's clock: %v", err)
	}
}
