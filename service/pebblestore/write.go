//go:build !js && !wasip1

package pebblestore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lease-fence/lease-fence/service"
)

// writer orders a Store's writes. Writes without a sync wait in pending
// (the newest change of each key) until a synced write takes them into its
// batch, or until pendingDelay has passed. Synced writes made at the same
// time are committed together, one batch and one sync for a group (the
// group commit below). mu is held while the pending changes are taken and
// the batch holding them is handed to Pebble (which numbers it), so Pebble
// applies the writes in the order they were made.
type writer struct {
	mu       sync.Mutex
	pending  map[string]pendingEntry
	pendMark uint64
	// flushT writes the pending changes pendingDelay after the oldest of
	// them came (pendSince). It is left armed when a synced write takes
	// them (a stopped timer still wakes the scheduler at its time), and
	// armed again for the rest of the delay when it finds newer ones.
	flushT    *time.Timer
	armed     bool
	pendSince time.Time
	shut      bool // closed: nothing more is written

	// The group commit: the synced writes waiting for the next batch, and
	// whether one of them (the leader) is gathering or committing one.
	queue   []*syncWrite
	leading bool
	want    int           // the queue length at which the leader is woken
	kick    chan struct{} // wakes the leader
	timer   *time.Timer   // ends the leader's wait
	// How many writes the next group expects, how long it may wait for
	// them, and how long writers took to come back with their next write.
	expect           int
	bound            time.Duration
	minWait, maxWait time.Duration // gatherMin and gatherMax (tests change them)
	comeback         time.Duration
	answeredAt       time.Time
}

func (w *writer) isShut() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.shut
}

// pendingEntry is a key's newest change written without a sync.
type pendingEntry struct {
	e   service.Entry
	del bool
}

// syncWrite is a synced Write waiting for its group's commit.
type syncWrite struct {
	b    service.Batch
	done chan error // the outcome, or errLead: this writer commits the next group
}

var errLead = errors.New("pebblestore: lead the next group")

const (
	// pendingDelay is how long a change written without a sync waits for
	// a synced write to take it before it is written (and synced) on its
	// own; once pendingMax keys are pending, they are written at once.
	pendingDelay = 2 * time.Millisecond
	pendingMax   = 256
	// gatherMin and gatherMax bound how long a group waits for the
	// writes it expects.
	gatherMin = 250 * time.Microsecond
	gatherMax = 2 * time.Millisecond
)

