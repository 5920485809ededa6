package service

import (
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Persister keeps a Local's entries on storage that outlives the process:
// the embedded database (package pebblestore) or a Durable Object's.
type Persister interface {
	// Load returns everything stored; it is called once, before any Write.
	Load(ctx context.Context) (Stored, error)
	// Write applies b, all of it or nothing. With sync, b and every earlier
	// write are durable when it returns; without, b is durable no later
	// than the next synced write.
	Write(ctx context.Context, b Batch, sync bool) error
}

// MarkSaver is implemented by a Persister whose write-ahead log can lose
// its tail (a torn, cut, damaged, emptied or deleted last log) while the
// writes before it survive: Pebble's. Local raises the stored fence mark
// through SaveMark instead of Write, and issues no fence above a mark before
// SaveMark has returned.
type MarkSaver interface {
	// SaveMark stores mark (the fence mark only ever rises) durably and
	// somewhere that losing or damaging the log's tail cannot undo (Pebble:
	// a table and the manifest), before it returns. So a fence issued
	// under the mark is never issued again after a restart, whatever
	// happens to the log that holds its grant.
	SaveMark(ctx context.Context, mark uint64) error
}

// Stored is what a Persister holds: the fence mark (no fence the store
// ever issued is above it) and the entries.
type Stored struct {
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

// LocalConfig configures a Local.
type LocalConfig struct {
	// Clock is the coordinator's clock. Required. With a Persister, use a
	// clock whose readings mean the same after a restart (WallClock).
	Clock clock.Clock
	// TTL is the lease length. Required, positive.
	TTL time.Duration
	// Persist keeps the entries durable; nil keeps them in memory only.
	Persist Persister
	// Limits bound what the store keeps; zero fields mean their defaults.
	Limits Limits
	// MinFence makes every fence issued at least MinFence (after a restore
	// from a backup, which is older than the fences already issued).
	MinFence uint64
	// Ledger keeps the places of owners' lease records, for their
	// limits; nil keeps them in memory (rebuilt by Load). Set it for
	// stores that each hold a part of the records, such as a Worker's
	// Durable Objects, one per resource.
	Ledger Ledger
	// FenceReserve keeps the stored fence mark ahead of the fences issued.
	// Load raises it to FenceReserve above the stored mark (or above
	// MinFence - 1, if higher) before the first fence of the run, and
	// once a fence comes within FenceReserve/2 of the mark it is raised
	// to that fence + FenceReserve - 1; a restart resumes above the
	// stored mark. Each raise is a write of its own, made durable before
	// any fence above the previous mark is issued: through
	// MarkSaver.SaveMark if the Persister has it (so it outlives a damaged
	// log tail), else as a synced Write. So a log that loses its last
	// writes (a torn, cut or damaged tail, or a lost last log) may lose
	// grants but never lowers the fences (docs/service.md, "Fences").
	// Zero writes the mark in each grant's own write instead: right for
	// storage that never loses an acknowledged write (a Durable Object's).
	FenceReserve uint64
}

// Local is the Store whose entries this process owns: each is decided on in
// memory, made durable by the Persister, and only then replaced. Calls on
// one resource run one at a time, calls on different resources in parallel
// (sharing the Persister's syncs); fences come from one counter.
type Local struct {
	clk      clock.Clock
	ttl      float64 // milliseconds
	persist  Persister
	limits   Limits
	minFence uint64
	reserve  uint64
	ledger   Ledger

	issued           atomic.Uint64 // the highest fence issued
	mark             atomic.Uint64 // the stored fence mark
	markMu           sync.Mutex
	leases, releases atomic.Int64
	lasts            atomic.Int64 // entries without a lease record that keep a LastFence

	seed    maphash.Seed
	stripes [stripeCount]stripe

	loadMu  sync.Mutex
	loaded  atomic.Bool
	loadErr error

	sweepMu  sync.Mutex
	reclaims Reclaims
	expired  atomic.Uint64 // lease records that ran out: replaced or swept once expired

	// live is the resources that have a lease record, in byte order, for
	// List: kept as records come and go (write), not per renewal.
	idxMu sync.Mutex
	live  *btree.BTreeG[string]

	// onExpired is told of each record a sweep cleared as expired
	// (ReportExpired).
	onExpired func(Entry)
}

// ReportExpired makes the sweep call fn with each lease record it clears
// because it expired, once that is stored (under the resource's lock).
// Call it before the Local is used.
func (l *Local) ReportExpired(fn func(expired Entry)) { l.onExpired = fn }

// stripeCount is how many locks serialize calls per resource.
const stripeCount = 256

type stripe struct {
	mu   sync.Mutex
	m    map[string]Entry
	peak int // the most entries m held since it was made
	// check is Txn.Owners for the decision running under mu.
	check ownerCheck
	// deciding is the hash of the resource whose decision runs under mu
	// (decidingMark), 0 when none: the memory Ledger keeps a lapsed place
	// while its resource's decision, which may renew it, runs.
	deciding atomic.Uint64
}

// decidingMark is the stripe's deciding value for a resource of hash h.
func decidingMark(h uint64) uint64 { return h | 1 }

// settled reports that no decision on resource is running: one that
// starts now reads the clock after a caller's reading.
func (l *Local) settled(resource string) bool {
	h := maphash.String(l.seed, resource)
	return l.stripes[h%stripeCount].deciding.Load() != decidingMark(h)
}

// ownerCheck is the OwnerCounter of one decision: it remembers the limits
// the decision asked about, so that the Ledger can hold the decision's
// record to them (Reserve, before the write).
type ownerCheck struct {
	ledger   Ledger
	resource string
	now      float64 // the decision's reading
	asked    []ownerLimit
	// refused are the owners whose Ledger refused a place during this
	// Update: their limit is reached.
	refused []string
}

type ownerLimit struct {
	owner string
	limit int
}

// Owned is what the Ledger holds for owner (Ledger.Held), or limit once it
// refused owner a place during this Update: the place is taken before the
// write (place), and a refused one has the decision made again.
func (c *ownerCheck) Owned(owner string, limit int) int {
	c.asked = append(c.asked, ownerLimit{owner, limit})
	if slices.Contains(c.refused, owner) {
		return limit
	}
	return c.ledger.Held(owner, c.resource, limit, c.now)
}

// limitOf returns the limit the decision asked about for owner, or 0.
func (c *ownerCheck) limitOf(owner string) int {
	for _, a := range c.asked {
		if a.owner == owner {
			return a.limit
		}
	}
	return 0
}

var _ Store = (*Local)(nil)

// NewLocal returns a Local; its Persister is read by Load or the first call.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Clock == nil || cfg.Clock.Domain() == "" {
		return nil, errors.New("service: LocalConfig.Clock is required and needs a domain")
	}
	if cfg.TTL <= 0 {
		return nil, errors.New("service: LocalConfig.TTL must be positive, got " + cfg.TTL.String())
	}
	limits, err := cfg.Limits.WithDefaults()
	if err != nil || cfg.MinFence > lease.MaxFence {
		return nil, errors.New("service: LocalConfig.Limits must not be negative, and MinFence at most lease.MaxFence")
	}
	l := &Local{clk: cfg.Clock, ttl: clock.Millis(cfg.TTL), persist: cfg.Persist, minFence: cfg.MinFence,
		reserve: cfg.FenceReserve, ledger: cfg.Ledger, limits: limits, seed: maphash.MakeSeed(),
		live: btree.NewG(32, func(a, b string) bool { return a < b })}
	if l.ledger == nil {
		l.ledger = newMemLedger(l.settled)
	}
	for i := range l.stripes {
		l.stripes[i].m = map[string]Entry{}
		l.stripes[i].check.ledger = l.ledger
	}
	return l, nil
}

