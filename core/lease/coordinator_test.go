package lease_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// cstep is one call to a coordinator at a fixed instant and what it must
// answer.
type cstep struct {
	name   string
	at     float64
	domain string // defaults to the coordinator's
	op     string // "acquire", "renew", "release", "holder"
	id     string
	holder string
	res    string // defaults to "r"
	fence  uint64
	req    *lease.Request // sent as is instead of one built from the fields

	want       string // "grant", "denied", "expired", "released", "kept", "held", "free", or an error kind
	wantFence  uint64
	heldBy     string
	left       time.Duration
	coordExp   float64 // grant.CoordinatorExpiresAt, checked when non-zero
	wantIssued uint64
}

// runCoordinator runs steps in order against c, each as a subtest, checking
// every answer and IssuedFence after each step.
func runCoordinator(t *testing.T, c *lease.Coordinator, steps []cstep) {
	t.Helper()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			t.Helper()
			dom := s.domain
			if dom == "" {
				dom = coordDomain
			}
			now := clock.At(dom, s.at)
			res := s.res
			if res == "" {
				res = "r"
			}
			var (
				out     lease.Outcome
				err     error
				ok      bool
				holder  string
				f       uint64
				left    time.Duration
				outcome string
			)
			switch s.op {
			case "acquire", "renew":
				req := acquireReq(s.id, s.holder, res)
				if s.op == "renew" {
					req = renewReq(s.id, s.holder, res, s.fence)
				}
				if s.req != nil {
					req = *s.req
				}
				if s.op == "acquire" {
					out, err = c.AcquireAt(now, req)
				} else {
					out, err = c.RenewAt(now, req)
				}
				switch {
				case err != nil:
				case out.OK && out.HeldBy == "" && out.Reason == "":
					outcome = "grant"
				case !out.OK && out.Grant == (lease.Grant{}) && out.HeldBy != "" && out.Reason == "":
					outcome = "denied"
				case !out.OK && out.Grant == (lease.Grant{}) && out.HeldBy == "" && out.Reason == lease.Expired:
					outcome = "expired"
				default:
					t.Fatalf("malformed outcome %+v", out)
				}
			case "release":
				ok, err = c.ReleaseAt(now, fence.Token{Resource: res, HolderID: s.holder, Fence: s.fence})
				if ok {
					outcome = "released"
				} else {
					outcome = "kept"
				}
			case "holder":
				holder, f, left, ok, err = c.Holder(now, res)
				if ok {
					outcome = "held"
				} else {
					outcome = "free"
				}
			default:
				t.Fatalf("bad op %q", s.op)
			}
			if err != nil {
				wantErrKind(t, err, s.want)
				if out != (lease.Outcome{}) || ok {
					t.Fatalf("answer %+v / %v returned with an error", out, ok)
				}
			} else if outcome != s.want {
				t.Fatalf("%s = %s %+v, want %s", s.op, outcome, out, s.want)
			}
			switch outcome {
			case "grant":
				g := out.Grant
				if g.Fence != s.wantFence || g.HolderID != s.holder || g.Resource != res || g.RequestID != s.id || g.TTL != c.TTL() {
					t.Fatalf("grant %+v, want fence %d for %s/%s/%s", g, s.wantFence, s.id, s.holder, res)
				}
				if g.CoordinatorExpiresAt.Domain != coordDomain {
					t.Fatalf("CoordinatorExpiresAt in domain %q", g.CoordinatorExpiresAt.Domain)
				}
				if s.coordExp != 0 && g.CoordinatorExpiresAt.Millis != s.coordExp {
					t.Fatalf("CoordinatorExpiresAt = %v, want %v", g.CoordinatorExpiresAt, s.coordExp)
				}
			case "denied":
				if out.HeldBy != s.heldBy || out.RetryAfter != s.left {
					t.Fatalf("denied: held by %q for %v, want %q for %v", out.HeldBy, out.RetryAfter, s.heldBy, s.left)
				}
			case "held":
				if holder != s.heldBy || f != s.wantFence || left != s.left {
					t.Fatalf("held by %q fence %d for %v, want %q fence %d for %v", holder, f, left, s.heldBy, s.wantFence, s.left)
				}
			}
			if got := c.IssuedFence(); got != s.wantIssued {
				t.Fatalf("IssuedFence = %d, want %d", got, s.wantIssued)
			}
		})
	}
}

