package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Invariant names one property the Checker enforces. The first seven are the
// properties the library promises; the rest are consistency checks on the
// core's answers that the named seven do not cover.
type Invariant int

const (
	// GateFloor: a gate never runs a write whose fence is below its floor,
	// runs one write at a time (async writes included), and its floor never
	// goes down; a cancelled wait logs nothing and moves nothing.
	GateFloor Invariant = iota + 1
	// HolderInsideCoordinator: while the real skew stays within the
	// holder's assumed clock skew, every lease the holder believes valid
	// ends no later than the coordinator's window for it.
	HolderInsideCoordinator
	// FenceOrder: fences per resource strictly increase across
	// acquisitions and stay the same across renewals.
	FenceOrder
	// UniqueFence: no two grants share a fence for one resource.
	UniqueFence
	// RetrySameFence: a retried request id never gets a second fence while
	// its lease is current.
	RetrySameFence
	// NoResurrection: an expired (or released, or superseded) lease is never
	// renewed or handed out again.
	NoResurrection
	// RestartAboveGate: with a persisted fence, a restarted coordinator never
	// issues a fence the gate has already passed.
	RestartAboveGate
	// SingleUse: a request turns into a lease at most once.
	SingleUse
	// Exclusive: the coordinator never grants a resource whose current lease
	// is live.
	Exclusive
	// CoreError: the core returned an error where the protocol has an answer.
	CoreError
)

// NamedInvariants is how many of the invariants are the library's named
// promises (GateFloor through RestartAboveGate).
const NamedInvariants = 7

var invariantNames = [...]string{
	GateFloor:               "gate-floor",
	HolderInsideCoordinator: "holder-inside-coordinator",
	FenceOrder:              "fence-order",
	UniqueFence:             "unique-fence",
	RetrySameFence:          "retry-same-fence",
	NoResurrection:          "no-resurrection",
	RestartAboveGate:        "restart-above-gate",
	SingleUse:               "single-use",
	Exclusive:               "exclusive",
	CoreError:               "core-error",
}

// String returns the invariant's number and short name, "3 fence-order".
func (i Invariant) String() string {
	if i < 1 || int(i) >= len(invariantNames) {
		return fmt.Sprintf("invariant(%d)", int(i))
	}
	if i <= NamedInvariants {
		return fmt.Sprintf("invariant %d %s", int(i), invariantNames[i])
	}
	return "check " + invariantNames[i]
}

// AllInvariants lists every invariant and check, in order.
func AllInvariants() []Invariant {
	out := make([]Invariant, 0, len(invariantNames)-1)
	for i := GateFloor; int(i) < len(invariantNames); i++ {
		out = append(out, i)
	}
	return out
}

// Violation is a broken invariant: which one, where in the run, and what was
// seen.
type Violation struct {
	Invariant Invariant
	Step      int     // the simulation step (event number) it was seen at
	At        float64 // true time in milliseconds
	Detail    string
}

// Error names the invariant, the step, the true time and what was seen.
func (v *Violation) Error() string {
	return fmt.Sprintf("sim: %s violated at step %d (t=%.3fms): %s",
		v.Invariant, v.Step, v.At, v.Detail)
}

// ErrInvariant is matched by every *Violation with errors.Is.
var ErrInvariant = errors.New("sim: invariant violated")

// Is makes errors.Is(v, ErrInvariant) true.
func (v *Violation) Is(target error) bool { return target == ErrInvariant }

// Persistence says what survives a coordinator restart.
type Persistence int

const (
	// Persisted: the restarted coordinator starts at the last issued fence
	// (IssuedFence passed as StartFence). Every named invariant applies
	// across restarts.
	Persisted Persistence = iota
	// Amnesiac: the restarted coordinator starts at fence 0. It reissues
	// fences the gates have passed, so gates refuse its holders; fence
	// order, uniqueness and the restart invariant then hold only within
	// one coordinator incarnation. A reissued fence equal to a gate's floor
	// is admitted next to the old holder of that number: the gate compares
	// fences, not holders.
	Amnesiac
)

// leaseKey names one lease: the coordinator incarnation that granted it, the
// resource and the fence. Incarnations matter only when fences repeat after
// an amnesiac restart.
type leaseKey struct {
	inc      int
	resource string
	fence    uint64
}

// promise is what a coordinator committed to for one lease.
type promise struct {
	holder     string
	requestID  string
	until      float64 // coordinator millis: end of the window (last grant)
	released   bool
	releasedAt float64 // coordinator millis
	outside    bool    // a holder's belief in it was already reported
}

type resourceShadow struct {
	maxFence  uint64 // highest fence granted, in scope (see Persistence)
	current   leaseKey
	hasLease  bool
	gateFloor uint64 // highest fence the gate accepted (admit or write)
}