// Load reads the Persister once and checks everything (CheckEntry; no
// instant more than a TTL after the clock's reading). Inconsistent state is
// refused for good; a Persister that could not be read is read again next
// time.
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
	if st.Mark > lease.MaxFence {
		return inconsistent("the stored fence mark " + strconv.FormatUint(st.Mark, 10) + " is above the highest fence, " +
			strconv.FormatUint(lease.MaxFence, 10) + " (2^53-1): no fence could be issued (a damaged or edited state)")
	}
	seen := make(map[string]struct{}, len(st.Entries))
	for _, e := range st.Entries {
		if err := CheckEntry(e, st.Mark); err != nil {
			return err
		}
		if err := checkTimes(e, now.Millis, l.ttl); err != nil {
			return err
		}
		if _, dup := seen[e.Resource]; dup {
			return inconsistent("resource " + quote(e.Resource) + " has two entries")
		}
		seen[e.Resource] = struct{}{}
	}
	// The first fence of the run comes straight after the stored mark, so
	// the mark that covers it is raised, durably, before anything is
	// issued (FenceReserve).
	base, mark := max(st.Mark, l.minFence-min(l.minFence, 1)), st.Mark
	if l.reserve > 0 && l.persist != nil {
		mark = min(base+min(l.reserve, lease.MaxFence), lease.MaxFence)
		if err := l.saveMark(ctx, mark); err != nil {
			return errors.Join(ErrUnavailable, err)
		}
	}
	// Each record's place, without a limit: the record is held already.
	for _, e := range st.Entries {
		if e.Fence != 0 && e.Owner != "" {
			if _, err := l.ledger.Reserve(ctx, e.Owner, 0, e, now.Millis); err != nil {
				return errors.Join(ErrUnavailable, err)
			}
		}
	}
	for _, e := range st.Entries {
		l.stripes[l.stripeOf(e.Resource)].m[e.Resource] = e
		l.count(Entry{}, e)
		if e.Fence != 0 {
			l.live.ReplaceOrInsert(e.Resource)
		}
	}
	l.mark.Store(mark)
	l.issued.Store(base)
	return nil
}