// The lifecycle of one resource: grants, denials, renewal from the
// coordinator's own reading, expiry without resurrection, release, and a
// strictly higher fence for every new generation.
func TestCoordinatorLifecycle(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	runCoordinator(t, c, []cstep{
		{name: "AAcquiresFreeResource", at: t0, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: 1, coordExp: 1000, wantIssued: 1},
		{name: "BDeniedWithHolderAndTimeLeft", at: t500, op: "acquire", id: "b1", holder: "b", want: "denied", heldBy: "a", left: 500 * time.Millisecond, wantIssued: 1},
		{name: "HolderDeniedSecondLease", at: t500, op: "acquire", id: "a2", holder: "a", want: "denied", heldBy: "a", left: 500 * time.Millisecond, wantIssued: 1},
		{name: "HolderAt500", at: t500, op: "holder", want: "held", heldBy: "a", wantFence: 1, left: 500 * time.Millisecond, wantIssued: 1},
		{name: "RenewalKeepsFenceExtendsFromOwnReading", at: t900, op: "renew", id: "a3", holder: "a", fence: 1, want: "grant", wantFence: 1, coordExp: 1900, wantIssued: 1},
		{name: "BDeniedUntil1900", at: t1000, op: "acquire", id: "b2", holder: "b", want: "denied", heldBy: "a", left: 900 * time.Millisecond, wantIssued: 1},
		{name: "RenewalAtExpiryInstantRefused", at: t1900, op: "renew", id: "a4", holder: "a", fence: 1, want: "expired", wantIssued: 1},
		{name: "FreeAt1900", at: t1900, op: "holder", want: "free", wantIssued: 1},
		{name: "ExpiredNeverResurrected", at: t2000, op: "renew", id: "a5", holder: "a", fence: 1, want: "expired", wantIssued: 1},
		{name: "ReacquireGetsHigherFence", at: t2000, op: "acquire", id: "a6", holder: "a", want: "grant", wantFence: 2, coordExp: 3000, wantIssued: 2},
		{name: "ReleaseOfOldGenerationIgnored", at: t2000, op: "release", holder: "a", fence: 1, want: "kept", wantIssued: 2},
		{name: "ReleaseByNonHolderIgnored", at: t2000, op: "release", holder: "b", fence: 2, want: "kept", wantIssued: 2},
		{name: "StillHeldAfterIgnoredReleases", at: t2000, op: "holder", want: "held", heldBy: "a", wantFence: 2, left: time.Second, wantIssued: 2},
		{name: "HolderReleases", at: t2000, op: "release", holder: "a", fence: 2, want: "released", wantIssued: 2},
		{name: "SecondReleaseIsNoOp", at: t2000, op: "release", holder: "a", fence: 2, want: "kept", wantIssued: 2},
		{name: "RenewalOfReleasedRefused", at: t2000, op: "renew", id: "a7", holder: "a", fence: 2, want: "expired", wantIssued: 2},
		{name: "BAcquiresAfterRelease", at: t2000, op: "acquire", id: "b3", holder: "b", want: "grant", wantFence: 3, wantIssued: 3},
		{name: "FencesAreGlobalAcrossResources", at: t2000, op: "acquire", id: "a8", holder: "a", res: "r2", want: "grant", wantFence: 4, wantIssued: 4},
		{name: "RenewalOfAnotherHoldersLease", at: t2000, op: "renew", id: "a9", holder: "a", fence: 3, want: "expired", wantIssued: 4},
		{name: "RenewalWithWrongFence", at: t2000, op: "renew", id: "b4", holder: "b", fence: 4, want: "expired", wantIssued: 4},
		{name: "LeaseEndsAtExactExpiry", at: t3000, op: "acquire", id: "b5", holder: "b", want: "grant", wantFence: 5, wantIssued: 5},
		{name: "ReleaseAfterExpiryIgnored", at: t3000 + 1000, op: "release", holder: "b", fence: 5, want: "kept", wantIssued: 5},
	})
}

