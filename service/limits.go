package service

import (
	"cmp"
	"errors"
	"sync"
)

// Defaults of Limits.
const (
	DefaultMaxLeases     = 100_000
	DefaultReleaseMemory = 100_000
	DefaultFenceMemory   = 100_000
)

// Limits bound what a store keeps: one value configures every store
// (LocalConfig.Limits, pgstore.Options.Limits), which reports its Counts
// in each Txn for the Service to decide from. A zero field means its
// default.
type Limits struct {
	// MaxLeases bounds the lease records (live, and expired ones not yet
	// swept); an acquisition that would add one more is refused with
	// too_many_leases. A live lease is never evicted.
	MaxLeases int
	// ReleaseMemory bounds the finished releases remembered for their
	// retries.
	ReleaseMemory int
	// FenceMemory bounds how many resources without a lease record keep
	// their last fence (Entry.LastFence). Past nine tenths of it, each
	// sweep forgets the lowest; at the bound, a lease that ends leaves
	// none. A forgotten resource is answered lastFence 0.
	FenceMemory int
}

// WithDefaults returns l with each zero field at its default, or an error
// if a field is negative.
func (l Limits) WithDefaults() (Limits, error) {
	if l.MaxLeases < 0 || l.ReleaseMemory < 0 || l.FenceMemory < 0 {
		return l, errors.New("service: Limits must not be negative")
	}
	return Limits{MaxLeases: cmp.Or(l.MaxLeases, DefaultMaxLeases), ReleaseMemory: cmp.Or(l.ReleaseMemory, DefaultReleaseMemory),
		FenceMemory: cmp.Or(l.FenceMemory, DefaultFenceMemory)}, nil
}

// Counts is what a store holds, as its Limits count it.
type Counts struct {
	Leases   int64 // lease records, live and expired
	Releases int64 // finished releases remembered
	Lasts    int64 // entries without a lease record that keep a LastFence
}

// Change is how the counts move when the entry before becomes after.
func Change(before, after Entry) Counts {
	return Counts{Leases: int64(min(after.Fence, 1)) - int64(min(before.Fence, 1)), Releases: int64(len(after.Released) - len(before.Released)),
		Lasts: int64(min(after.LastFence, 1)) - int64(min(before.LastFence, 1))}
}

// Replaces reports that a grant to owner over e replaces owner's own
// lease record (e has one, and it is owner's: expired, or released by the
// same decision). The owner's count does not change, so that record never
// counts against the owner's limit: pgstore's OwnerCounter answers 0 for
// it; a Local's Ledger replaces the place of the resource (Ledger.Reserve).
func (e Entry) Replaces(owner string) bool { return e.Fence != 0 && e.Owner == owner }

// Full reports that a store at c holds its maximum of lease records.
func (l Limits) Full(c Counts) bool { return c.Leases >= int64(l.MaxLeases) }

// KeepRelease reports that a store at c has room for one more release.
func (l Limits) KeepRelease(c Counts) bool { return c.Releases < int64(l.ReleaseMemory) }

// KeepLast reports that a store at c has room for one more last fence.
func (l Limits) KeepLast(c Counts) bool { return c.Lasts < int64(l.FenceMemory) }

// LastsToForget is how many last fences a sweep of a store at c forgets
// (the lowest): those above nine tenths of FenceMemory.
func (l Limits) LastsToForget(c Counts) int64 { return max(c.Lasts-int64(l.FenceMemory)*9/10, 0) }

// Swept is e as a sweep at now leaves it, for a store with room for one
// more last fence if keepLast: an expired lease record cleared (its fence
// kept as LastFence if keepLast), releases and a revocation older than ttl
// forgotten (and releases beyond MaxReleases, the oldest). deleted is how
// many things it removed; zero means e is left as it is.
func (e Entry) Swept(now, ttl float64, keepLast bool) (next Entry, deleted int) {
	next = e
	if next.Fence != 0 && now >= next.ExpiresAt {
		next = e.cleared(keepLast)
	}
	next.Released = recent(next.Released, now, ttl, MaxReleases)
	next.Revoked = next.revokedNow(now, ttl)
	deleted = int(min(e.Fence, 1)-min(next.Fence, 1)) + len(e.Released) - len(next.Released) + int(min(e.Revoked.Fence, 1)-min(next.Revoked.Fence, 1))
	return next, deleted
}

// recent returns a new slice of the releases of rels made at most ttl
// before now, at most keep of them (the newest), with room for one more
// (a release appends its own): one allocation, or none when there are
// none.
func recent(rels []Release, now, ttl float64, keep int) []Release {
	if len(rels) == 0 {
		return nil
	}
	out := make([]Release, 0, len(rels)+1)
	for _, r := range rels {
		if now-r.At <= ttl {
			out = append(out, r)
		}
	}
	switch {
	case len(out) == 0:
		return nil
	case len(out) > keep:
		out = out[len(out)-keep:]
	}
	return out
}

// Reclaims paces the sweeps a store makes to reclaim room: because it is
// full (key "") or an owner is at its limit (key: the owner; pgstore, whose
// count of an owner includes its expired records). At most one
// per key per tenth of a TTL (and per second) of the store's clock, so
// refused acquisitions cannot make a store sweep all the time. The zero
// value is ready.
type Reclaims struct {
	mu   sync.Mutex
	last map[string]float64
}

// Take reports whether a sweep for key may be made at now (store
// milliseconds) with leases of ttl milliseconds, and if so records it.
func (r *Reclaims) Take(key string, now, ttl float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.last[key]; ok && now-last < min(ttl/10, 1000) {
		return false
	}
	if r.last == nil {
		r.last = map[string]float64{}
	}
	r.last[key] = now
	return true
}