// saveMark stores the fence mark m durably: through the Persister's
// SaveMark if it has one, else in a synced write of its own.
func (l *Local) saveMark(ctx context.Context, m uint64) error {
	if ms, ok := l.persist.(MarkSaver); ok {
		return ms.SaveMark(ctx, m)
	}
	return l.persist.Write(ctx, Batch{Mark: m}, true)
}

func (l *Local) stripeOf(resource string) int {
	return int(maphash.String(l.seed, resource) % stripeCount)
}

// counts is what the store holds now.
func (l *Local) counts() Counts {
	return Counts{Leases: l.leases.Load(), Releases: l.releases.Load(), Lasts: l.lasts.Load()}
}

// count moves the counts of lease records, releases and last fences from
// before to after.
func (l *Local) count(before, after Entry) {
	d := Change(before, after)
	l.leases.Add(d.Leases)
	l.releases.Add(d.Releases)
	l.lasts.Add(d.Lasts)
}

// Update runs fn on resource's entry in memory under the resource's lock,
// takes the place of a new record of an owner in the Ledger (running fn
// again if it is refused), claims a new fence fn issued from the counter
// (running fn again if another resource took it meanwhile), raises the
// stored fence mark if needed, writes the change, and only then replaces
// the entry in memory and gives the place of a record it ended back.
func (l *Local) Update(ctx context.Context, resource string, fn func(*Txn) error) error {
	if err := l.Load(ctx); err != nil {
		return err
	}
	h := maphash.String(l.seed, resource)
	i := int(h % stripeCount)
	st := &l.stripes[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	st.deciding.Store(decidingMark(h))
	defer st.deciding.Store(0)
	st.check.refused = st.check.refused[:0]
	for {
		cur, ok := st.m[resource]
		if !ok {
			cur = Entry{Resource: resource}
		}
		now, err := l.clk.Now()
		if err != nil {
			return errors.New("service: coordinator clock: " + err.Error())
		}
		if cur.Fence == 0 && l.limits.Full(l.counts()) && l.reclaim(ctx, i, now.Millis) {
			continue
		}
		t := Txn{Now: now, Issued: l.issued.Load(), Entry: cur, Counts: l.counts(), Limits: l.limits, Owners: &st.check}
		st.check.resource, st.check.now, st.check.asked = resource, now.Millis, st.check.asked[:0]
		if err := fn(&t); err != nil || !t.write {
			return err
		}
		next := t.next
		placed, refused, err := l.place(ctx, &st.check, cur, next, now.Millis)
		if err != nil {
			return err
		}
		if refused {
			continue // decide again: Txn.Owners reports the owner full
		}
		var b Batch
		if next.Fence > t.Issued {
			if !l.issued.CompareAndSwap(t.Issued, next.Fence) {
				l.unplace(ctx, placed, cur, next)
				continue // another resource took a fence: decide again
			}
			if err := l.raiseMark(ctx, next.Fence, &b); err != nil {
				l.unplace(ctx, placed, cur, next)
				return err
			}
		}
		b.add(next)
		if err := l.write(ctx, st, b, t.sync); err != nil {
			l.unplace(ctx, placed, cur, next)
			return err
		}
		t.Committed()
		if cur.Fence != 0 && next.Fence != cur.Fence {
			if now.Millis >= cur.ExpiresAt {
				l.expired.Add(1) // a record replaced or cleared once it ran out
			}
			if cur.Owner != "" {
				l.ledger.Ended(ctx, cur)
			}
		}
		return nil
	}
}

// place tells the Ledger of the record next makes (Reserve) or renews
// (Renewed) over cur, before it is written, at the decision's reading now.
// placed is true when it took a new place (next is a new record of an
// owner); refused when the Ledger refused one: the owner is then in
// check.refused.
func (l *Local) place(ctx context.Context, check *ownerCheck, cur, next Entry, now float64) (placed, refused bool, err error) {
	switch {
	case next.Fence == 0 || next.Owner == "":
	case next.Fence != cur.Fence:
		ok, err := l.ledger.Reserve(ctx, next.Owner, check.limitOf(next.Owner), next, now)
		if err != nil {
			return false, false, errors.Join(ErrUnavailable, err)
		}
		if !ok {
			check.refused = append(check.refused, next.Owner)
		}
		return ok, !ok, nil
	case next.ExpiresAt != cur.ExpiresAt:
		if err := l.ledger.Renewed(ctx, next); err != nil {
			return false, false, errors.Join(ErrUnavailable, err)
		}
	}
	return false, false, nil
}

// unplace gives back the place taken for next, which was not written: cur's
// again if next replaced it (both the owner's), else none.
func (l *Local) unplace(ctx context.Context, placed bool, cur, next Entry) {
	switch {
	case !placed:
	case cur.Fence != 0 && cur.Owner == next.Owner:
		_ = l.ledger.Renewed(ctx, cur)
	default:
		l.ledger.Ended(ctx, next)
	}
}

// add puts e in b, or its deletion if it holds nothing.
func (b *Batch) add(e Entry) {
	if e.empty() {
		b.Delete = append(b.Delete, e.Resource)
	} else {
		b.Put = append(b.Put, e)
	}
}

// write stores b through the Persister, then in the stripe's memory.
func (l *Local) write(ctx context.Context, st *stripe, b Batch, sync bool) error {
	if l.persist != nil {
		if err := l.persist.Write(ctx, b, sync); err != nil {
			return errors.Join(ErrUnavailable, err)
		}
	}
	for _, e := range b.Put {
		old := st.m[e.Resource]
		l.count(old, e)
		l.index(e.Resource, old.Fence != 0, e.Fence != 0)
		st.m[e.Resource] = e
	}
	for _, name := range b.Delete {
		old := st.m[name]
		l.count(old, Entry{})
		l.index(name, old.Fence != 0, false)
		delete(st.m, name)
	}
	return nil
}

// index keeps resource in the index of lease records if it has one.
func (l *Local) index(resource string, had, has bool) {
	if had == has {
		return
	}
	l.idxMu.Lock()
	defer l.idxMu.Unlock()
	if has {
		l.live.ReplaceOrInsert(resource)
	} else {
		l.live.Delete(resource)
	}
}

// List returns the live lease records under prefix whose resources come
// after after ("" from the first), in byte order: at most limit of them,
// read from the index of lease records in O(limit log n). next is the
// resource to continue after, "" if none follows; a page may hold fewer
// than limit with a next (records that expired and are not yet swept are
// skipped, not counted).
func (l *Local) List(ctx context.Context, prefix, after string, limit int) (live []Entry, now float64, next string, err error) {
	if err := l.Load(ctx); err != nil {
		return nil, 0, "", err
	}
	at, err := l.clk.Now()
	if err != nil {
		return nil, 0, "", errors.New("service: coordinator clock: " + err.Error())
	}
	names := make([]string, 0, limit+1)
	l.idxMu.Lock()
	l.live.AscendGreaterOrEqual(max(prefix, after), func(r string) bool {
		if !strings.HasPrefix(r, prefix) {
			return false
		}
		if r != after || after == "" {
			names = append(names, r)
		}
		return len(names) <= limit
	})
	l.idxMu.Unlock()
	if len(names) > limit {
		names, next = names[:limit], names[limit-1]
	}
	for _, r := range names {
		if e, ok := l.Entry(r); ok && e.Fence != 0 && at.Millis < e.ExpiresAt {
			live = append(live, e)
		}
	}
	return live, at.Millis, next, nil
}

// raiseMark makes sure the stored fence mark covers fence f before a write
// holding f is made: in b itself without a reserve, or else by a durable
// write of its own (saveMark) when f comes within half the reserve of the
// mark.
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
		if err := l.saveMark(ctx, m); err != nil {
			return errors.Join(ErrUnavailable, err)
		}
	}
	l.mark.Store(m)
	return nil
}