// Write applies b, all of it or nothing (a service.Persister's Write).
// The caller orders the writes of each key: a write of a key does not
// start before the previous write of that key has returned (service.Local
// writes a resource's entry under its lock).
//
// With sync, b is committed with pebble.Sync, in one batch with the synced
// writes made at the same time and every change written before without a
// sync, and Write returns once it is durable. Writes that come together
// share a sync: the first to come (the leader) waits for as many writes as
// the last group answered plus those that came while it was being written,
// up to a bound that follows how long writers took to come back (1.5 times
// their running average, from gatherMin to gatherMax, doubled after a wait
// that was not met); a lone writer never waits.
//
// Without sync, b waits in memory for the next synced write, which makes
// it durable first, or for pendingDelay, after which it is written to
// Pebble's log without a sync. A later change of the same key replaces it
// there, so a release followed by the next grant of its resource costs one
// write. A crash before b reached Pebble's log loses b, as a crash before
// an unsynced write reached the disk would, and never a later synced
// change, which carries b with it.
func (s *Store) Write(_ context.Context, b service.Batch, sync bool) error {
	if err := s.Writable(); err != nil {
		return err
	}
	s.use.RLock()
	defer s.use.RUnlock()
	db, err := s.openRW()
	if err != nil {
		return err
	}
	w := &s.w
	w.mu.Lock()
	if w.shut {
		w.mu.Unlock()
		return errors.New("pebblestore: the store is closed")
	}
	if !sync {
		defer w.mu.Unlock()
		if w.pending == nil {
			w.pending = map[string]pendingEntry{}
		}
		was := len(w.pending)
		for _, e := range b.Put {
			w.pending[e.Resource] = pendingEntry{e: e}
		}
		for _, name := range b.Delete {
			w.pending[name] = pendingEntry{del: true}
		}
		w.pendMark = max(w.pendMark, b.Mark)
		if was == 0 {
			w.pendSince = time.Now()
		}
		switch {
		case len(w.pending) >= pendingMax:
			s.armFlush(0) // write them now, on the timer's goroutine
		case !w.armed:
			s.armFlush(pendingDelay)
		}
		return nil
	}
	sw := &syncWrite{b: b, done: make(chan error, 1)}
	w.queue = append(w.queue, sw)
	if !w.leading {
		w.leading = true
		w.mu.Unlock()
		s.lead(db)
	} else {
		if len(w.queue) >= w.want {
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
		w.mu.Unlock()
	}
	for {
		err := <-sw.done
		if err != errLead {
			return err
		}
		s.lead(db)
	}
}

// lead commits one group: it waits for the writes it expects, writes every
// queued write and the pending changes in one batch and waits for its sync;
// then it answers the group and hands the lead to the first writer that
// queued meanwhile.
func (s *Store) lead(db *pebble.DB) {
	w := &s.w
	w.mu.Lock()
	if w.kick == nil {
		w.kick = make(chan struct{}, 1)
		if w.maxWait == 0 {
			w.minWait, w.maxWait = gatherMin, gatherMax
		}
		w.expect, w.bound = 1, w.minWait
	}
	if len(w.queue) < w.expect && !w.shut {
		w.want = w.expect
		if w.timer == nil {
			w.timer = time.NewTimer(w.bound)
		} else {
			w.timer.Reset(w.bound)
		}
		met := true
	gather:
		for len(w.queue) < w.expect && !w.shut {
			w.mu.Unlock()
			select {
			case <-w.kick:
				w.mu.Lock()
			case <-w.timer.C:
				w.mu.Lock()
				met = false
				break gather
			}
		}
		w.timer.Stop()
		if met {
			w.comeback += (time.Since(w.answeredAt) - w.comeback) / 8
			w.bound = min(max(w.comeback*3/2, w.minWait), w.maxWait)
		} else {
			w.bound = min(2*w.bound, w.maxWait)
		}
	}
	group := w.queue
	w.queue, w.want = nil, 1<<30
	var all service.Batch
	for _, sw := range group {
		all.Mark = max(all.Mark, sw.b.Mark)
		all.Put = append(all.Put, sw.b.Put...)
		all.Delete = append(all.Delete, sw.b.Delete...)
	}
	batch := db.NewBatch()
	s.encode(batch, all)
	s.encodePending(batch, all)
	// Pebble numbers the batch and appends it to its log before this
	// returns; its sync is waited for below, without holding mu. A write
	// the disk refuses does not come back: Pebble cannot go on after a
	// failed commit, and stops the process (pebbleLogger.Fatalf).
	err := db.ApplyNoSyncWait(batch, pebble.Sync)
	if err == nil {
		s.clearPending()
	}
	w.mu.Unlock()
	if err == nil {
		err = s.syncWait(batch)
	} else {
		batch.Close()
	}
	w.mu.Lock()
	w.expect = max(1, len(group)+len(w.queue))
	var next *syncWrite
	if len(w.queue) > 0 {
		next = w.queue[0]
	} else {
		w.leading = false
	}
	w.answeredAt = time.Now()
	w.mu.Unlock()
	for _, sw := range group {
		sw.done <- err
	}
	if next != nil {
		next.done <- errLead
	}
}

// encode puts b's changes in batch.
func (s *Store) encode(batch *pebble.Batch, b service.Batch) {
	if b.Mark != 0 {
		_ = batch.Set(keyMark, strconv.AppendUint(nil, b.Mark, 10), nil)
	}
	key := make([]byte, 0, 64)
	var v []byte
	for i := range b.Put {
		e := &b.Put[i]
		key = append(append(key[:0], leasePrefix...), e.Resource...)
		v = service.AppendEntryBinary(v[:0], e)
		_ = batch.Set(key, v, nil)
	}
	for _, name := range b.Delete {
		key = append(append(key[:0], leasePrefix...), name...)
		_ = batch.Delete(key, nil)
	}
}

// encodePending puts the pending changes in batch, except those of the keys
// that over (in the same batch) replaces. w.mu is held.
func (s *Store) encodePending(batch *pebble.Batch, over service.Batch) {
	w := &s.w
	if len(w.pending) == 0 && w.pendMark == 0 {
		return
	}
	replaced := func(name string) bool {
		for _, e := range over.Put {
			if e.Resource == name {
				return true
			}
		}
		return slices.Contains(over.Delete, name)
	}
	var b service.Batch
	if w.pendMark > over.Mark {
		b.Mark = w.pendMark
	}
	for name, p := range w.pending {
		switch {
		case replaced(name):
		case p.del:
			b.Delete = append(b.Delete, name)
		default:
			b.Put = append(b.Put, p.e)
		}
	}
	s.encode(batch, b)
}

// clearPending forgets the pending changes once a batch holding them was
// handed to Pebble. w.mu is held.
func (s *Store) clearPending() {
	w := &s.w
	clear(w.pending)
	w.pendMark = 0
}

// armFlush arms the timer of the pending changes to fire in d. w.mu is
// held.
func (s *Store) armFlush(d time.Duration) {
	w := &s.w
	if w.flushT == nil {
		w.flushT = time.AfterFunc(d, s.flushPending)
	} else {
		w.flushT.Reset(d)
	}
	w.armed = true
}

// flushLocked writes the pending changes to Pebble's log, without waiting
// for the sync it asks for: the caller calls SyncWait and Close on the batch
// it returns (nil if there was nothing to write) once w.mu is released.
// w.mu is held.
func (s *Store) flushLocked(db *pebble.DB) (*pebble.Batch, error) {
	if len(s.w.pending) == 0 && s.w.pendMark == 0 {
		return nil, nil
	}
	batch := db.NewBatch()
	s.encodePending(batch, service.Batch{})
	if err := db.ApplyNoSyncWait(batch, pebble.Sync); err != nil {
		batch.Close()
		return nil, err
	}
	s.clearPending()
	return batch, nil
}

// syncWait waits for the sync of a batch handed to Pebble with
// ApplyNoSyncWait, then closes it. A sync the disk refuses stops the
// process, as Pebble stops it when a commit that waits for its sync fails.
func (s *Store) syncWait(batch *pebble.Batch) error {
	if batch == nil {
		return nil
	}
	err := batch.SyncWait()
	if err != nil {
		s.fatal.Fatalf("pebble: fatal commit error: %v", err)
	}
	batch.Close()
	return err
}

// flushPending is the timer of the pending changes: it writes them, synced,
// if no synced write took them first.
func (s *Store) flushPending() {
	s.use.RLock() // Close waits for it
	defer s.use.RUnlock()
	w := &s.w
	w.mu.Lock()
	db := s.db.Load()
	if db == nil || w.shut {
		w.mu.Unlock()
		return
	}
	w.armed = false
	if len(w.pending) == 0 && w.pendMark == 0 {
		w.mu.Unlock()
		return // a synced write took them
	}
	if age := time.Since(w.pendSince); age < pendingDelay && len(w.pending) < pendingMax {
		s.armFlush(pendingDelay - age) // newer ones than those it was armed for
		w.mu.Unlock()
		return
	}
	batch, err := s.flushLocked(db)
	if err != nil {
		s.opts.Logger.Error("pebblestore: writing the changes made without a sync", "err", err.Error())
		s.armFlush(pendingDelay)
	}
	w.mu.Unlock()
	_ = s.syncWait(batch)
}

// closeWrites refuses every write from now on and writes the pending
// changes (s.use is held: no write is under way).
func (s *Store) closeWrites(db *pebble.DB) error {
	w := &s.w
	w.mu.Lock()
	w.shut = true
	if w.flushT != nil {
		w.flushT.Stop()
		w.armed = false
	}
	batch, err := s.flushLocked(db)
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return s.syncWait(batch)
}
