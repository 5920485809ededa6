// The sweep of a Local: expired lease records and old releases deleted,
// last fences forgotten past FenceMemory, and a full store reclaimed.

package service

import (
	"cmp"
	"context"
	"maps"
	"slices"
)

// reclaim sweeps a full store (held is the stripe the caller has locked),
// at most once per tenth of a TTL and per second, and reports whether it
// deleted anything.
func (l *Local) reclaim(ctx context.Context, held int, now float64) bool {
	if !l.reclaims.Take("", now, l.ttl) {
		return false
	}
	n, _ := l.sweep(ctx, held)
	return n > 0
}

// Sweep deletes the lease records whose lease is over (keeping their fence
// as the entry's LastFence while FenceMemory allows) and the releases
// older than a TTL, stripe by stripe, each stripe's changes in one write
// (not synced), and returns how many it deleted. No answer changes: an
// expired record and no record are answered alike. Then, if the last
// fences kept pass nine tenths of FenceMemory, it forgets the lowest ones
// down to that.
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
	err = l.eachStripe(held, func(st *stripe) error {
		var b Batch
		var ranOut []Entry
		for _, e := range st.m {
			if next, d := e.Swept(now.Millis, l.ttl, l.limits.KeepLast(l.counts())); d > 0 {
				if next.Fence == 0 && e.Fence != 0 {
					ranOut = append(ranOut, e)
				}
				n += d
				b.add(next)
			}
		}
		var err error
		if len(b.Put)+len(b.Delete) > 0 {
			if err = l.write(ctx, st, b, false); err == nil {
				l.expired.Add(uint64(len(ranOut)))
				for _, e := range ranOut {
					if e.Owner != "" {
						l.ledger.Ended(ctx, e)
					}
					if l.onExpired != nil {
						l.onExpired(e)
					}
				}
			}
		}
		// A Go map never shrinks: once it holds a quarter of its peak,
		// copy it into one of its size.
		if st.peak = max(st.peak, len(st.m)+len(b.Delete)); len(st.m) < st.peak/4 {
			m := make(map[string]Entry, len(st.m))
			maps.Copy(m, st.m)
			st.m, st.peak = m, len(m)
		}
		return err
	})
	if err != nil {
		return n, err
	}
	if k := l.limits.LastsToForget(l.counts()); k > 0 {
		forgot, err := l.forgetLasts(ctx, held, int(k))
		n += forgot
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// forgetLasts deletes the k entries (at most) that hold nothing but the
// lowest last fences, stripe by stripe (one unsynced write each), and
// returns how many it deleted. held is the stripe whose lock the caller
// holds.
func (l *Local) forgetLasts(ctx context.Context, held, k int) (int, error) {
	type last struct {
		fence uint64
		name  string
	}
	var all []last
	_ = l.eachStripe(held, func(st *stripe) error {
		for name, e := range st.m {
			if e.Fence == 0 && e.LastFence != 0 && len(e.Released) == 0 {
				all = append(all, last{e.LastFence, name})
			}
		}
		return nil
	})
	if len(all) == 0 {
		return 0, nil
	}
	k = min(k, len(all))
	slices.SortFunc(all, func(a, b last) int { return cmp.Compare(a.fence, b.fence) })
	cut := all[k-1].fence // forget those at or below it
	n := 0
	err := l.eachStripe(held, func(st *stripe) error {
		var b Batch
		for name, e := range st.m {
			// Checked again under the lock: the entry may have changed.
			if e.Fence == 0 && e.LastFence != 0 && e.LastFence <= cut && len(e.Released) == 0 {
				b.Delete = append(b.Delete, name)
			}
		}
		if len(b.Delete) == 0 {
			return nil
		}
		err := l.write(ctx, st, b, false)
		if err == nil {
			n += len(b.Delete)
		}
		return err
	})
	return n, err
}

// eachStripe calls f with each stripe in turn under its lock (held: the
// stripe whose lock the caller holds already), and stops at f's error.
func (l *Local) eachStripe(held int, f func(st *stripe) error) error {
	for i := range l.stripes {
		st := &l.stripes[i]
		if i != held {
			st.mu.Lock()
		}
		err := f(st)
		if i != held {
			st.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
	return nil
}
