package wire

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Backend answers decoded calls. Service is the implementation most callers
// want; a host may put something in front of it (the Worker routes each call
// to the Durable Object of its resource). A Backend returns an *Error for a
// refused call; any other error is reported as an internal error.
type Backend interface {
	Call(ctx context.Context, m Message) (Reply, error)
}

// Defaults of ServiceConfig.
const (
	DefaultMaxLeases     = 100_000
	DefaultReleaseMemory = 100_000
)

// ServiceConfig configures a Service.
type ServiceConfig struct {
	// Clock is the coordinator's clock. Required. With a Store that outlives
	// the process, use a clock whose readings mean the same thing after a
	// restart, such as WallClock.
	Clock clock.Clock
	// TTL is the lease length. Required, positive.
	TTL time.Duration
	// Store keeps the state; every change is applied to it before the call
	// is answered. Nil is a fresh MemoryStore.
	Store Store
	// MaxLeases bounds the records (live leases, and expired ones not yet
	// swept). An acquisition that would add one more is refused with 503
	// too_many_leases; a live lease is never evicted. Zero means
	// DefaultMaxLeases.
	MaxLeases int
	// ReleaseMemory bounds how many finished releases are remembered (each
	// for one TTL) so that a retried release is answered ok. Zero means
	// DefaultReleaseMemory.
	ReleaseMemory int
}

// Service is the coordinator behind the handler. One lease.Coordinator makes
// every decision (grant, deny, renew, refuse, release) and issues fences
// from one counter for all resources; the Store keeps one record per live
// lease (with the hash of the holder's secret) and the fence high-water
// mark, written before any answer. Nothing else is kept per resource: a
// released or expired lease leaves no state behind once swept. Calls on one
// resource are serialized; calls on different resources run in parallel
// and share the store's commits. It is safe for concurrent use.
type Service struct {
	clk       clock.Clock
	ttl       time.Duration
	ttlMs     float64
	store     Store
	maxLeases int

	loadMu  sync.Mutex
	loaded  atomic.Bool
	loadErr error

	// coMu guards the co pointer: calls hold it for reading while the
	// coordinator decides; undo replaces the coordinator holding it for
	// writing.
	coMu   sync.RWMutex
	co     *lease.Coordinator
	broken error // set if undo failed: the service refuses every call

	records atomic.Int64 // records in the store (live and not yet swept)

	seed    maphash.Seed
	stripes [stripeCount]sync.Mutex // per-resource serialization, hashed

	rel releaseMemory

	sweepMu       sync.Mutex
	lastFullSweep atomic.Uint64 // float64 bits: the coordinator reading of the last sweep forced by a full service
}

// stripeCount is how many locks serialize calls per resource: a call holds
// the lock of its resource's stripe from reading the record until the
// store applied its change.
const stripeCount = 256

// NewService returns a service. Its store is loaded by the first call, or
// by Load.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Clock == nil || cfg.Clock.Domain() == "" {
		return nil, errors.New("wire: ServiceConfig.Clock is required and needs a domain")
	}
	if cfg.TTL <= 0 {
		return nil, errors.New("wire: ServiceConfig.TTL must be positive, got " + cfg.TTL.String())
	}
	if cfg.MaxLeases < 0 || cfg.ReleaseMemory < 0 {
		return nil, errors.New("wire: ServiceConfig limits must not be negative")
	}
	s := &Service{
		clk:       cfg.Clock,
		ttl:       cfg.TTL,
		ttlMs:     clock.Millis(cfg.TTL),
		store:     cfg.Store,
		maxLeases: cfg.MaxLeases,
		seed:      maphash.MakeSeed(),
	}
	s.lastFullSweep.Store(math.Float64bits(math.Inf(-1)))
	if s.store == nil {
		s.store = NewMemoryStore()
	}
	if s.maxLeases == 0 {
		s.maxLeases = DefaultMaxLeases
	}
	s.rel.max = cfg.ReleaseMemory
	if s.rel.max == 0 {
		s.rel.max = DefaultReleaseMemory
	}
	s.rel.window = s.ttlMs
	return s, nil
}