// Checker holds a shadow of what the coordinator promised and what each gate
// accepted, and checks every observed answer against the invariants. The sim
// and the fuzz harness feed it; it never calls the core itself. The zero
// value is not usable; call NewChecker.
type Checker struct {
	persistence Persistence
	skewWithin  bool
	coordDomain string
	// toTrue converts a reading of domain to true (simulation) time.
	toTrue func(clock.Instant) float64

	inc       int
	resources map[string]*resourceShadow
	promises  map[leaseKey]*promise
	requests  map[reqKey]uint64 // first fence each request id got, per incarnation

	// Checks counts how many times each invariant was evaluated.
	Checks [len(invariantNames)]int
	// Step and Now are set by the driver before each event so violations
	// say where they happened.
	Step int
	Now  float64

	violations []*Violation
	stopAt     int // record at most this many violations
}

type reqKey struct {
	inc int
	id  string
}

// CheckerConfig configures a Checker.
type CheckerConfig struct {
	Persistence Persistence
	// SkewWithin says whether every holder's real drift against the
	// coordinator stays within its assumed skew; invariant 2 is checked
	// only then.
	SkewWithin bool
	// CoordinatorDomain is the coordinator clock's domain.
	CoordinatorDomain string
	// ToTrue maps a reading of any participant's clock to true time.
	ToTrue func(clock.Instant) float64
	// MaxViolations bounds how many violations are kept (default 1).
	MaxViolations int
}

// NewChecker returns a checker with nothing granted and every gate at floor 0.
func NewChecker(cfg CheckerConfig) *Checker {
	if cfg.MaxViolations <= 0 {
		cfg.MaxViolations = 1
	}
	return &Checker{
		persistence: cfg.Persistence,
		skewWithin:  cfg.SkewWithin,
		coordDomain: cfg.CoordinatorDomain,
		toTrue:      cfg.ToTrue,
		resources:   make(map[string]*resourceShadow),
		promises:    make(map[leaseKey]*promise),
		requests:    make(map[reqKey]uint64),
		stopAt:      cfg.MaxViolations,
	}
}

// Violations returns the violations seen so far, first first.
func (c *Checker) Violations() []*Violation { return c.violations }

// Err returns the first violation, or nil.
func (c *Checker) Err() error {
	if len(c.violations) == 0 {
		return nil
	}
	return c.violations[0]
}

func (c *Checker) check(inv Invariant, ok bool, format string, args ...any) bool {
	c.Checks[inv]++
	if ok {
		return true
	}
	if len(c.violations) < c.stopAt {
		c.violations = append(c.violations, &Violation{
			Invariant: inv, Step: c.Step, At: c.Now, Detail: fmt.Sprintf(format, args...),
		})
	}
	return false
}

func (c *Checker) shadow(resource string) *resourceShadow {
	r := c.resources[resource]
	if r == nil {
		r = &resourceShadow{}
		c.resources[resource] = r
	}
	return r
}

// Restarted records that the coordinator was replaced by a new incarnation.
// An amnesiac restart resets the fence scope: fences may start again at 1.
func (c *Checker) Restarted() {
	c.inc++
	for _, r := range c.resources {
		r.hasLease = false
		if c.persistence == Amnesiac {
			r.maxFence = 0
		}
	}
}

