package lease

import (
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
	// Clock is the coordinator's own clock. Required.
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
// memory; persisting IssuedFence and passing it back as StartFence is the
// caller's job. Acquire is the method most callers want. A Coordinator must be
// created with NewCoordinator and is safe for concurrent use.
type Coordinator struct {
	clk    clock.Clock
	domain string // clk.Domain(), fixed at creation
	ttl    time.Duration
	ms     float64 // ttl in milliseconds

	mu     sync.Mutex
	issued uint64
	last   clock.Instant // latest reading acted on
	// leases holds the current or last lease of each resource. Released
	// leases are deleted; expired ones are reused when their resource is
	// acquired again and swept once enough new resources were added.
	leases map[string]held
	added  int // entries added to leases since the last sweep
	// The replay cache: grant number n (1, 2, ...) of the last
	// ReplayCacheSize acquire grants sits at ring[(n-1)%ReplayCacheSize],
	// and replay maps its request id to n.
	replay map[string]uint64
	ring   []cached
	grants uint64 // acquire grants made
}

type held struct {
	holder    string
	fence     uint64
	expiresAt float64 // coordinator millis
}

type cached struct {
	grant Grant
	n     uint64 // which grant this is; 0 once its id was granted again
}

// sweepMin is the fewest additions between two sweeps of expired leases.
const sweepMin = 1024

// NewCoordinator returns a coordinator with no leases.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	if cfg.Clock == nil {
		return nil, argErr("clock", "is required")
	}
	if cfg.Clock.Domain() == "" {
		return nil, argErr("clock", "has an empty domain")
	}
	if cfg.TTL <= 0 {
		return nil, argErr("ttl", "must be positive, got "+cfg.TTL.String())
	}
	if cfg.StartFence >= maxFence {
		return nil, argErr("startFence", "leaves no fence to issue")
	}
	return &Coordinator{
		clk:    cfg.Clock,
		domain: cfg.Clock.Domain(),
		ttl:    cfg.TTL,
		ms:     clock.Millis(cfg.TTL),
		issued: cfg.StartFence,
		leases: make(map[string]held),
		// The replay cache grows to ReplayCacheSize on demand, so a
		// coordinator per resource (one per Durable Object, say) stays small.
		replay: make(map[string]uint64),
	}, nil
}

// maxFence keeps fences exact as JavaScript numbers (2^53 - 1).
const maxFence = 1<<53 - 1

// MaxFence is the highest fence a coordinator issues.
const MaxFence uint64 = maxFence

// Domain returns the coordinator's clock domain.
func (c *Coordinator) Domain() string { return c.domain }

// TTL returns the lease length.
func (c *Coordinator) TTL() time.Duration { return c.ttl }

// IssuedFence returns the highest fence issued so far (StartFence if none).
// Persist it and pass it as StartFence to a successor.
func (c *Coordinator) IssuedFence() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.issued
}

