package service

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Persister keeps a Local's entries on storage that outlives the process:
// the embedded database (package pebblestore) or a Durable Object's
// storage.
type Persister interface {
	// Load returns everything stored. It is called once, before any Write.
	Load(ctx context.Context) (Stored, error)
	// Write applies b, all of it or nothing. With sync, b and every write
	// made before it are durable when Write returns; without, b is durable
	// no later than the next synced write. A failed Write changed nothing
	// that will be read back.
	Write(ctx context.Context, b Batch, sync bool) error
}

// Stored is what a Persister holds.
type Stored struct {
	// Mark is the fence mark: no fence the store ever issued is above it.
	Mark    uint64
	Entries []Entry
}

// Batch is one write: entries put and deleted and, if not zero, a new
// fence mark (which only ever rises).
type Batch struct {
	Mark   uint64
	Put    []Entry
	Delete []string
}

// Defaults of LocalConfig.
const (
	DefaultMaxLeases     = 100_000
	DefaultReleaseMemory = 100_000
)

// LocalConfig configures a Local.
type LocalConfig struct {
	// Clock is the coordinator's clock. Required. With a Persister, use a
	// clock whose readings mean the same after a restart (WallClock).
	Clock clock.Clock
	// TTL is the lease length. Required, positive.
	TTL time.Duration
	// Persist keeps the entries durable; nil keeps them in memory only.
	Persist Persister
	// MaxLeases bounds the lease records (live, and expired ones not yet
	// swept); zero means DefaultMaxLeases. A live lease is never evicted.
	MaxLeases int
	// ReleaseMemory bounds the finished releases remembered for their
	// retries; zero means DefaultReleaseMemory.
	ReleaseMemory int
	// MinFence makes every fence issued at least MinFence (after a restore
	// from a backup, which is older than the fences already issued).
	MinFence uint64
	// FenceReserve is how far ahead of the fences issued the stored fence
	// mark is kept: once a fence comes within FenceReserve/2 of the mark,
	// the mark is raised to that fence + FenceReserve - 1 in a synced write
	// of its own, made before any write holding the fence. A restarted
	// store resumes above the mark. Then losing the last writes of a log
	// (a torn or damaged tail, which a store cannot tell from a crash
	// before the sync) can lose grants but never lowers the fences: to
	// lower them, a lost tail would have to hold a mark write and the
	// FenceReserve/2 grants after it, which Pebble refuses as damage
	// (docs/service.md). Zero writes the mark in each grant's own write
	// instead, which is right for storage that never loses an acknowledged
	// write (a Durable Object's).
	FenceReserve uint64
}

// Local is the Store whose entries this process owns: every entry is in
// memory, decided on there, made durable by its Persister, and only then
// replaced, so memory holds exactly what is durable (releases, and sweeps,
// excepted: they are written without waiting for a sync). Calls on one
// resource run one at a time; calls on different resources run in
// parallel and share the Persister's syncs. Fences come from one counter
// for all resources.
type Local struct {
	clk         clock.Clock
	ttl         float64 // milliseconds
	persist     Persister
	maxLeases   int64
	maxReleases int64
	minFence    uint64
	reserve     uint64

	issued           atomic.Uint64 // the highest fence issued
	mark             atomic.Uint64 // the stored fence mark
	markMu           sync.Mutex
	leases, releases atomic.Int64

	seed    maphash.Seed
	stripes [stripeCount]stripe

	loadMu  sync.Mutex
	loaded  atomic.Bool
	loadErr error

	sweepMu  sync.Mutex
	reclaimT atomic.Uint64 // float64 bits: the reading of the last sweep made for a full store
}

// stripeCount is how many locks serialize calls per resource.
const stripeCount = 256

type stripe struct {
	mu sync.Mutex
	m  map[string]Entry
}

var _ Store = (*Local)(nil)