// Bad input is a clear error and changes nothing: the holder, the issued
// fence and the latest reading are what they were.
func TestCoordinatorBadInput(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	bad := func(mut func(*lease.Request)) *lease.Request {
		r := acquireReq("x1", "b", "r")
		mut(&r)
		return &r
	}
	held := cstep{op: "holder", want: "held", heldBy: "a", wantFence: 1, left: 500 * time.Millisecond, wantIssued: 1}
	steps := []cstep{
		{name: "Setup", at: t0, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: 1, wantIssued: 1},
		// An ignored release records the reading 500 without changing the
		// lease (Holder, a query, would not record it).
		{name: "Reading500", at: t500, op: "release", holder: "z", fence: 1, want: "kept", wantIssued: 1},
		{name: "EmptyRequestID", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.RequestID = "" }), want: "arg", wantIssued: 1},
		{name: "EmptyResource", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.Resource = "" }), want: "arg", wantIssued: 1},
		{name: "EmptyHolder", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.HolderID = "" }), want: "arg", wantIssued: 1},
		{name: "RenewalSentToAcquire", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.Kind = lease.KindRenew; r.Fence = 1 }), want: "mismatch", wantIssued: 1},
		{name: "AcquireSentToRenew", at: t500, op: "renew", req: bad(func(r *lease.Request) {}), want: "mismatch", wantIssued: 1},
		{name: "UnknownKind", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.Kind = "steal" }), want: "mismatch", wantIssued: 1},
		{name: "AcquireWithFence", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.Fence = 7 }), want: "arg", wantIssued: 1},
		{name: "SentAtNaN", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.SentAt.Millis = math.NaN() }), want: "arg", wantIssued: 1},
		{name: "SentAtInf", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.SentAt.Millis = math.Inf(1) }), want: "arg", wantIssued: 1},
		{name: "SentAtNoDomain", at: t500, op: "acquire", req: bad(func(r *lease.Request) { r.SentAt.Domain = "" }), want: "arg", wantIssued: 1},
		{name: "ForeignDomainNow", at: t500, domain: "agent-a", op: "acquire", id: "x2", holder: "b", want: "domain", wantIssued: 1},
		{name: "ForeignDomainRenew", at: t500, domain: "agent-a", op: "renew", id: "x3", holder: "a", fence: 1, want: "domain", wantIssued: 1},
		{name: "ForeignDomainRelease", at: t500, domain: "agent-a", op: "release", holder: "a", fence: 1, want: "domain", wantIssued: 1},
		{name: "ForeignDomainHolder", at: t500, domain: "agent-a", op: "holder", want: "domain", wantIssued: 1},
		{name: "NaNNow", at: math.NaN(), op: "acquire", id: "x4", holder: "b", want: "arg", wantIssued: 1},
		{name: "InfNow", at: math.Inf(1), op: "renew", id: "x5", holder: "a", fence: 1, want: "arg", wantIssued: 1},
		{name: "BackwardsNowAcquire", at: t40, op: "acquire", id: "x6", holder: "b", want: "reading", wantIssued: 1},
		{name: "BackwardsNowRenew", at: t40, op: "renew", id: "x7", holder: "a", fence: 1, want: "reading", wantIssued: 1},
		{name: "BackwardsNowRelease", at: t40, op: "release", holder: "a", fence: 1, want: "reading", wantIssued: 1},
		{name: "RenewFenceZero", at: t500, op: "renew", id: "x8", holder: "a", fence: 0, want: "arg", wantIssued: 1},
		{name: "RenewFenceNeverIssued", at: t900, op: "renew", id: "x9", holder: "a", fence: 99, want: "arg", wantIssued: 1},
		{name: "ReleaseEmptyHolder", at: t500, op: "release", holder: "", fence: 1, want: "arg", wantIssued: 1},
		{name: "ReleaseFenceZero", at: t500, op: "release", holder: "a", fence: 0, want: "arg", wantIssued: 1},
		{name: "RequestIDReusedByOtherHolder", at: t900, op: "acquire", id: "a1", holder: "b", want: "arg", wantIssued: 1},
		{name: "RequestIDReusedForOtherResource", at: t900, op: "acquire", id: "a1", holder: "a", res: "r2", want: "arg", wantIssued: 1},
	}
	runCoordinator(t, c, steps)
	// Every refused call above left the state as it was, including the
	// latest reading: a call at 500 is not "backwards" even though refused
	// calls were made at 900.
	held.name, held.at = "StateUnchanged", t500
	runCoordinator(t, c, []cstep{held})
	if _, _, _, _, err := c.Holder(at(t500), ""); errKind(err) != "arg" {
		t.Fatalf("Holder with an empty resource: %v", err)
	}
}