// Acquire is shorthand for AcquireAt with a fresh reading of the
// coordinator's clock. The clock is read while the coordinator's lock is
// held, so concurrent calls act on their readings in order.
func (c *Coordinator) Acquire(req Request) (Outcome, error) {
	if err := req.validate(KindAcquire); err != nil {
		return Outcome{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now, err := c.clk.Now()
	if err != nil {
		return Outcome{}, err
	}
	return c.acquireLocked(now, req)
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
	if err := req.validate(KindAcquire); err != nil {
		return Outcome{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acquireLocked(now, req)
}

func (c *Coordinator) acquireLocked(now clock.Instant, req Request) (Outcome, error) {
	if err := c.observe(now); err != nil {
		return Outcome{}, err
	}
	cur, exists := c.leases[req.Resource]
	live := exists && now.Millis < cur.expiresAt
	prevN, seen := c.replay[req.RequestID]
	if seen {
		g := c.ring[(prevN-1)%ReplayCacheSize].grant
		if g.Resource != req.Resource || g.HolderID != req.HolderID {
			return Outcome{}, argErr("requestId", "was already used by "+g.HolderID+" for "+g.Resource)
		}
		if live && cur.fence == g.Fence {
			c.last = now
			return Outcome{OK: true, Grant: g}, nil
		}
		// The lease that request made is over; the retry is a new acquisition.
	}
	if live {
		c.last = now
		return Outcome{
			HeldBy:     cur.holder,
			RetryAfter: clock.FromMillis(cur.expiresAt - now.Millis),
		}, nil
	}
	if c.issued >= maxFence {
		return Outcome{}, argErr("fence", "space is exhausted")
	}
	c.last = now
	c.issued++
	exp := now.Millis + c.ms
	c.leases[req.Resource] = held{holder: req.HolderID, fence: c.issued, expiresAt: exp}
	if !exists {
		c.added++
		if c.added >= sweepMin && c.added >= len(c.leases)/2 {
			c.sweep(now)
		}
	}
	g := Grant{
		RequestID:            req.RequestID,
		Resource:             req.Resource,
		HolderID:             req.HolderID,
		Fence:                c.issued,
		TTL:                  c.ttl,
		CoordinatorExpiresAt: clock.At(now.Domain, exp),
	}
	c.remember(g, prevN, seen)
	return Outcome{OK: true, Grant: g}, nil
}

// Renew is shorthand for RenewAt with a fresh reading of the coordinator's
// clock, read while the coordinator's lock is held.
func (c *Coordinator) Renew(req Request) (Outcome, error) {
	if err := req.validate(KindRenew); err != nil {
		return Outcome{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now, err := c.clk.Now()
	if err != nil {
		return Outcome{}, err
	}
	return c.renewLocked(now, req)
}

// RenewAt processes a renewal at now. A renewal of the current, unexpired
// lease (same holder, same fence) extends it to now+TTL, dated from the
// coordinator's own reading, and keeps its fence. Anything else, including a
// lease that expired while nobody else took the resource, is refused with
// Reason Expired: an expired lease is never resurrected.
func (c *Coordinator) RenewAt(now clock.Instant, req Request) (Outcome, error) {
	if err := req.validate(KindRenew); err != nil {
		return Outcome{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renewLocked(now, req)
}

func (c *Coordinator) renewLocked(now clock.Instant, req Request) (Outcome, error) {
	if err := c.observe(now); err != nil {
		return Outcome{}, err
	}
	if req.Fence > c.issued {
		return Outcome{}, argErr("fence", "was never issued by this coordinator")
	}
	c.last = now
	cur, ok := c.leases[req.Resource]
	if !ok || cur.holder != req.HolderID || cur.fence != req.Fence || now.Millis >= cur.expiresAt {
		return Outcome{Reason: Expired}, nil
	}
	cur.expiresAt = now.Millis + c.ms
	c.leases[req.Resource] = cur
	return Outcome{OK: true, Grant: Grant{
		RequestID:            req.RequestID,
		Resource:             req.Resource,
		HolderID:             req.HolderID,
		Fence:                cur.fence,
		TTL:                  c.ttl,
		CoordinatorExpiresAt: clock.At(now.Domain, cur.expiresAt),
	}}, nil
}

// Release is shorthand for ReleaseAt with a fresh reading of the
// coordinator's clock, read while the coordinator's lock is held.
func (c *Coordinator) Release(tok fence.Token) (bool, error) {
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
	if err := tok.Validate(); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.releaseLocked(now, tok)
}

func (c *Coordinator) releaseLocked(now clock.Instant, tok fence.Token) (bool, error) {
	if err := c.observe(now); err != nil {
		return false, err
	}
	c.last = now
	cur, ok := c.leases[tok.Resource]
	if !ok || cur.holder != tok.HolderID || cur.fence != tok.Fence || now.Millis >= cur.expiresAt {
		return false, nil
	}
	delete(c.leases, tok.Resource)
	return true, nil
}

// Holder reports who holds resource at now, and the fence and the time left,
// or ok false if nobody does.
func (c *Coordinator) Holder(now clock.Instant, resource string) (holder string, fence uint64, left time.Duration, ok bool, err error) {
	if resource == "" {
		return "", 0, 0, false, argErr("resource", "must not be empty")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.observe(now); err != nil {
		return "", 0, 0, false, err
	}
	c.last = now
	cur, ok := c.leases[resource]
	if !ok || now.Millis >= cur.expiresAt {
		return "", 0, 0, false, nil
	}
	return cur.holder, cur.fence, clock.FromMillis(cur.expiresAt - now.Millis), true, nil
}

// observe checks that now is a usable reading of the coordinator's clock: its
// domain, finite, and not earlier than a reading already acted on. It changes
// nothing; a call that succeeds records now in c.last.
func (c *Coordinator) observe(now clock.Instant) error {
	if err := now.Validate(); err != nil {
		return err
	}
	if now.Domain != c.domain {
		return &clock.DomainError{Want: c.domain, Got: now.Domain}
	}
	if c.last.Domain != "" && now.Millis < c.last.Millis {
		return &clock.ReadingError{Domain: now.Domain, Problem: clock.Backwards, Value: now.Millis, Previous: c.last.Millis}
	}
	return nil
}

// remember records g, the newest acquire grant, in the replay cache,
// evicting the oldest of the last ReplayCacheSize. prevN is the number of the
// cached grant with the same request id, if seen: that slot is retired so its
// eviction later leaves the newer entry alone.
func (c *Coordinator) remember(g Grant, prevN uint64, seen bool) {
	if seen {
		c.ring[(prevN-1)%ReplayCacheSize].n = 0
	}
	c.grants++
	n := c.grants
	if len(c.ring) < ReplayCacheSize {
		c.ring = append(c.ring, cached{grant: g, n: n})
	} else {
		old := &c.ring[(n-1)%ReplayCacheSize]
		if old.n != 0 {
			delete(c.replay, old.grant.RequestID)
		}
		*old = cached{grant: g, n: n}
	}
	c.replay[g.RequestID] = n
}

// sweep deletes the entries of leases that are over at now. It runs once
// the entries added since the last sweep reach half the map (and at least
// sweepMin), so its cost is constant per acquisition amortized, and the map
// holds at most about twice the live leases plus sweepMin. A resource's
// entry says nothing once its lease is over: acquire, renew, release and
// Holder answer the same with or without it.
func (c *Coordinator) sweep(now clock.Instant) {
	for res, h := range c.leases {
		if now.Millis >= h.expiresAt {
			delete(c.leases, res)
		}
	}
	c.added = 0
}
