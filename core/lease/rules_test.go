package lease_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

var rules = lease.Rules{Domain: coordDomain, TTL: time.Second}

// TestRulesAgreeWithCoordinator runs seeded schedules of acquisitions
// (fresh and retried), renewals and releases on a Coordinator and, side by
// side, on the pure Rules over a map of States kept by the test, and checks
// that every answer, every error kind, every resource's lease and the fence
// counter agree at every step.
func TestRulesAgreeWithCoordinator(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 19))
		clk := manual(t, coordDomain, 0, 0)
		c := newCoordinator(t, clk, time.Second, 0)
		states := map[string]lease.State{}
		var issued uint64
		grants := map[string]lease.Grant{} // the last grant of each request id
		var ids []string
		resources := []string{"r0", "r1", "r2"}
		holders := []string{"a", "b", "c"}
		now := 0.0
		for step := range 400 {
			now += float64(rng.IntN(400))
			clk.Set(now)
			reading := at(now)
			res, holder := resources[rng.IntN(len(resources))], holders[rng.IntN(len(holders))]
			s := states[res]
			s.Issued = issued
			var want, got lease.Outcome
			var werr, gerr error
			var next lease.State
			switch op := rng.IntN(4); {
			case op == 0 && len(ids) > 0: // a retry, possibly with another holder or resource
				id := ids[rng.IntN(len(ids))]
				g := grants[id]
				req := acquireReq(id, g.HolderID, g.Resource)
				if rng.IntN(4) == 0 {
					req.HolderID = holder
				}
				if rng.IntN(4) == 0 {
					req.Resource = res
				}
				s = states[req.Resource]
				s.Issued = issued
				want, werr = c.AcquireAt(reading, req)
				got, next, gerr = rules.Acquire(reading, s, &g, req)
				res = req.Resource
				if gerr == nil && got.OK {
					grants[id] = got.Grant // a retry after its lease ended is a new grant
				}
			case op <= 1:
				id := "q" + itoa(step)
				req := acquireReq(id, holder, res)
				want, werr = c.AcquireAt(reading, req)
				got, next, gerr = rules.Acquire(reading, s, nil, req)
				if gerr == nil && got.OK {
					grants[id] = got.Grant
					ids = append(ids, id)
				}
			case op == 2:
				f := s.Fence
				if rng.IntN(3) == 0 {
					f = uint64(rng.IntN(int(issued) + 2))
				}
				req := renewReq("n"+itoa(step), holder, res, max(f, 1))
				want, werr = c.RenewAt(reading, req)
				got, next, gerr = rules.Renew(reading, s, req)
			default:
				tok := fence.Token{Resource: res, HolderID: holder, Fence: max(s.Fence, 1)}
				if rng.IntN(2) == 0 {
					tok.HolderID = s.HolderID
					if tok.HolderID == "" {
						tok.HolderID = holder
					}
				}
				var wok, gok bool
				wok, werr = c.ReleaseAt(reading, tok)
				gok, next, gerr = rules.Release(reading, s, tok)
				want.OK, got.OK = wok, gok
			}
			if errKind(werr) != errKind(gerr) || want != got {
				t.Fatalf("seed %d step %d: coordinator %+v (%v), rules %+v (%v)", seed, step, want, werr, got, gerr)
			}
			if gerr == nil {
				issued = next.Issued
				next.Issued = 0
				states[res] = next
			}
			if c.IssuedFence() != issued {
				t.Fatalf("seed %d step %d: coordinator issued %d, rules %d", seed, step, c.IssuedFence(), issued)
			}
			for _, r := range resources {
				l, ok := c.LeaseOf(r)
				s := states[r]
				if ok != s.Held || (ok && (l.HolderID != s.HolderID || l.Fence != s.Fence || l.ExpiresAt.Millis != s.ExpiresAt)) {
					t.Fatalf("seed %d step %d: %s is %+v (%v) in the coordinator, %+v in the rules", seed, step, r, l, ok, s)
				}
			}
			// An expired record the coordinator swept is the same as none.
			for r, s := range states {
				if s.Held && s.ExpiresAt <= now {
					if _, ok := c.LeaseOf(r); !ok {
						states[r] = lease.State{}
					}
				}
			}
		}
	}
}