func TestReleaseEmptyResourceIsAnError(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	_, err := c.ReleaseAt(at(0), fence.Token{HolderID: "a", Fence: 1})
	wantErrKind(t, err, "arg")
}

func TestNewCoordinatorArguments(t *testing.T) {
	good := manual(t, coordDomain, 0, 0)
	cases := []struct {
		name string
		cfg  lease.CoordinatorConfig
	}{
		{"NilClock", lease.CoordinatorConfig{TTL: time.Second}},
		{"ZeroTTL", lease.CoordinatorConfig{Clock: good}},
		{"NegativeTTL", lease.CoordinatorConfig{Clock: good, TTL: -time.Second}},
		{"StartFenceAtMax", lease.CoordinatorConfig{Clock: good, TTL: time.Second, StartFence: lease.MaxFence}},
		{"StartFenceAboveMax", lease.CoordinatorConfig{Clock: good, TTL: time.Second, StartFence: math.MaxUint64}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := lease.NewCoordinator(tc.cfg)
			if c != nil {
				t.Fatal("returned a coordinator with the error")
			}
			wantErrKind(t, err, "arg")
		})
	}
}

// The shorthand methods read the coordinator's clock; a clock that fails
// makes the call fail and changes nothing.
func TestCoordinatorReadsItsClock(t *testing.T) {
	var reading float64
	clk, err := clock.New(coordDomain, func() float64 { return reading })
	if err != nil {
		t.Fatal(err)
	}
	c := newCoordinator(t, clk, time.Second, 0)
	reading = 100
	g := mustGrant(t)(c.Acquire(acquireReq("a1", "a", "r")))
	if g.CoordinatorExpiresAt != at(1100) {
		t.Fatalf("expires at %v", g.CoordinatorExpiresAt)
	}
	reading = 50 // the host stepped its clock back
	if _, err := c.Renew(renewReq("a2", "a", "r", 1)); errKind(err) != "reading" {
		t.Fatalf("Renew on a backwards reading: %v", err)
	}
	if _, err := c.Acquire(acquireReq("b1", "b", "r")); errKind(err) != "reading" {
		t.Fatalf("Acquire on a backwards reading: %v", err)
	}
	if _, err := c.Release(g.Token()); errKind(err) != "reading" {
		t.Fatalf("Release on a backwards reading: %v", err)
	}
	reading = 600
	g2 := mustGrant(t)(c.Renew(renewReq("a3", "a", "r", 1)))
	if g2.Fence != 1 || g2.CoordinatorExpiresAt != at(1600) {
		t.Fatalf("renewal %+v", g2)
	}
	if ok, err := c.Release(g.Token()); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if c.Domain() != coordDomain || c.TTL() != time.Second {
		t.Fatal(c.Domain(), c.TTL())
	}
}