// Acquired checks the coordinator's answer to an acquisition processed at
// now (a coordinator reading).
func (c *Checker) Acquired(now clock.Instant, req lease.Request, out lease.Outcome, err error) {
	if !c.check(CoreError, err == nil, "acquire %s by %s for %s: %v", req.RequestID, req.HolderID, req.Resource, err) {
		return
	}
	r := c.shadow(req.Resource)
	if f, retried := c.requests[reqKey{c.inc, req.RequestID}]; retried {
		prev := leaseKey{c.inc, req.Resource, f}
		if c.live(prev, now) {
			got := "a denial"
			if out.OK {
				got = fmt.Sprintf("fence %d", out.Grant.Fence)
			}
			c.check(RetrySameFence, out.OK && out.Grant.Fence == f,
				"retried request %s got %s while its lease with fence %d is still current", req.RequestID, got, f)
		} else {
			c.Checks[RetrySameFence]++
		}
	}
	if !out.OK {
		c.check(CoreError, out.HeldBy != "" && out.RetryAfter > 0,
			"acquire %s was refused without a holder and a wait: %+v", req.RequestID, out)
		c.check(Exclusive, r.hasLease && c.live(r.current, now) && c.promises[r.current].holder == out.HeldBy,
			"acquire %s was denied as held by %q, but no live lease of that holder exists", req.RequestID, out.HeldBy)
		return
	}
	g := &out.Grant
	if !c.check(CoreError, g.RequestID == req.RequestID && g.Resource == req.Resource && g.HolderID == req.HolderID,
		"acquire %s got a grant that does not answer it: %+v", req.RequestID, g) {
		return
	}
	key := leaseKey{c.inc, req.Resource, g.Fence}
	if p, known := c.promises[key]; known {
		// A fence this incarnation already granted: only a replay of the
		// same request is allowed, and only while its lease is current.
		c.check(UniqueFence, p.requestID == g.RequestID && p.holder == g.HolderID,
			"fence %d for %s granted to request %s (%s) was granted again to request %s (%s)",
			g.Fence, req.Resource, p.requestID, p.holder, g.RequestID, g.HolderID)
		c.check(NoResurrection, c.live(key, now),
			"request %s was answered with fence %d of %s, a lease that is no longer current (window ended %s, now %s)",
			g.RequestID, g.Fence, req.Resource, clock.FormatMillis(p.until), clock.FormatMillis(now.Millis))
		return
	}
	c.check(Exclusive, !r.hasLease || !c.live(r.current, now),
		"%s was granted to %s (fence %d) while fence %d of %s is live", req.Resource, g.HolderID, g.Fence,
		r.current.fence, c.holderOf(r.current))
	// Under persistence a fence at or below the gate's floor also breaks
	// fence order; it is checked first so a restart bug is named as one.
	if c.persistence == Persisted {
		c.check(RestartAboveGate, g.Fence > r.gateFloor,
			"coordinator incarnation %d issued fence %d for %s, but the gate already passed fence %d",
			c.inc, g.Fence, req.Resource, r.gateFloor)
	}
	c.check(FenceOrder, g.Fence > r.maxFence,
		"acquisition of %s minted fence %d, not above the previous %d", req.Resource, g.Fence, r.maxFence)
	c.check(HolderInsideCoordinator, g.CoordinatorExpiresAt.Domain == now.Domain &&
		g.CoordinatorExpiresAt.Millis == now.Millis+millisOf(g),
		"grant for %s fence %d expires at %s, not at the processing reading %s plus the TTL",
		req.Resource, g.Fence, g.CoordinatorExpiresAt, now)
	c.promises[key] = &promise{holder: g.HolderID, requestID: g.RequestID, until: g.CoordinatorExpiresAt.Millis}
	c.requests[reqKey{c.inc, req.RequestID}] = g.Fence
	if g.Fence > r.maxFence {
		r.maxFence = g.Fence
	}
	r.current, r.hasLease = key, true
}

func millisOf(g *lease.Grant) float64 { return clock.Millis(g.TTL) }

// Renewed checks the coordinator's answer to a renewal processed at now.
func (c *Checker) Renewed(now clock.Instant, req lease.Request, out lease.Outcome, err error) {
	key := leaseKey{c.inc, req.Resource, req.Fence}
	p := c.promises[key]
	if err != nil {
		// A coordinator that never issued the fence (after an amnesiac
		// restart) refuses with an argument error; anything else is a bug.
		var ae *lease.ArgumentError
		c.check(CoreError, errors.As(err, &ae) && c.persistence == Amnesiac && c.inc > 0 && p == nil,
			"renew %s of %s fence %d: %v", req.RequestID, req.Resource, req.Fence, err)
		return
	}
	if !out.OK {
		c.check(CoreError, out.Reason == lease.Expired, "renewal %s refused without reason expired: %+v", req.RequestID, out)
		return
	}
	g := &out.Grant
	c.check(FenceOrder, g.Fence == req.Fence && g.Resource == req.Resource && g.HolderID == req.HolderID,
		"renewal of %s fence %d came back as %+v", req.Resource, req.Fence, g)
	if !c.check(NoResurrection, p != nil && p.holder == req.HolderID && c.live(key, now),
		"renewal %s of %s fence %d by %s was granted, but that lease is not current at %s",
		req.RequestID, req.Resource, req.Fence, req.HolderID, now) {
		return
	}
	c.check(HolderInsideCoordinator, g.CoordinatorExpiresAt.Domain == now.Domain &&
		g.CoordinatorExpiresAt.Millis == now.Millis+millisOf(g),
		"renewal of %s fence %d expires at %s, not at the processing reading %s plus the TTL",
		req.Resource, req.Fence, g.CoordinatorExpiresAt, now)
	if g.CoordinatorExpiresAt.Millis > p.until {
		p.until = g.CoordinatorExpiresAt.Millis
	}
}

// Released records the coordinator's answer to a release processed at now.
func (c *Checker) Released(now clock.Instant, tok fence.Token, ok bool, err error) {
	if !c.check(CoreError, err == nil, "release %s: %v", tok, err) {
		return
	}
	key := leaseKey{c.inc, tok.Resource, tok.Fence}
	p := c.promises[key]
	live := p != nil && p.holder == tok.HolderID && c.live(key, now)
	c.check(CoreError, ok == live, "release of %s answered %v, but the lease current=%v", tok, ok, live)
	if ok && p != nil {
		p.released, p.releasedAt = true, now.Millis
	}
}

