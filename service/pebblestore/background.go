//go:build !js && !wasip1

package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// background follows Pebble's background writes (flushes of the memtable
// to tables, compactions). Pebble tries a failed one again at once, and
// again, without pause: the listener it calls (failed) pauses the retry,
// doubling from backoffMin to backoffMax, and the store refuses changes
// (Writable, so /readyz says why) until one works again (done). The log
// gets one line when the failures start, at most one a minute while they
// last (with how many there were), and one when they end.
type background struct {
	log   *slog.Logger
	now   func() time.Time
	sleep func(time.Duration)

	mu       sync.Mutex
	failing  error // the last failure, while they last
	failures int   // since the last line logged
	pause    time.Duration
	loggedAt time.Time
}

const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
	logEvery   = time.Minute
)

// failed is Pebble's BackgroundError: it logs (limited), marks the store
// unwritable and pauses the caller, Pebble's flush or compaction, before
// Pebble tries again.
func (b *background) failed(err error) {
	b.mu.Lock()
	now := b.now()
	b.failures++
	switch {
	case b.failing == nil:
		b.log.Error("the state's background writes fail (flushing or compacting tables): changes are refused with 503 unavailable, and Pebble retries with a growing pause, until they work again",
			"cause", firstLine(err))
		b.failures, b.loggedAt, b.pause = 0, now, backoffMin
	case now.Sub(b.loggedAt) >= logEvery:
		b.log.Error("the state's background writes still fail", "failures", b.failures, "since", now.Sub(b.loggedAt).Round(time.Second).String(), "cause", firstLine(err))
		b.failures, b.loggedAt = 0, now
	}
	b.failing = err
	pause := b.pause
	b.pause = min(2*b.pause, backoffMax)
	b.mu.Unlock()
	b.sleep(pause)
}

// done is called when a flush or a compaction ended: one that worked ends
// the failures.
func (b *background) done(err error) {
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failing != nil {
		b.failing = nil
		b.log.Info("the state's background writes work again: the state is writable")
	}
}

// err is why changes are refused, or nil.
func (b *background) err(dir string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failing == nil {
		return nil
	}
	cause := firstLine(b.failing)
	if errors.Is(b.failing, syscall.ENOSPC) {
		return fmt.Errorf("%w: the disk of %s is full (%s); changes are refused until there is room", ErrDiskFull, dir, cause)
	}
	return fmt.Errorf("pebblestore: the state %s cannot be written in the background (%s); changes are refused until it can", dir, cause)
}

// listen adds the background's callbacks to l.
func (b *background) listen(l *pebble.EventListener) {
	l.BackgroundError = b.failed
	l.FlushEnd = func(info pebble.FlushInfo) { b.done(info.Err) }
	l.CompactionEnd = func(info pebble.CompactionInfo) { b.done(info.Err) }
}
