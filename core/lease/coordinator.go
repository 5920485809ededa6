package lease

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
)

// ReplayCacheSize is how many acquire grants a coordinator remembers by
// request id. A retry whose entry was evicted is treated as a new acquisition.
const ReplayCacheSize = 1024

// CoordinatorConfig configures a Coordinator.
type CoordinatorConfig struct {
	// Clock is the coordinator's own clock. Required; a clock with an empty
	// domain (such as a nil *clock.Manual) is refused.
	Clock clock.Clock
	// TTL is how long a lease lasts from the moment the coordinator processes
	// an acquisition or renewal. Required, positive.
	TTL time.Duration
	// StartFence is the last fence already issued for these resources, for
	// example another coordinator's IssuedFence persisted before a restart.
	// The first fence this coordinator issues is StartFence+1.
	StartFence uint64
}

// Coordinator grants, renews and releases leases, each with a fence that is
// strictly higher than every fence it issued before. It keeps its state in
// memory; Snapshot and Restore (or IssuedFence and StartFence) carry it across
// a restart, storing it is the caller's job. Acquire is the method most
// callers want. A Coordinator must be created with NewCoordinator (the
// methods of a nil or zero Coordinator return an *ArgumentError) and is safe
// for concurrent use.
type Coordinator struct {
	clk    clock.Clock
	domain string // clk.Domain(), fixed at creation
	ttl    time.Duration
	ms     float64 // ttl in milliseconds

	mu       sync.Mutex
	issued   uint64
	last     float64 // latest reading acted on, if seen
	seen     bool
	restored bool
	// leases holds the record of each resource's current or last lease.
	// A released lease's record is deleted at once; an expired one is
	// reused when its resource is acquired again, and deleted by a sweep
	// once the table has grown enough.
	leases   leaseTable
	swept    int // leases.count after the last sweep
	sweeping int // the next sub-table to sweep, or -1
	replay   replayCache
}

// sweepMin is the fewest additions between two sweeps of expired leases.
const sweepMin = 1024

// NewCoordinator returns a coordinator with no leases.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	if err := checkClock(cfg.Clock); err != nil {
		return nil, err
	}
	if cfg.TTL <= 0 {
		return nil, argErr("ttl", "must be positive, got "+cfg.TTL.String())
	}
	if cfg.StartFence >= maxFence {
		return nil, argErr("startFence", "leaves no fence to issue")
	}
	return &Coordinator{
		clk:      cfg.Clock,
		domain:   cfg.Clock.Domain(),
		ttl:      cfg.TTL,
		ms:       clock.Millis(cfg.TTL),
		issued:   cfg.StartFence,
		leases:   leaseTable{seed: maphash.MakeSeed()},
		sweeping: -1,
		replay:   replayCache{seed: maphash.MakeSeed()},
	}, nil
}

// checkClock refuses a missing clock and one with an empty domain, which is
// what a typed nil or zero *clock.Manual or *clock.Guarded reports.
func checkClock(clk clock.Clock) error {
	if clk == nil {
		return argErr("clock", "is required")
	}
	if clk.Domain() == "" {
		return argErr("clock", "has an empty domain (a nil or zero clock?)")
	}
	return nil
}

// maxFence keeps fences exact as JavaScript numbers (2^53 - 1).
const maxFence = 1<<53 - 1

// MaxFence is the highest fence a coordinator issues.
const MaxFence uint64 = maxFence

// errNoCoordinator is returned by every method of a nil or zero Coordinator.
func errNoCoordinator() error {
	return argErr("coordinator", "was not made by NewCoordinator")
}

func (c *Coordinator) usable() bool { return c != nil && c.clk != nil }

// Domain returns the coordinator's clock domain ("" for a nil or zero
// Coordinator).
func (c *Coordinator) Domain() string {
	if c == nil {
		return ""
	}
	return c.domain
}

// TTL returns the lease length.
func (c *Coordinator) TTL() time.Duration {
	if c == nil {
		return 0
	}
	return c.ttl
}

// IssuedFence returns the highest fence issued so far (StartFence if none).
// Persist it and pass it as StartFence to a successor.
func (c *Coordinator) IssuedFence() uint64 {
	if !c.usable() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.issued
}