// A retried acquisition (same request id) is answered with the grant that
// exists while its lease is current, and is a new acquisition once it is not.
func TestReplayCache(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	runCoordinator(t, c, []cstep{
		{name: "Grant", at: t0, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: 1, coordExp: 1000, wantIssued: 1},
		{name: "RetryGetsSameGrant", at: t40, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: 1, coordExp: 1000, wantIssued: 1},
		{name: "Renewed", at: t500, op: "renew", id: "a2", holder: "a", fence: 1, want: "grant", wantFence: 1, coordExp: 1500, wantIssued: 1},
		{name: "RetryAfterRenewalStillSameGrant", at: t900, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: 1, coordExp: 1000, wantIssued: 1},
		{name: "RetryAfterExpiryIsNew", at: t1900, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: 2, coordExp: 2900, wantIssued: 2},
		{name: "RetryOfNewGrantSame", at: t1900 + 1, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: 2, wantIssued: 2},
		{name: "Released", at: t2000, op: "release", holder: "a", fence: 2, want: "released", wantIssued: 2},
		{name: "RetryAfterReleaseIsNew", at: t2000, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: 3, wantIssued: 3},
		{name: "BTakesOtherResource", at: t2000, op: "acquire", id: "b1", holder: "b", res: "q", want: "grant", wantFence: 4, wantIssued: 4},
		{name: "QExpiresAndCTakesIt", at: t3000, op: "acquire", id: "c1", holder: "c", res: "q", want: "grant", wantFence: 5, wantIssued: 5},
		{name: "RetryWhileOtherHoldsIsDenied", at: t3000 + 1, op: "acquire", id: "b1", holder: "b", res: "q", want: "denied", heldBy: "c", left: 999 * time.Millisecond, wantIssued: 5},
	})
}

// The spec's number, pinned: the tests below count 1023 and 1024 grants as
// literals so that a change of the constant fails them.
func TestReplayCacheSizeIs1024(t *testing.T) {
	if lease.ReplayCacheSize != 1024 {
		t.Fatalf("ReplayCacheSize = %d; the spec says the cache holds the last 1024 acquire grants", lease.ReplayCacheSize)
	}
}

// The cache holds the last 1024 acquire grants. A retry whose
// entry was evicted is a new acquisition: while its own lease is live that
// is a denial (the holder already holds it), and once the lease is over it
// burns a new fence, where a cached retry would have been answered at once
// with the original fence.
func TestReplayCacheEviction(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Hour, 0)
	x := acquireReq("x", "h", "r")
	gx := mustGrant(t)(c.AcquireAt(at(0), x))
	others := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			id := "o" + itoa(i)
			mustGrant(t)(c.AcquireAt(at(1), acquireReq(id, "o", id)))
		}
	}
	others(0, 1023)
	if g := mustGrant(t)(c.AcquireAt(at(1), x)); g != gx {
		t.Fatalf("retry after %d other grants = %+v, want the original %+v", 1023, g, gx)
	}
	issued := c.IssuedFence()
	others(1024, 1)
	out, err := c.AcquireAt(at(1), x)
	if err != nil || out.OK || out.HeldBy != "h" {
		t.Fatalf("evicted retry while its lease is live = %+v, %v; want denied, held by h", out, err)
	}
	if c.IssuedFence() != issued+1 {
		t.Fatal("denial issued a fence")
	}
	// Once the lease is over the evicted retry burns a new fence.
	g := mustGrant(t)(c.AcquireAt(at(clock.Millis(time.Hour)), x))
	if g.Fence != issued+2 {
		t.Fatalf("fence %d, want %d", g.Fence, issued+2)
	}
}

// A request id granted again occupies a new slot; its old slot's eviction
// does not remove the newer entry.
func TestReplayCacheRegrantedIDKeepsNewSlot(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Hour, 0)
	x := acquireReq("x", "h", "r")
	g1 := mustGrant(t)(c.AcquireAt(at(0), x))
	if ok, err := c.ReleaseAt(at(0), g1.Token()); !ok || err != nil {
		t.Fatal(ok, err)
	}
	g2 := mustGrant(t)(c.AcquireAt(at(0), x)) // slot 2
	if g2.Fence != 2 {
		t.Fatalf("fence %d", g2.Fence)
	}
	for i := 0; i < 1023; i++ { // evicts slot 1 (x's first grant)
		id := "o" + itoa(i)
		mustGrant(t)(c.AcquireAt(at(1), acquireReq(id, "o", id)))
	}
	if g := mustGrant(t)(c.AcquireAt(at(1), x)); g != g2 {
		t.Fatalf("retry = %+v, want %+v", g, g2)
	}
	mustGrant(t)(c.AcquireAt(at(1), acquireReq("last", "o", "last")))
	if out, _ := c.AcquireAt(at(1), x); out.OK {
		t.Fatalf("retry after its slot was evicted still answered from cache: %+v", out)
	}
}