// live reports whether the lease key is the coordinator's current lease at
// now: granted by this incarnation, not released, not superseded, window not
// over.
func (c *Checker) live(key leaseKey, now clock.Instant) bool {
	p := c.promises[key]
	if p == nil || p.released || key.inc != c.inc {
		return false
	}
	r := c.resources[key.resource]
	if r == nil || !r.hasLease || r.current != key {
		return false
	}
	return now.Millis < p.until
}

func (c *Checker) holderOf(key leaseKey) string {
	if p := c.promises[key]; p != nil {
		return p.holder
	}
	return "?"
}

// eps absorbs float rounding in the mapping of readings to true time.
const eps = 1e-6

// Holding checks invariant 2 for one lease a holder has, at true time now.
// inc is the incarnation whose grant the lease came from. A lease the holder
// no longer believes valid is not checked.
func (c *Checker) Holding(now float64, l *lease.Lease, inc int) {
	if !c.skewWithin || l == nil {
		return
	}
	end := c.toTrue(l.Deadline())
	if now >= end {
		return
	}
	tok := l.Token()
	p := c.promises[leaseKey{inc, tok.Resource, tok.Fence}]
	if !c.check(HolderInsideCoordinator, p != nil && p.holder == tok.HolderID,
		"%s believes it holds %s, which the coordinator never granted", tok.HolderID, tok) {
		return
	}
	window := c.toTrue(clock.At(c.coordDomain, p.until))
	if p.released {
		window = math.Min(window, c.toTrue(clock.At(c.coordDomain, p.releasedAt)))
	}
	if p.outside {
		c.Checks[HolderInsideCoordinator]++
		return // reported once per lease
	}
	p.outside = !c.check(HolderInsideCoordinator, end <= window+eps,
		"%s believes %s valid until t=%.3fms, but the coordinator's window for it ends at t=%.3fms (%.3fms earlier)",
		tok.HolderID, tok, end, window, end-window)
}

// WriteRuns is called from inside a gate's write callback: the gate decided
// to run a write with tok.
func (c *Checker) WriteRuns(tok fence.Token) {
	r := c.shadow(tok.Resource)
	c.check(GateFloor, tok.Fence >= r.gateFloor,
		"gate %s ran a write with fence %d (%s) after it had accepted fence %d", tok.Resource, tok.Fence, tok.HolderID, r.gateFloor)
	if tok.Fence > r.gateFloor {
		r.gateFloor = tok.Fence
	}
}

// GateAnswered checks a gate after a Commit or Admit of tok returned err.
// ran says whether the write callback ran (always false for Admit).
func (c *Checker) GateAnswered(g *fence.Gate, tok fence.Token, admit bool, ran bool, err error) {
	c.GateAnsweredFloor(g.Floor(), tok, admit, ran, err)
}

// GateAnsweredFloor is GateAnswered for a gate whose floor after the call is
// floor (a sqlfence store). For a store, ran means the write ran, and only a
// committed write counts for WriteRuns.
func (c *Checker) GateAnsweredFloor(floor uint64, tok fence.Token, admit bool, ran bool, err error) {
	r := c.shadow(tok.Resource)
	var stale *fence.StaleFenceError
	isStale := errors.As(err, &stale)
	if admit && err == nil {
		c.check(GateFloor, tok.Fence >= r.gateFloor,
			"gate %s admitted fence %d after it had accepted fence %d", tok.Resource, tok.Fence, r.gateFloor)
		if tok.Fence > r.gateFloor {
			r.gateFloor = tok.Fence
		}
	}
	if isStale {
		c.check(GateFloor, !ran && stale.RefusedFence == tok.Fence && stale.AdmittedFence > tok.Fence,
			"gate %s refused %s with an inconsistent rejection %+v (write ran: %v)", tok.Resource, tok, stale.Rejection, ran)
	}
	if !admit && !isStale {
		c.check(GateFloor, ran, "gate %s neither ran nor refused the write of %s: %v", tok.Resource, tok, err)
	}
	c.check(GateFloor, floor >= r.gateFloor,
		"gate %s floor is %d after %s, below fence %d it had already accepted", tok.Resource, floor, tok, r.gateFloor)
}

// WindowEnd returns the true time at which the coordinator's window for the
// lease (incarnation, resource, fence) ends, and whether it granted one.
func (c *Checker) WindowEnd(inc int, resource string, fence uint64) (float64, bool) {
	p := c.promises[leaseKey{inc, resource, fence}]
	if p == nil {
		return 0, false
	}
	end := c.toTrue(clock.At(c.coordDomain, p.until))
	if p.released {
		end = math.Min(end, c.toTrue(clock.At(c.coordDomain, p.releasedAt)))
	}
	return end, true
}