// NewLocal returns a Local. Its Persister is read by Load, or by the
// first call.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Clock == nil || cfg.Clock.Domain() == "" {
		return nil, errors.New("service: LocalConfig.Clock is required and needs a domain")
	}
	if cfg.TTL <= 0 {
		return nil, errors.New("service: LocalConfig.TTL must be positive, got " + cfg.TTL.String())
	}
	if cfg.MaxLeases < 0 || cfg.ReleaseMemory < 0 || cfg.MinFence > lease.MaxFence {
		return nil, errors.New("service: LocalConfig limits must not be negative, and MinFence at most lease.MaxFence")
	}
	l := &Local{clk: cfg.Clock, ttl: clock.Millis(cfg.TTL), persist: cfg.Persist, minFence: cfg.MinFence,
		reserve: cfg.FenceReserve, maxLeases: int64(cfg.MaxLeases), maxReleases: int64(cfg.ReleaseMemory), seed: maphash.MakeSeed()}
	if l.maxLeases == 0 {
		l.maxLeases = DefaultMaxLeases
	}
	if l.maxReleases == 0 {
		l.maxReleases = DefaultReleaseMemory
	}
	l.reclaimT.Store(math.Float64bits(math.Inf(-1)))
	for i := range l.stripes {
		l.stripes[i].m = map[string]Entry{}
	}
	return l, nil
}

// Load reads the Persister once and checks everything (CheckEntry, and no
// instant more than one TTL after the clock's reading). Stored state that
// is inconsistent is refused, and keeps being refused; a Persister that
// could not be read is tried again by the next call.
func (l *Local) Load(ctx context.Context) error {
	if l.loaded.Load() {
		return l.loadErr
	}
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	if l.loaded.Load() {
		return l.loadErr
	}
	err := l.load(ctx)
	if err != nil && !errors.Is(err, ErrInconsistent) {
		return err
	}
	l.loadErr = err
	l.loaded.Store(true)
	return err
}

func (l *Local) load(ctx context.Context) error {
	var st Stored
	if l.persist != nil {
		var err error
		if st, err = l.persist.Load(ctx); err != nil {
			if errors.Is(err, ErrInconsistent) {
				return err
			}
			return errors.Join(ErrUnavailable, err)
		}
	}
	now, err := l.clk.Now()
	if err != nil {
		return errors.New("service: coordinator clock: " + err.Error())
	}
	for _, e := range st.Entries {
		if err := CheckEntry(e, st.Mark); err != nil {
			return err
		}
		if err := checkTimes(e, now.Millis, l.ttl); err != nil {
			return err
		}
		m := l.stripes[l.stripeOf(e.Resource)].m
		if _, dup := m[e.Resource]; dup {
			return inconsistent("resource " + quote(e.Resource) + " has two entries")
		}
		m[e.Resource] = e
		l.count(Entry{}, e)
	}
	l.mark.Store(st.Mark)
	l.issued.Store(max(st.Mark, l.minFence-min(l.minFence, 1)))
	return nil
}

func (l *Local) stripeOf(resource string) int {
	return int(maphash.String(l.seed, resource) % stripeCount)
}

// count moves the counts of lease records and releases from before to
// after.
func (l *Local) count(before, after Entry) {
	l.leases.Add(int64(min(after.Fence, 1)) - int64(min(before.Fence, 1)))
	l.releases.Add(int64(len(after.Released) - len(before.Released)))
}

// Update runs fn on resource's entry in memory, under the resource's lock.
// A new fence fn issues is claimed from the counter (fn runs again with the
// counter's new value if another resource took it meanwhile), the stored
// fence mark raised if needed, the change written, and only then the entry
// in memory replaced.
func (l *Local) Update(ctx context.Context, resource string, fn func(*Txn) error) error {
	if err := l.Load(ctx); err != nil {
		return err
	}
	i := l.stripeOf(resource)
	st := &l.stripes[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		cur, ok := st.m[resource]
		if !ok {
			cur = Entry{Resource: resource}
		}
		now, err := l.clk.Now()
		if err != nil {
			return errors.New("service: coordinator clock: " + err.Error())
		}
		t := Txn{Now: now, Issued: l.issued.Load(), Entry: cur, KeepReleases: l.releases.Load() < l.maxReleases}
		if cur.Fence == 0 && l.leases.Load() >= l.maxLeases {
			if l.reclaim(ctx, i, now.Millis) {
				continue
			}
			t.Full = true
		}
		if err := fn(&t); err != nil {
			return err
		}
		if !t.write {
			return nil
		}
		next := t.next
		var b Batch
		if next.Fence > t.Issued {
			if !l.issued.CompareAndSwap(t.Issued, next.Fence) {
				continue // another resource took a fence: decide again
			}
			if err := l.raiseMark(ctx, next.Fence, &b); err != nil {
				return err
			}
		}
		if next.empty() {
			b.Delete = []string{resource}
		} else {
			b.Put = []Entry{next}
		}
		if l.persist != nil {
			if err := l.persist.Write(ctx, b, t.sync); err != nil {
				return errors.Join(ErrUnavailable, err)
			}
		}
		l.count(cur, next)
		if next.empty() {
			delete(st.m, resource)
		} else {
			st.m[resource] = next
		}
		return nil
	}
}