// Watch never calls fn: every change to a Local's entries is made through
// its own Update.
func (l *Local) Watch(string, func()) (stop func()) { return func() {} }

// Leases returns how many lease records (live, or expired and not swept).
func (l *Local) Leases() int { return int(l.leases.Load()) }

// LastFences returns how many resources without a lease record the store
// remembers the last fence of.
func (l *Local) LastFences() int { return int(l.lasts.Load()) }

// Entry returns resource's entry as the store holds it in memory.
func (l *Local) Entry(resource string) (Entry, bool) {
	i := l.stripeOf(resource)
	st := &l.stripes[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.m[resource]
	return e, ok
}

// Issued returns the highest fence issued so far.
func (l *Local) Issued() uint64 { return l.issued.Load() }

// Ready reports why changes cannot be made now: the state could not be
// loaded, or the Persister says so (a Readier: pebblestore while its disk
// is full). Nil when they can.
func (l *Local) Ready(ctx context.Context) error {
	if err := l.Load(ctx); err != nil {
		return err
	}
	if r, ok := l.persist.(Readier); ok {
		return r.Ready(ctx)
	}
	return nil
}

var _ Readier = (*Local)(nil)

// Expired returns how many lease records ran out since the store was made:
// swept, or replaced by a new grant, once expired.
func (l *Local) Expired() uint64 { return l.expired.Load() }