// A coordinator that resumes from another's IssuedFence issues only fences
// above every fence the first one issued, so the resource keeps refusing the
// old generations.
func TestStartFenceHandover(t *testing.T) {
	first := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	gate, err := fence.NewGate("r", fence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var last lease.Grant
	for i, res := range []string{"r", "s", "t"} {
		last = mustGrant(t)(first.AcquireAt(at(float64(i)), acquireReq("f"+itoa(i), "old", res)))
	}
	if err := gate.Commit(fence.Token{Resource: "r", HolderID: "old", Fence: 1}, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	persisted := first.IssuedFence()
	if persisted != last.Fence || persisted != 3 {
		t.Fatalf("IssuedFence = %d after issuing %d", persisted, last.Fence)
	}

	// The successor has its own clock: a different origin, same domain name.
	second := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, persisted)
	if second.IssuedFence() != persisted {
		t.Fatalf("successor IssuedFence = %d before issuing", second.IssuedFence())
	}
	g := mustGrant(t)(second.AcquireAt(at(0), acquireReq("n1", "new", "r")))
	if g.Fence <= persisted {
		t.Fatalf("successor issued %d, not above %d", g.Fence, persisted)
	}
	if err := gate.Commit(g.Token(), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := gate.Commit(fence.Token{Resource: "r", HolderID: "old", Fence: 1}, func() error { return nil }); errKind(err) != "stale" {
		t.Fatalf("old generation not refused: %v", err)
	}
	// A successor that forgot (StartFence 0) reissues fence 1, which the
	// resource has superseded: every write of its holder is refused.
	amnesiac := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	g0 := mustGrant(t)(amnesiac.AcquireAt(at(0), acquireReq("z", "victim", "r")))
	if err := gate.Commit(g0.Token(), func() error { return nil }); err == nil {
		t.Fatal("reissued fence admitted")
	}
}

// The fence space ends at MaxFence (exact in JavaScript); running out is an
// error that changes nothing.
func TestFenceExhaustion(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, lease.MaxFence-1)
	runCoordinator(t, c, []cstep{
		{name: "LastFence", at: t0, op: "acquire", id: "a1", holder: "a", want: "grant", wantFence: lease.MaxFence, wantIssued: lease.MaxFence},
		{name: "Release", at: t0, op: "release", holder: "a", fence: lease.MaxFence, want: "released", wantIssued: lease.MaxFence},
		{name: "Exhausted", at: t900, op: "acquire", id: "a2", holder: "a", want: "arg", wantIssued: lease.MaxFence},
		{name: "StillFreeAndReadingNotRecorded", at: t500, op: "holder", want: "free", wantIssued: lease.MaxFence},
	})
}

// Many goroutines acquire one resource at once: exactly one grant, everyone
// else is told who holds it, and fences stay unique.
func TestConcurrentAcquire(t *testing.T) {
	c := newCoordinator(t, manual(t, coordDomain, 0, 1), time.Hour, 0)
	const n = 32
	start := make(chan struct{})
	results := make(chan lease.Outcome, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			<-start
			out, err := c.Acquire(acquireReq("g"+itoa(i), "h"+itoa(i), "r"))
			if err != nil {
				t.Error(err)
			}
			results <- out
		})
	}
	close(start)
	wg.Wait()
	close(results)
	winner := ""
	denied := 0
	for out := range results {
		if out.OK {
			if winner != "" {
				t.Fatalf("second grant %+v", out.Grant)
			}
			winner = out.Grant.HolderID
			continue
		}
		denied++
		if out.HeldBy == "" {
			t.Fatalf("denial without a holder: %+v", out)
		}
	}
	if winner == "" || denied != n-1 || c.IssuedFence() != 1 {
		t.Fatalf("winner %q, %d denied, issued %d", winner, denied, c.IssuedFence())
	}
}
