//go:build !js && !wasip1

package pgstore

import (
	"math"
	"time"

	"github.com/lease-fence/lease-fence/service"
)

// SetClockOffset steps the clock the store reads: ms is added to every
// reading of the database server's clock from now on, as if that clock had
// been stepped by ms.
func SetClockOffset(s *Store, ms float64) { s.clockOffset.Store(math.Float64bits(ms)) }

// SetWatchPolls sets how often s reports every watched resource while it
// cannot listen, and regardless, and how long its LISTEN connection may be
// silent before it is pinged; call it before s's first Watch.
func SetWatchPolls(s *Store, poll, safety, heartbeat time.Duration) {
	s.watch.poll, s.watch.safety, s.watch.beat = poll, safety, heartbeat
}

// BlockListen makes s's listener fail to connect while block is true.
func BlockListen(s *Store, block bool) { s.watch.blocked.Store(block) }

// Listening returns a channel closed once s's LISTEN connection first
// listens.
func Listening(s *Store) <-chan struct{} {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	if s.watch.listenPC == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.watch.listenPC
}

// Notified returns how many changes s has queued a notification of.
func Notified(s *Store) int64 { return s.watch.notified.Load() }

// Paths returns how many of s's decisions were made in one round trip, in
// two (the row read first), and by the transaction that locks the row.
func Paths(s *Store) (one, two, locked int64) {
	return s.paths[0].Load(), s.paths[1].Load(), s.paths[2].Load()
}

// Batched returns how many of s's decisions were made with others of a
// batch, by lease_fence_decide_each.
func Batched(s *Store) int64 { return s.paths[3].Load() }

// ExpandDecide replaces the tokens of decide.sql in q (a statement of that
// file's format, such as testdata's older versions of it).
func ExpandDecide(q string) string { return expandDecide(q) }

// QDecide is the statement that calls lease_fence_decide.
var QDecide = qDecide

// KnownCounts returns the counts s's next one-round-trip decision starts
// from (an earlier answer's), and whether it has read any.
func KnownCounts(s *Store) (c service.Counts, counted bool) {
	s.known.mu.Lock()
	defer s.known.mu.Unlock()
	return service.Counts{Leases: s.known.leases, Releases: s.known.releases, Lasts: s.known.lasts}, s.known.counted
}