// raiseMark makes sure the stored fence mark covers fence f before a write
// holding f is made: in b itself without a reserve, or else by a synced
// write of its own when f comes within half the reserve of the mark.
func (l *Local) raiseMark(ctx context.Context, f uint64, b *Batch) error {
	if l.reserve == 0 {
		b.Mark = f
		return nil
	}
	l.markMu.Lock()
	defer l.markMu.Unlock()
	if f+l.reserve/2 <= l.mark.Load() {
		return nil
	}
	m := min(f+l.reserve-1, lease.MaxFence)
	if l.persist != nil {
		if err := l.persist.Write(ctx, Batch{Mark: m}, true); err != nil {
			return errors.Join(ErrUnavailable, err)
		}
	}
	l.mark.Store(m)
	return nil
}

// reclaim sweeps a full store, at most once per tenth of a TTL (and per
// second) of the clock, so that refused acquisitions cannot make it scan
// all the time. held is the stripe whose lock the caller holds. It reports
// whether it deleted anything.
func (l *Local) reclaim(ctx context.Context, held int, now float64) bool {
	last := l.reclaimT.Load()
	if now-math.Float64frombits(last) < min(l.ttl/10, 1000) || !l.reclaimT.CompareAndSwap(last, math.Float64bits(now)) {
		return false
	}
	n, _ := l.sweep(ctx, held)
	return n > 0
}

// Sweep deletes the lease records whose lease is over and the releases
// older than a TTL, stripe by stripe, each stripe's changes in one write
// (not synced), and returns how many it deleted. No answer changes: an
// expired record and no record are answered alike.
func (l *Local) Sweep(ctx context.Context) (int, error) { return l.sweep(ctx, -1) }

func (l *Local) sweep(ctx context.Context, held int) (int, error) {
	if err := l.Load(ctx); err != nil {
		return 0, err
	}
	if !l.sweepMu.TryLock() {
		return 0, nil // one sweep at a time
	}
	defer l.sweepMu.Unlock()
	now, err := l.clk.Now()
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range l.stripes {
		st := &l.stripes[i]
		if i != held {
			st.mu.Lock()
		}
		var b Batch
		for _, e := range st.m {
			next := e
			if next.Fence != 0 && now.Millis >= next.ExpiresAt {
				next = Entry{Resource: e.Resource, Released: e.Released}
			}
			next.Released = recent(next.Released, now.Millis, l.ttl, MaxReleases)
			if d := int(min(e.Fence, 1)-min(next.Fence, 1)) + len(e.Released) - len(next.Released); d > 0 {
				n += d
				if next.empty() {
					b.Delete = append(b.Delete, e.Resource)
				} else {
					b.Put = append(b.Put, next)
				}
			}
		}
		if len(b.Put)+len(b.Delete) > 0 && l.persist != nil {
			err = l.persist.Write(ctx, b, false)
		}
		if err == nil {
			for _, e := range b.Put {
				l.count(st.m[e.Resource], e)
				st.m[e.Resource] = e
			}
			for _, name := range b.Delete {
				l.count(st.m[name], Entry{})
				delete(st.m, name)
			}
		}
		if i != held {
			st.mu.Unlock()
		}
		if err != nil {
			return n, errors.Join(ErrUnavailable, err)
		}
	}
	return n, nil
}

// recent returns a new slice of the releases of rels made at most ttl
// before now, at most keep of them (the newest).
func recent(rels []Release, now, ttl float64, keep int) []Release {
	var out []Release
	for _, r := range rels {
		if now-r.At <= ttl {
			out = append(out, r)
		}
	}
	if len(out) > keep {
		out = out[len(out)-keep:]
	}
	return out
}

// Leases returns how many lease records the store holds: live leases,
// and expired ones not yet swept.
func (l *Local) Leases() int { return int(l.leases.Load()) }

// Entry returns resource's entry as the store holds it in memory.
func (l *Local) Entry(resource string) (Entry, bool) {
	st := &l.stripes[l.stripeOf(resource)]
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.m[resource]
	return e, ok
}

// Issued returns the highest fence issued so far.
func (l *Local) Issued() uint64 { return l.issued.Load() }