func TestRulesRefuse(t *testing.T) {
	req := acquireReq("q1", "a", "r")
	other := lease.Grant{RequestID: "q1", Resource: "r", HolderID: "b", Fence: 1, TTL: time.Second, CoordinatorExpiresAt: at(1000)}
	for _, tc := range []struct {
		name string
		err  func() error
		kind string
	}{
		{"ZeroRules", func() error { _, _, err := lease.Rules{}.Acquire(at(0), lease.State{}, nil, req); return err }, "arg"},
		{"NoTTL", func() error {
			_, _, err := lease.Rules{Domain: coordDomain}.Renew(at(0), lease.State{}, req)
			return err
		}, "arg"},
		{"OtherDomain", func() error {
			_, _, err := rules.Acquire(clock.At("agent-a", 0), lease.State{}, nil, req)
			return err
		}, "domain"},
		{"NaNReading", func() error {
			_, _, err := rules.Release(at(math.NaN()), lease.State{}, fence.Token{Resource: "r", HolderID: "a", Fence: 1})
			return err
		}, "arg"},
		{"RenewAsAcquire", func() error {
			_, _, err := rules.Acquire(at(0), lease.State{}, nil, renewReq("q", "a", "r", 1))
			return err
		}, "mismatch"},
		{"IDOfAnotherHolder", func() error { _, _, err := rules.Acquire(at(0), lease.State{}, &other, req); return err }, "arg"},
		{"Exhausted", func() error {
			_, _, err := rules.Acquire(at(0), lease.State{Issued: lease.MaxFence}, nil, req)
			return err
		}, "arg"},
		{"NeverIssued", func() error {
			_, _, err := rules.Renew(at(0), lease.State{Issued: 1}, renewReq("q", "a", "r", 2))
			return err
		}, "arg"},
		{"BadToken", func() error {
			_, _, err := rules.Release(at(0), lease.State{}, fence.Token{Resource: "r", Fence: 1})
			return err
		}, "arg"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErrKind(t, tc.err(), tc.kind) })
	}
}

// TestRulesDecide walks one resource through the rules, each step starting
// from the state the previous one returned.
func TestRulesDecide(t *testing.T) {
	var s lease.State
	out, s, err := rules.Acquire(at(t0), s, nil, acquireReq("q1", "a", "r"))
	g := mustGrant(t)(out, err)
	if g.Fence != 1 || s != (lease.State{Held: true, HolderID: "a", Fence: 1, ExpiresAt: 1000, Issued: 1}) {
		t.Fatalf("grant %+v, state %+v", g, s)
	}
	// Denied to the holder itself; a retry of the granting request (its
	// prior grant) gets the same grant; nothing changes either way.
	if out, s2, _ := rules.Acquire(at(t500), s, nil, acquireReq("q2", "a", "r")); out.OK || out.HeldBy != "a" || out.RetryAfter != 500*time.Millisecond || s2 != s {
		t.Fatalf("second acquisition: %+v %+v", out, s2)
	}
	if out, s2, _ := rules.Acquire(at(t500), s, &g, acquireReq("q1", "a", "r")); !out.OK || out.Grant != g || s2 != s {
		t.Fatalf("retry: %+v %+v", out, s2)
	}
	// Renewed from the reading, same fence.
	out, s, err = rules.Renew(at(t900), s, renewReq("n1", "a", "r", 1))
	if g := mustGrant(t)(out, err); g.Fence != 1 || g.CoordinatorExpiresAt != at(1900) || s.ExpiresAt != 1900 {
		t.Fatalf("renewal %+v, state %+v", g, s)
	}
	// Expired exactly at its end: never resurrected; a new holder gets fence 2.
	if out, s2, _ := rules.Renew(at(t1900), s, renewReq("n2", "a", "r", 1)); out.OK || out.Reason != lease.Expired || s2 != s {
		t.Fatalf("renewal at the expiry: %+v", out)
	}
	out, s, err = rules.Acquire(at(t1900), s, &g, acquireReq("q1", "a", "r"))
	if g2 := mustGrant(t)(out, err); g2.Fence != 2 || s.Issued != 2 {
		t.Fatalf("a retry after the lease ended: %+v, state %+v", g2, s)
	}
	// Released by its holder only.
	if ok, s2, _ := rules.Release(at(t2000), s, fence.Token{Resource: "r", HolderID: "b", Fence: 2}); ok || s2 != s {
		t.Fatal("released by another holder")
	}
	ok, s, err := rules.Release(at(t2000), s, fence.Token{Resource: "r", HolderID: "a", Fence: 2})
	if err != nil || !ok || s != (lease.State{Issued: 2}) {
		t.Fatalf("release: %v %+v %v", ok, s, err)
	}
}