// WallClock returns a guarded clock in domain that reads Unix milliseconds
// at the moment it was created and then advances with the monotonic clock,
// so it never steps backwards while the process runs and its readings stay
// comparable with those of a previous run of the same host.
func WallClock(domain string) (*clock.Guarded, error) {
	start := time.Now()
	base := float64(start.UnixMilli())
	return clock.New(domain, func() float64 { return base + clock.Millis(time.Since(start)) })
}

// Load reads the store once and restores the coordinator from it. It
// refuses (and keeps refusing) stored state that is inconsistent, or whose
// lease expires more than one TTL after the clock's current reading (an
// instant from the future: the clock was set back, or the state was
// edited). Call answers with the same error if loading failed.
func (s *Service) Load(ctx context.Context) error {
	if s.loaded.Load() {
		return s.loadErr
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.loaded.Load() {
		return s.loadErr
	}
	err := s.load(ctx)
	if err != nil && !errors.Is(err, ErrInconsistent) {
		// A store that could not be read (as opposed to one whose
		// contents were refused) is tried again by the next call.
		return err
	}
	s.loadErr = err
	s.loaded.Store(true)
	return err
}

func (s *Service) load(ctx context.Context) error {
	st, err := s.store.Load(ctx)
	if err != nil {
		return err
	}
	if err := CheckStored(st); err != nil {
		return err
	}
	now, err := s.clk.Now()
	if err != nil {
		return errors.New("wire: coordinator clock: " + err.Error())
	}
	snap := lease.Snapshot{IssuedFence: st.IssuedFence}
	for _, r := range st.Records {
		if r.ExpiresAt > now.Millis+s.ttlMs {
			return inconsistent("the lease of " + quoteShort(r.Resource) + " expires at " +
				strconv.FormatFloat(r.ExpiresAt, 'f', -1, 64) + ", more than the TTL after the clock's reading " +
				strconv.FormatFloat(now.Millis, 'f', -1, 64) + ": an instant from the future (was the clock set back, or the state edited?)")
		}
		if r.ExpiresAt > now.Millis {
			snap.Leases = append(snap.Leases, r.state(now.Domain))
		}
	}
	uniqueRequestIDs(snap.Leases)
	co, err := s.newCoordinator()
	if err != nil {
		return err
	}
	if err := co.Restore(snap); err != nil {
		return errors.Join(ErrInconsistent, err)
	}
	s.coMu.Lock()
	s.co = co
	s.coMu.Unlock()
	s.records.Store(int64(len(st.Records)))
	// Releases of the last TTL, oldest first, so the memory keeps the
	// newest if there are more than it holds.
	rels := slices.Clone(st.Released)
	slices.SortFunc(rels, func(a, b Release) int { return cmpFloat(a.At, b.At) })
	for _, r := range rels {
		if r.At > now.Millis+s.ttlMs {
			return inconsistent("the release " + quoteShort(r.RequestID) + " is dated after now: an instant from the future")
		}
		s.rel.add(r, now.Millis)
	}
	return nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *Service) newCoordinator() (*lease.Coordinator, error) {
	return lease.NewCoordinator(lease.CoordinatorConfig{Clock: s.clk, TTL: s.ttl})
}

func (r Record) state(domain string) lease.LeaseState {
	return lease.LeaseState{Resource: r.Resource, HolderID: r.HolderID, RequestID: r.RequestID, Fence: r.Fence,
		ExpiresAt: clock.At(domain, r.ExpiresAt)}
}

// Call answers one decoded call.
func (s *Service) Call(ctx context.Context, m Message) (Reply, error) {
	if err := s.Load(ctx); err != nil {
		if errors.Is(err, ErrInconsistent) {
			return Reply{}, errCode(CodeInternal, err.Error())
		}
		return Reply{}, errCode(CodeUnavailable, "loading the state: "+err.Error())
	}
	mu := &s.stripes[s.stripe(m.Request.Resource)]
	mu.Lock()
	defer mu.Unlock()
	switch m.Op {
	case OpAcquire:
		return s.acquire(ctx, m)
	case OpRenew:
		return s.renew(ctx, m)
	case OpRelease:
		return s.release(ctx, m)
	}
	return Reply{}, errCode(CodeNotFound, "no such call "+strconv.Quote(string(m.Op)))
}

// decide runs fn on the coordinator.
func (s *Service) decide(fn func(co *lease.Coordinator) error) error {
	s.coMu.RLock()
	defer s.coMu.RUnlock()
	if s.broken != nil {
		return errCode(CodeUnavailable, "the coordinator could not be restored after a failed write; restart it: "+s.broken.Error())
	}
	return fn(s.co)
}

func (s *Service) get(ctx context.Context, resource string) (Record, bool, error) {
	rec, ok, err := s.store.Get(ctx, resource)
	if err != nil {
		if errors.Is(err, ErrInconsistent) {
			return Record{}, false, errCode(CodeInternal, err.Error())
		}
		return Record{}, false, errCode(CodeUnavailable, "reading the record of "+quoteShort(resource)+": "+err.Error())
	}
	return rec, ok, nil
}

func (s *Service) acquire(ctx context.Context, m Message) (Reply, error) {
	q := m.Request
	hash := sha256.Sum256([]byte(m.Secret))
	prev, had, err := s.get(ctx, q.Resource)
	if err != nil {
		return Reply{}, err
	}
	if had && prev.RequestID == q.RequestID && prev.HolderID == q.HolderID && !hashEqual(prev.SecretHash, hash) {
		return Reply{}, errCode(CodeWrongSecret, "this request id belongs to an acquisition made with another secret")
	}
	if !had && !s.reserve(s.stripe(q.Resource)) {
		return Reply{}, errCode(CodeTooManyLeases, "the coordinator holds its maximum of "+strconv.Itoa(s.maxLeases)+" leases; retry later")
	}
	keep := false
	defer func() {
		if !had && !keep {
			s.records.Add(-1)
		}
	}()
	var out lease.Outcome
	var issued uint64
	err = s.decide(func(co *lease.Coordinator) (err error) {
		out, err = co.Acquire(q)
		issued = co.IssuedFence()
		return err
	})
	if err != nil {
		return Reply{}, coreError(err)
	}
	if !out.OK {
		return Reply{HeldBy: out.HeldBy, RetryAfterMillis: clock.Millis(out.RetryAfter)}, nil
	}
	g := out.Grant
	if had && g.Fence == prev.Fence {
		// The coordinator recognised a retry of the acquisition that made
		// the current lease, whose secret matched above.
		return Reply{OK: true, Grant: wireGrant(g)}, nil
	}
	rec := Record{Resource: q.Resource, HolderID: q.HolderID, RequestID: q.RequestID, Fence: g.Fence,
		ExpiresAt: g.CoordinatorExpiresAt.Millis, SecretHash: hash}
	if err := s.apply(ctx, Change{IssuedFence: issued, Put: []Record{rec}}, prev, had); err != nil {
		return Reply{}, err
	}
	keep = true
	return Reply{OK: true, Grant: wireGrant(g)}, nil
}

func (s *Service) renew(ctx context.Context, m Message) (Reply, error) {
	q := m.Request
	prev, had, err := s.get(ctx, q.Resource)
	if err != nil {
		return Reply{}, err
	}
	if err := checkSecret(prev, had, q, m.Secret); err != nil {
		return Reply{}, err
	}
	var out lease.Outcome
	var issued uint64
	err = s.decide(func(co *lease.Coordinator) (err error) {
		out, err = co.Renew(q)
		issued = co.IssuedFence()
		return err
	})
	if err != nil {
		return Reply{}, coreError(err)
	}
	if !out.OK {
		return Reply{Reason: string(out.Reason)}, nil
	}
	g := out.Grant
	if !had || prev.HolderID != q.HolderID || prev.Fence != g.Fence {
		s.undo(q.Resource, prev, had)
		return Reply{}, errCode(CodeInternal, "renewed a lease of "+quoteShort(q.Resource)+" that has no record")
	}
	rec := prev
	rec.ExpiresAt = g.CoordinatorExpiresAt.Millis
	if err := s.apply(ctx, Change{IssuedFence: issued, Put: []Record{rec}}, prev, had); err != nil {
		return Reply{}, err
	}
	return Reply{OK: true, Grant: wireGrant(g)}, nil
}

func (s *Service) release(ctx context.Context, m Message) (Reply, error) {
	q := m.Request
	hash := sha256.Sum256([]byte(m.Secret))
	now, err := s.clk.Now()
	if err != nil {
		return Reply{}, errCode(CodeInternal, "coordinator clock: "+err.Error())
	}
	if s.rel.done(q, hash, now.Millis) {
		return Reply{OK: true}, nil // a retry of the release that ended the lease
	}
	prev, had, err := s.get(ctx, q.Resource)
	if err != nil {
		return Reply{}, err
	}
	if err := checkSecret(prev, had, q, m.Secret); err != nil {
		return Reply{}, err
	}
	var done bool
	var issued uint64
	err = s.decide(func(co *lease.Coordinator) (err error) {
		done, err = co.Release(fence.Token{Resource: q.Resource, HolderID: q.HolderID, Fence: q.Fence})
		issued = co.IssuedFence()
		return err
	})
	if err != nil {
		return Reply{}, coreError(err)
	}
	if !done {
		return Reply{Reason: string(lease.Expired)}, nil
	}
	if !had || prev.HolderID != q.HolderID || prev.Fence != q.Fence {
		s.undo(q.Resource, prev, had)
		return Reply{}, errCode(CodeInternal, "released a lease of "+quoteShort(q.Resource)+" that has no record")
	}
	rel := Release{RequestID: q.RequestID, Resource: q.Resource, HolderID: q.HolderID, Fence: q.Fence, SecretHash: hash, At: now.Millis}
	c := Change{IssuedFence: issued, Delete: []string{q.Resource}, Released: []Release{rel}}
	if ls, ok := s.store.(LaterStore); ok {
		// Answered before it is durable: a crash that loses it leaves
		// the lease held by the same holder until its TTL ends (no fence
		// reissued, no second holder), and every later grant waits for
		// a transaction that contains it.
		if err := ls.ApplyLater(c); err != nil {
			s.undo(q.Resource, prev, had)
			return Reply{}, errCode(CodeUnavailable, "could not store the release of "+quoteShort(q.Resource)+"; nothing changed: "+err.Error())
		}
	} else if err := s.apply(ctx, c, prev, had); err != nil {
		return Reply{}, err
	}
	s.records.Add(-1)
	s.rel.add(rel, now.Millis)
	return Reply{OK: true}, nil
}

// apply makes c durable. If that fails, the coordinator is put back to
// where it was before the call (prev is the resource's record then) and the
// call is answered 503 unavailable.
func (s *Service) apply(ctx context.Context, c Change, prev Record, had bool) error {
	if err := s.store.Apply(ctx, c); err != nil {
		name := ""
		if len(c.Put) > 0 {
			name = c.Put[0].Resource
		} else if len(c.Delete) > 0 {
			name = c.Delete[0]
		}
		s.undo(name, prev, had)
		return errCode(CodeUnavailable, "could not store the change to "+quoteShort(name)+"; nothing changed: "+err.Error())
	}
	return nil
}

// undo puts resource's lease back to prev (or to none) in a fresh
// coordinator restored from a snapshot of the current one: the core has no
// way to take a grant back, and a restore is exact. Fences issued meanwhile
// stay issued, so the next fence is still above every fence handed out.
// It is only needed after a failed write.
func (s *Service) undo(resource string, prev Record, had bool) {
	s.coMu.Lock()
	defer s.coMu.Unlock()
	if s.broken != nil {
		return
	}
	snap := s.co.Snapshot()
	snap.Leases = slices.DeleteFunc(snap.Leases, func(l lease.LeaseState) bool { return l.Resource == resource })
	now, err := s.clk.Now()
	if err == nil && had && prev.ExpiresAt > now.Millis {
		snap.Leases = append(snap.Leases, prev.state(now.Domain))
	}
	uniqueRequestIDs(snap.Leases)
	co, err2 := s.newCoordinator()
	if err = errors.Join(err, err2); err == nil {
		err = co.Restore(snap)
	}
	if err != nil {
		s.broken = err
		return
	}
	s.co = co
}

// uniqueRequestIDs keeps the request id of a lease only on the lease with
// the highest fence that has it. Two live leases may have been made with
// one request id (the core refuses that only while the first grant is in
// its replay cache); the core restores a request id once, for the retry of
// the newest acquisition, which is also what it remembered before.
func uniqueRequestIDs(leases []lease.LeaseState) {
	newest := make(map[string]uint64, len(leases))
	for _, l := range leases {
		if l.RequestID != "" && l.Fence > newest[l.RequestID] {
			newest[l.RequestID] = l.Fence
		}
	}
	for i := range leases {
		if l := &leases[i]; l.RequestID != "" && newest[l.RequestID] != l.Fence {
			l.RequestID = ""
		}
	}
}

func (s *Service) stripe(resource string) int {
	return int(maphash.String(s.seed, resource) % stripeCount)
}

// reserve counts one more record, if the limit allows it. held is the
// stripe whose lock the caller holds.
func (s *Service) reserve(held int) bool {
	for {
		n := s.records.Load()
		if n >= int64(s.maxLeases) {
			// Full: sweep expired records, at most once per tenth of a
			// TTL (and per second) of the coordinator's clock, so that
			// refused acquisitions cannot make it scan all the time;
			// then look again.
			last := s.lastFullSweep.Load()
			now, err := s.clk.Now()
			if err == nil && now.Millis-math.Float64frombits(last) >= min(s.ttlMs/10, 1000) &&
				s.lastFullSweep.CompareAndSwap(last, math.Float64bits(now.Millis)) {
				_, _ = s.sweep(context.Background(), held)
				continue
			}
			return false
		}
		if s.records.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Records returns how many records the store holds: live leases, and
// expired ones not yet swept.
func (s *Service) Records() int { return int(s.records.Load()) }

// sweepBatch bounds the records one Sweep deletes in one write.
const sweepBatch = 4096

// Sweep deletes the records of expired leases and forgets releases older
// than one TTL (up to a few thousand of each per call, in one write each),
// and returns how many records and releases it removed: zero once nothing
// is left to remove. A record is deleted only once its lease is over, so no
// answer changes. Run it periodically, until it returns zero
// (cmd/coordinator does, every half TTL); a full service also runs it
// before refusing.
func (s *Service) Sweep(ctx context.Context) (int, error) { return s.sweep(ctx, -1) }

// sweep is Sweep run by a caller that holds the lock of stripe skip (or
// none, -1).
func (s *Service) sweep(ctx context.Context, skip int) (int, error) {
	if err := s.Load(ctx); err != nil {
		return 0, err
	}
	if !s.sweepMu.TryLock() {
		return 0, nil // one sweep at a time
	}
	defer s.sweepMu.Unlock()
	now, err := s.clk.Now()
	if err != nil {
		return 0, err
	}
	s.rel.prune(now.Millis)
	// Releases older than a TTL are forgotten by the store too.
	forgot := 0
	if ids, err := s.store.Forgettable(ctx, now.Millis-s.ttlMs, sweepBatch); err != nil {
		return 0, err
	} else if len(ids) > 0 {
		if err := s.store.Apply(ctx, Change{Forget: ids, ForgetBefore: now.Millis - s.ttlMs}); err != nil {
			return 0, err
		}
		forgot = len(ids)
	}
	names, err := s.store.Expired(ctx, now.Millis, sweepBatch)
	if err != nil || len(names) == 0 {
		return forgot, err
	}
	idx := make([]int, 0, len(names))
	for _, n := range names {
		if i := s.stripe(n); i != skip { // the caller holds skip already
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.stripes[i].Lock()
	}
	defer func() {
		for _, i := range idx {
			s.stripes[i].Unlock()
		}
	}()
	var del []string
	for _, n := range names {
		rec, ok, err := s.store.Get(ctx, n)
		if err == nil && ok && rec.ExpiresAt <= now.Millis {
			del = append(del, n)
		}
	}
	if len(del) == 0 {
		return forgot, nil
	}
	if err := s.store.Apply(ctx, Change{Delete: del}); err != nil {
		return forgot, err
	}
	s.records.Add(-int64(len(del)))
	return forgot + len(del), nil
}

// checkSecret refuses a renew or release that names the resource's current
// record (holder and fence) with another secret.
func checkSecret(rec Record, had bool, q lease.Request, secret string) error {
	if had && rec.HolderID == q.HolderID && rec.Fence == q.Fence && !hashEqual(rec.SecretHash, sha256.Sum256([]byte(secret))) {
		return errCode(CodeWrongSecret, "the secret does not match the lease's")
	}
	return nil
}

func hashEqual(a, b [32]byte) bool {
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func wireGrant(g lease.Grant) *Grant {
	return &Grant{
		RequestID: g.RequestID, Resource: g.Resource, HolderID: g.HolderID, Fence: g.Fence,
		TTLMillis: clock.Millis(g.TTL), CoordinatorExpiresAt: FromInstant(g.CoordinatorExpiresAt),
	}
}

// coreError maps an error from package lease to a refusal.
func coreError(err error) error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	var ae *lease.ArgumentError
	if errors.As(err, &ae) {
		if ae.Arg == "requestId" {
			return errCode(CodeRequestIDReused, err.Error())
		}
		return errCode(CodeRejected, err.Error())
	}
	return errCode(CodeInternal, err.Error())
}

// releaseMemory remembers finished releases by request id for one TTL, at
// most max of them, so that a retried release whose first attempt ended the
// lease is answered ok whatever happened to the resource since. The store
// keeps them too (in the release's own write), and a restarted service
// loads those of the last TTL.
type releaseMemory struct {
	mu     sync.Mutex
	max    int
	window float64 // ms
	byID   map[string]released
	queue  []releasedAt // oldest first, from head
	head   int
}

type released struct {
	resource, holder string
	fence            uint64
	hash             [32]byte
	at               float64
}

type releasedAt struct {
	id string
	at float64
}

func (r *releaseMemory) done(q lease.Request, hash [32]byte, now float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked(now)
	e, ok := r.byID[q.RequestID]
	return ok && now-e.at <= r.window && e.resource == q.Resource && e.holder == q.HolderID && e.fence == q.Fence &&
		hashEqual(e.hash, hash)
}

// add remembers rel (released at rel.At); now is the current reading.
func (r *releaseMemory) add(rel Release, now float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID = make(map[string]released)
	}
	if _, dup := r.byID[rel.RequestID]; !dup {
		r.queue = append(r.queue, releasedAt{rel.RequestID, rel.At})
	}
	r.byID[rel.RequestID] = released{resource: rel.Resource, holder: rel.HolderID, fence: rel.Fence, hash: rel.SecretHash, at: rel.At}
	r.pruneLocked(now)
}

func (r *releaseMemory) prune(now float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked(now)
}

func (r *releaseMemory) pruneLocked(now float64) {
	for r.head < len(r.queue) && (len(r.queue)-r.head > r.max || now-r.queue[r.head].at > r.window) {
		old := r.queue[r.head]
		if e, ok := r.byID[old.id]; ok && e.at == old.at {
			delete(r.byID, old.id)
		}
		r.queue[r.head] = releasedAt{}
		r.head++
	}
	switch {
	case r.head == len(r.queue):
		// Empty: let go of the map and the queue (a Go map never shrinks).
		r.queue, r.head, r.byID = nil, 0, nil
	case r.head > 1024 && r.head > len(r.queue)/2:
		r.queue = append([]releasedAt(nil), r.queue[r.head:]...)
		r.head = 0
		m := make(map[string]released, len(r.byID))
		for k, v := range r.byID {
			m[k] = v
		}
		r.byID = m
	}
}