// Acquire is shorthand for AcquireAt with a fresh reading of the
// coordinator's clock. The clock is read while the coordinator's lock is
// held, so concurrent calls act on their readings in order, and only once
// the request has passed every check that does not depend on the time: a
// refused request leaves a stepping clock where it was.
func (c *Coordinator) Acquire(req Request) (out Outcome, err error) {
	if !c.usable() {
		return Outcome{}, errNoCoordinator()
	}
	if err := req.validate(KindAcquire); err != nil {
		return Outcome{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pos, h, err := c.acquireCheck(&req)
	if err != nil {
		return Outcome{}, err
	}
	now, err := c.clk.Now()
	if err != nil {
		return Outcome{}, err
	}
	err = c.acquireLocked(now, &req, pos, h, &out)
	return out, err
}

// AcquireAt processes an acquisition at now, a reading of the coordinator's
// clock.
//
// A request id it granted before is answered with that same grant while the
// lease it made is still current, so a retried request never mints a second
// fence. Otherwise: a resource whose lease is live is denied with its holder
// and the time left, even to that same holder; a free resource (never held,
// released, or expired) is granted with a fence above every fence issued.
func (c *Coordinator) AcquireAt(now clock.Instant, req Request) (Outcome, error) {
	// Small enough to be inlined, so the request and the outcome stay in
	// the caller's frame instead of being copied through the call.
	var out Outcome
	err := c.acquireAt(&now, &req, &out)
	return out, err
}

func (c *Coordinator) acquireAt(now *clock.Instant, req *Request, out *Outcome) error {
	if !c.usable() {
		return errNoCoordinator()
	}
	if err := req.validate(KindAcquire); err != nil {
		return err
	}
	// No defer: nothing between Lock and Unlock calls code that is not
	// this package's.
	c.mu.Lock()
	pos, h, err := c.acquireCheck(req)
	if err == nil {
		err = c.acquireLocked(*now, req, pos, h, out)
	}
	c.mu.Unlock()
	return err
}

// acquireCheck looks req's id up in the replay cache and refuses what can be
// refused without a reading (checkAcquire). It returns the cache position of
// the id (-1 if absent) and its hash. c.mu must be held.
func (c *Coordinator) acquireCheck(req *Request) (int, uint64, error) {
	pos, h := c.replay.lookup(req.RequestID)
	var prior *Grant
	if pos >= 0 {
		prior = new(Grant)
		c.cachedGrant(pos, prior)
	}
	return pos, h, checkAcquire(c.issued, prior, req)
}

func errExhausted() error { return argErr("fence", "space is exhausted") }

// acquireLocked fills in out (the zero Outcome) or returns an error: the
// rules (decideAcquire) decide on the resource's record, then the table and
// the replay cache take the new lease.
func (c *Coordinator) acquireLocked(now clock.Instant, req *Request, pos int, h uint64, out *Outcome) error {
	if err := c.observe(now); err != nil {
		return err
	}
	tag := c.leases.tag(req.Resource)
	at, exists := c.leases.find(req.Resource, tag)
	s := State{Issued: c.issued}
	var cur *held
	if exists {
		cur = at.rec()
		s.Held, s.HolderID, s.Fence, s.ExpiresAt = true, cur.holder, cur.fence, cur.expiresAt
	}
	var prior *Grant
	if pos >= 0 {
		prior = new(Grant)
		c.cachedGrant(pos, prior)
	}
	changed, err := decideAcquire(now, c.ms, c.ttl, &s, prior, req, out)
	if err != nil {
		return err
	}
	c.record(now)
	if !changed {
		return nil
	}
	c.issued = s.Issued
	slot := c.replay.add(req.RequestID, req.Resource, req.HolderID, s.Fence, s.ExpiresAt, h, pos)
	if !exists {
		cur = c.leases.insert(at, tag)
		cur.resource = req.Resource
	}
	cur.holder, cur.fence, cur.expiresAt, cur.slot = req.HolderID, s.Fence, s.ExpiresAt, slot
	if !exists {
		c.sweepStep(now.Millis)
	}
	return nil
}

// cachedGrant fills in g with the grant at ring position pos.
func (c *Coordinator) cachedGrant(pos int, g *Grant) {
	e := &c.replay.ring[pos]
	g.RequestID, g.Resource, g.HolderID = e.requestID, e.resource, e.holder
	g.Fence, g.TTL = e.fence, c.ttl
	g.CoordinatorExpiresAt = clock.Instant{Millis: e.expiresAt, Domain: c.domain}
}

// Renew is shorthand for RenewAt with a fresh reading of the coordinator's
// clock, read while the coordinator's lock is held and only for a request
// that passed every check that does not depend on the time.
func (c *Coordinator) Renew(req Request) (out Outcome, err error) {
	if !c.usable() {
		return Outcome{}, errNoCoordinator()
	}
	if err := req.validate(KindRenew); err != nil {
		return Outcome{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.renewCheck(&req); err != nil {
		return Outcome{}, err
	}
	now, err := c.clk.Now()
	if err != nil {
		return Outcome{}, err
	}
	err = c.renewLocked(now, &req, &out)
	return out, err
}

// RenewAt processes a renewal at now. A renewal of the current, unexpired
// lease (same holder, same fence) extends it to now+TTL, dated from the
// coordinator's own reading, and keeps its fence. Anything else, including a
// lease that expired while nobody else took the resource, is refused with
// Reason Expired: an expired lease is never resurrected. A fence this
// coordinator never issued is an *ArgumentError.
func (c *Coordinator) RenewAt(now clock.Instant, req Request) (Outcome, error) {
	// Inlined, like AcquireAt.
	var out Outcome
	err := c.renewAt(&now, &req, &out)
	return out, err
}

func (c *Coordinator) renewAt(now *clock.Instant, req *Request, out *Outcome) error {
	if !c.usable() {
		return errNoCoordinator()
	}
	if err := req.validate(KindRenew); err != nil {
		return err
	}
	c.mu.Lock()
	err := c.renewCheck(req)
	if err == nil {
		err = c.renewLocked(*now, req, out)
	}
	c.mu.Unlock()
	return err
}

func (c *Coordinator) renewCheck(req *Request) error { return checkRenew(c.issued, req) }

func (c *Coordinator) renewLocked(now clock.Instant, req *Request, out *Outcome) error {
	if err := c.observe(now); err != nil {
		return err
	}
	c.record(now)
	r, ok := c.leases.find(req.Resource, c.leases.tag(req.Resource))
	s := State{Issued: c.issued}
	if ok {
		cur := r.rec()
		s.Held, s.HolderID, s.Fence, s.ExpiresAt = true, cur.holder, cur.fence, cur.expiresAt
	}
	if decideRenew(now, c.ms, c.ttl, &s, req, out) {
		r.rec().expiresAt = s.ExpiresAt
	}
	return nil
}

// Release is shorthand for ReleaseAt with a fresh reading of the
// coordinator's clock, read while the coordinator's lock is held.
func (c *Coordinator) Release(tok fence.Token) (bool, error) {
	if !c.usable() {
		return false, errNoCoordinator()
	}
	if err := tok.Validate(); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now, err := c.clk.Now()
	if err != nil {
		return false, err
	}
	return c.releaseLocked(now, tok)
}

// ReleaseAt ends the lease tok names if it is the current, unexpired lease of
// its resource, and reports whether it did. Releasing a lease that already
// ended is not an error and changes nothing. The next acquisition gets a
// higher fence either way.
func (c *Coordinator) ReleaseAt(now clock.Instant, tok fence.Token) (bool, error) {
	if !c.usable() {
		return false, errNoCoordinator()
	}
	if err := tok.Validate(); err != nil {
		return false, err
	}
	c.mu.Lock()
	ok, err := c.releaseLocked(now, tok)
	c.mu.Unlock()
	return ok, err
}

func (c *Coordinator) releaseLocked(now clock.Instant, tok fence.Token) (bool, error) {
	if err := c.observe(now); err != nil {
		return false, err
	}
	c.record(now)
	r, ok := c.leases.find(tok.Resource, c.leases.tag(tok.Resource))
	if !ok {
		return false, nil
	}
	cur := r.rec()
	s := State{Held: true, HolderID: cur.holder, Fence: cur.fence, ExpiresAt: cur.expiresAt, Issued: c.issued}
	if !decideRelease(now.Millis, &s, &tok) {
		return false, nil
	}
	c.leases.remove(r)
	return true, nil
}

// Holder reports who holds resource at now, and the fence and the time left,
// or ok false if nobody does. It is a query: now must be a usable reading
// (the coordinator's domain, not earlier than a reading already acted on),
// but it is not recorded, so asking about a later instant does not hold
// back the operations that follow.
func (c *Coordinator) Holder(now clock.Instant, resource string) (holder string, fence uint64, left time.Duration, ok bool, err error) {
	if !c.usable() {
		return "", 0, 0, false, errNoCoordinator()
	}
	if resource == "" {
		return "", 0, 0, false, argErr("resource", "must not be empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.observe(now); err != nil {
		return "", 0, 0, false, err
	}
	r, ok := c.leases.find(resource, c.leases.tag(resource))
	if !ok || !r.rec().liveAt(now.Millis) {
		return "", 0, 0, false, nil
	}
	cur := r.rec()
	return cur.holder, cur.fence, clock.FromMillis(cur.expiresAt - now.Millis), true, nil
}

// observe checks that now is a usable reading of the coordinator's clock: its
// domain, finite, and not earlier than a reading already acted on. It changes
// nothing; a call that acts on now records it (record).
func (c *Coordinator) observe(now clock.Instant) error {
	if now.Domain == c.domain && finite(now.Millis) && (!c.seen || now.Millis >= c.last) {
		return nil // the common case; c.domain is never empty
	}
	if err := now.Validate(); err != nil {
		return err
	}
	if now.Domain != c.domain {
		return &clock.DomainError{Want: c.domain, Got: now.Domain}
	}
	if c.seen && now.Millis < c.last {
		return &clock.ReadingError{Domain: now.Domain, Problem: clock.Backwards, Value: now.Millis, Previous: c.last}
	}
	return nil
}

// record notes now, which a call is acting on, as the latest reading.
func (c *Coordinator) record(now clock.Instant) { c.last, c.seen = now.Millis, true }

// sweepStep runs after an acquisition added a resource to leases. Once the
// table has grown to twice its size after the previous sweep plus sweepMin,
// a sweep starts: it deletes the records whose lease is over at now, one
// sub-table per added resource, so the pause it adds to an acquisition is
// bounded by a sub-table and its cost is constant per added resource
// amortized. The table holds at most about twice the leases live at the
// previous sweep plus sweepMin. (Released leases are deleted at once and do
// not count: a resource acquired and released over and over never starts
// one.) A resource's record says nothing once its lease is over: acquire,
// renew, release and Holder answer the same with or without it.
func (c *Coordinator) sweepStep(now float64) {
	if c.sweeping < 0 {
		if c.leases.count < 2*c.swept+sweepMin {
			return
		}
		c.sweeping = 0
	}
	if c.sweeping < len(c.leases.tables) {
		st := c.leases.tables[c.sweeping]
		c.leases.count -= st.removeIf(func(h *held) bool { return !h.liveAt(now) })
		c.sweeping++
	}
	if c.sweeping >= len(c.leases.tables) {
		c.sweeping, c.swept = -1, c.leases.count
	}
}

// LeaseState is one resource's lease as a store keeps it.
type LeaseState struct {
	Resource string
	HolderID string
	// RequestID is the id of the acquisition that made the lease while the
	// replay cache still holds that grant, so that a retry of it is answered
	// with the grant; empty once the grant left the cache (a retry of it is
	// then a new acquisition).
	RequestID string
	Fence     uint64
	// ExpiresAt is when the lease ends, in the coordinator's clock domain.
	ExpiresAt clock.Instant
}

// Snapshot is a coordinator's whole state: the highest fence issued and the
// leases it holds. Restore makes a new coordinator continue from it.
type Snapshot struct {
	IssuedFence uint64
	// Leases are in increasing order of fence. A lease whose ExpiresAt has
	// passed is one that ran out and was not yet swept; it holds nothing.
	Leases []LeaseState
}

// Snapshot returns a consistent copy of the coordinator's state, taken under
// its lock. It reads no clock. A nil or zero Coordinator returns the zero
// Snapshot.
func (c *Coordinator) Snapshot() Snapshot {
	if !c.usable() {
		return Snapshot{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{IssuedFence: c.issued, Leases: make([]LeaseState, 0, c.leases.count)}
	c.leases.each(func(h *held) { s.Leases = append(s.Leases, c.stateOf(h)) })
	slices.SortFunc(s.Leases, func(a, b LeaseState) int { return cmp.Compare(a.Fence, b.Fence) })
	return s
}

// LeaseOf returns the lease record of resource: its current lease, or its
// last one if that expired and was not swept yet (compare ExpiresAt with a
// reading). ok is false if the coordinator keeps no lease of resource
// (never held, released, or swept). It reads no clock.
func (c *Coordinator) LeaseOf(resource string) (LeaseState, bool) {
	if !c.usable() {
		return LeaseState{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.leases.find(resource, c.leases.tag(resource))
	if !ok {
		return LeaseState{}, false
	}
	return c.stateOf(r.rec()), true
}

func (c *Coordinator) stateOf(h *held) LeaseState {
	return LeaseState{
		Resource:  h.resource,
		HolderID:  h.holder,
		RequestID: c.replay.idOf(h.slot, h.fence),
		Fence:     h.fence,
		ExpiresAt: clock.Instant{Millis: h.expiresAt, Domain: c.domain},
	}
}

// Restore loads s into a coordinator that has issued nothing and holds
// nothing (fresh from NewCoordinator, not restored before), and reads the
// coordinator's clock once to check that no lease ends later than now+TTL: a
// lease from the future is refused. It checks everything before changing
// anything and either restores all of s or returns an error and changes
// nothing:
//
//   - IssuedFence at most MaxFence; the coordinator continues from the
//     higher of it and its StartFence;
//   - every lease: a non-empty Resource and HolderID, a Fence from 1 to
//     IssuedFence, an ExpiresAt that is finite and in the coordinator's
//     domain (*clock.DomainError otherwise);
//   - no two leases with the same resource, fence or (non-empty) request id.
//
// Leases with a RequestID are put back in the replay cache, in order of
// fence (the last ReplayCacheSize of them), so a retry of the acquisition
// that made a restored live lease is answered with its grant: the same
// request id, resource, holder and fence, this coordinator's TTL, and the
// lease's ExpiresAt as CoordinatorExpiresAt. Restore with the TTL the leases
// were granted under.
func (c *Coordinator) Restore(s Snapshot) error {
	if !c.usable() {
		return errNoCoordinator()
	}
	if s.IssuedFence > maxFence {
		return argErr("snapshot.issuedFence", "is above MaxFence")
	}
	byRes := make(map[string]struct{}, len(s.Leases))
	byFence := make(map[uint64]struct{}, len(s.Leases))
	byID := make(map[string]struct{})
	for i, l := range s.Leases {
		arg := "snapshot.leases[" + strconv.Itoa(i) + "]"
		switch {
		case l.Resource == "":
			return argErr(arg+".resource", "must not be empty")
		case l.HolderID == "":
			return argErr(arg+".holderId", "must not be empty")
		case l.Fence == 0:
			return argErr(arg+".fence", "must be at least 1")
		case l.Fence > s.IssuedFence:
			return argErr(arg+".fence", "is above the snapshot's issuedFence "+strconv.FormatUint(s.IssuedFence, 10))
		}
		if err := l.ExpiresAt.Validate(); err != nil {
			return argErr(arg+".expiresAt", "is not a valid instant: "+err.Error())
		}
		if l.ExpiresAt.Domain != c.domain {
			return &clock.DomainError{Want: c.domain, Got: l.ExpiresAt.Domain}
		}
		if _, dup := byRes[l.Resource]; dup {
			return argErr(arg+".resource", strconv.Quote(l.Resource)+" has two leases")
		}
		if _, dup := byFence[l.Fence]; dup {
			return argErr(arg+".fence", strconv.FormatUint(l.Fence, 10)+" belongs to two leases")
		}
		byRes[l.Resource], byFence[l.Fence] = struct{}{}, struct{}{}
		if l.RequestID != "" {
			if _, dup := byID[l.RequestID]; dup {
				return argErr(arg+".requestId", strconv.Quote(l.RequestID)+" made two leases")
			}
			byID[l.RequestID] = struct{}{}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.restored || c.replay.grants > 0 || c.leases.count > 0 {
		return argErr("coordinator", "has already issued or restored leases; restore into a new one")
	}
	now, err := c.clk.Now()
	if err != nil {
		return err
	}
	if err := c.observe(now); err != nil {
		return err
	}
	for i, l := range s.Leases {
		if l.ExpiresAt.Millis > now.Millis+c.ms {
			return argErr("snapshot.leases["+strconv.Itoa(i)+"].expiresAt", "is "+l.ExpiresAt.String()+
				", later than now+TTL ("+now.AddMillis(c.ms).String()+"): a lease from the future")
		}
	}
	order := slices.Clone(s.Leases)
	slices.SortFunc(order, func(a, b LeaseState) int { return cmp.Compare(a.Fence, b.Fence) })
	var replayed []LeaseState
	for _, l := range order {
		rec := c.leases.insert(ref{}, c.leases.tag(l.Resource))
		rec.resource, rec.holder, rec.fence, rec.expiresAt, rec.slot = l.Resource, l.HolderID, l.Fence, l.ExpiresAt.Millis, -1
		if l.RequestID != "" {
			replayed = append(replayed, l)
		}
	}
	// The cache holds the last ReplayCacheSize grants: those with the
	// highest fences.
	if len(replayed) > ReplayCacheSize {
		replayed = replayed[len(replayed)-ReplayCacheSize:]
	}
	for _, l := range replayed {
		_, h := c.replay.lookup(l.RequestID)
		r, _ := c.leases.find(l.Resource, c.leases.tag(l.Resource))
		r.rec().slot = c.replay.add(l.RequestID, l.Resource, l.HolderID, l.Fence, l.ExpiresAt.Millis, h, -1)
	}
	c.issued = max(c.issued, s.IssuedFence)
	c.restored = true
	c.swept = c.leases.count
	return nil
}
