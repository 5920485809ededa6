package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Fixed coordinator readings.
var (
	t0    = clock.At(coordDomain, 0)
	t10   = clock.At(coordDomain, 10)
	t500  = clock.At(coordDomain, 500)
	t1500 = clock.At(coordDomain, 1500)
)

const checkTTL = time.Second

func newTestChecker(p Persistence) *Checker {
	return NewChecker(CheckerConfig{
		Persistence: p, SkewWithin: true, CoordinatorDomain: coordDomain, MaxViolations: 10,
		ToTrue: func(t clock.Instant) float64 { return t.Millis },
	})
}

func acqReq(holder, id string) lease.Request {
	return lease.Request{Kind: lease.KindAcquire, RequestID: id, Resource: "r", HolderID: holder, SentAt: clock.At(holder, 0)}
}

func grantOut(req lease.Request, f uint64, now clock.Instant) lease.Outcome {
	return lease.Outcome{OK: true, Grant: lease.Grant{
		RequestID: req.RequestID, Resource: req.Resource, HolderID: req.HolderID, Fence: f, TTL: checkTTL,
		CoordinatorExpiresAt: now.AddMillis(clock.Millis(checkTTL)),
	}}
}

// grant records holder's acquire (request id holder+"1") granted fence f
// at at, and returns the request.
func grant(c *Checker, holder string, f uint64, at clock.Instant) lease.Request {
	req := acqReq(holder, holder+"1")
	c.Acquired(at, req, grantOut(req, f, at), nil)
	return req
}

func renewReq(holder string, f uint64) lease.Request {
	return lease.Request{Kind: lease.KindRenew, RequestID: holder + "-renew", Resource: "r", HolderID: holder, Fence: f, SentAt: clock.At(holder, 0)}
}

// TestCheckerNamesEachInvariant feeds the checker answers that break one
// invariant each and checks that the violation names it.
func TestCheckerNamesEachInvariant(t *testing.T) {
	cases := []struct {
		want Invariant
		p    Persistence
		run  func(t *testing.T, c *Checker)
	}{
		{GateFloor, Persisted, func(t *testing.T, c *Checker) {
			c.WriteRuns(fence.Token{Resource: "r", HolderID: "b", Fence: 5})
			c.WriteRuns(fence.Token{Resource: "r", HolderID: "a", Fence: 3})
		}},
		{GateFloor, Persisted, func(t *testing.T, c *Checker) {
			// A gate whose floor went back down below what it accepted.
			g, _ := fence.NewGate("r", fence.Options{InitialFloor: 2})
			c.WriteRuns(fence.Token{Resource: "r", HolderID: "b", Fence: 5})
			c.GateAnswered(g, fence.Token{Resource: "r", HolderID: "b", Fence: 5}, false, true, nil)
		}},
		{HolderInsideCoordinator, Persisted, func(t *testing.T, c *Checker) {
			// The coordinator promised 1s; a transport that doubled the TTL
			// makes the holder believe 2s.
			hc, _ := clock.NewManual("a", clock.ManualOptions{})
			cl, _ := lease.NewClient(lease.ClientConfig{Clock: hc, HolderID: "a", ClockSkew: 10 * time.Millisecond})
			req, _ := cl.BeginAcquireAt(clock.At("a", 0), "r")
			out := grantOut(req, 1, t0)
			c.Acquired(t0, req, out, nil)
			g := out.Grant
			g.TTL = 2 * checkTTL
			l, err := cl.CompleteAcquire(req, g)
			if err != nil {
				t.Fatal(err)
			}
			c.Holding(100, l, 0)
		}},
		{FenceOrder, Persisted, func(t *testing.T, c *Checker) {
			grant(c, "a", 5, t0)
			grant(c, "b", 3, t1500)
		}},
		{UniqueFence, Persisted, func(t *testing.T, c *Checker) {
			grant(c, "a", 1, t0)
			grant(c, "b", 1, t1500)
		}},
		{RetrySameFence, Persisted, func(t *testing.T, c *Checker) {
			a := grant(c, "a", 1, t0)
			c.Acquired(t10, a, grantOut(a, 2, t10), nil)
		}},
		{NoResurrection, Persisted, func(t *testing.T, c *Checker) {
			grant(c, "a", 1, t0)
			r := renewReq("a", 1)
			c.Renewed(t1500, r, grantOut(r, 1, t1500), nil)
		}},
		{RestartAboveGate, Persisted, func(t *testing.T, c *Checker) {
			grant(c, "a", 4, t0)
			c.WriteRuns(fence.Token{Resource: "r", HolderID: "a", Fence: 4})
			c.Restarted()
			// A successor that resumed from a stale copy of the fence.
			grant(c, "b", 4, t10)
		}},
		{Exclusive, Persisted, func(t *testing.T, c *Checker) {
			grant(c, "a", 1, t0)
			grant(c, "b", 2, t500)
		}},
		{CoreError, Persisted, func(t *testing.T, c *Checker) {
			a := acqReq("a", "a1")
			c.Acquired(t0, a, lease.Outcome{}, errors.New("lease: boom"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.want.String(), func(t *testing.T) {
			c := newTestChecker(tc.p)
			tc.run(t, c)
			vs := c.Violations()
			if len(vs) == 0 {
				t.Fatalf("no violation; want %s", tc.want)
			}
			if vs[0].Invariant != tc.want {
				t.Fatalf("first violation is %v; want %s", vs[0], tc.want)
			}
			if msg := vs[0].Error(); !strings.Contains(msg, tc.want.String()) || !errors.Is(vs[0], ErrInvariant) {
				t.Fatalf("message does not name the invariant: %s", msg)
			}
		})
	}
}

// TestCheckerAmnesiacScope: after an amnesiac restart fences start again at
// 1, and only within one incarnation do order and uniqueness apply. The same
// history under persistence is a violation.
func TestCheckerAmnesiacScope(t *testing.T) {
	history := func(c *Checker) {
		grant(c, "a", 1, t0)
		c.WriteRuns(fence.Token{Resource: "r", HolderID: "a", Fence: 1})
		c.Restarted()
		grant(c, "b", 1, t10)
	}
	am := newTestChecker(Amnesiac)
	history(am)
	if err := am.Err(); err != nil {
		t.Fatalf("amnesiac: %v", err)
	}
	pe := newTestChecker(Persisted)
	history(pe)
	if vs := pe.Violations(); len(vs) != 2 || vs[0].Invariant != RestartAboveGate || vs[1].Invariant != FenceOrder {
		t.Fatalf("persisted: want invariants 7 and 3 violated, got %v", vs)
	}
}

// TestCheckerAcceptsCorrectAnswers: a replay, a renewal, a release and a
// new grant after the release are all fine.
func TestCheckerAcceptsCorrectAnswers(t *testing.T) {
	c := newTestChecker(Persisted)
	a := grant(c, "a", 1, t0)
	c.Acquired(t10, a, grantOut(a, 1, t0), nil) // the replay repeats the first grant
	r := renewReq("a", 1)
	c.Renewed(t500, r, grantOut(r, 1, t500), nil)
	c.Released(clock.At(coordDomain, 600), fence.Token{Resource: "r", HolderID: "a", Fence: 1}, true, nil)
	grant(c, "b", 2, clock.At(coordDomain, 700))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	if c.Checks[RetrySameFence] == 0 || c.Checks[NoResurrection] == 0 || c.Checks[FenceOrder] == 0 {
		t.Fatalf("checks not counted: %v", c.Checks)
	}
}
