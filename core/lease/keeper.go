package lease

import (
	"errors"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
)

// Keeper keeps one lease alive for its holder, on the holder's side: it says
// when to begin the next renewal, how long a renewal may take (the time the
// lease has left: a renewal that would outlive the lease is pointless), and
// when the lease is lost, which is the holder's deadline and never later.
// Each renewal is a new request begun by Client.BeginRenewal, so each lease
// it is given is anchored at its own renewal's send instant.
//
// A Keeper does no I/O and reads no clock: every method that depends on
// time takes the reading it acts on, in the holder's clock domain.
// client.Held drives one over HTTP with timers; the simulator drives many
// over a simulated network. Once lost, a Keeper stays lost: a renewal that
// completes after the deadline does not revive it (the work already
// stopped; the lease should be released). A Keeper is not safe for
// concurrent use.
type Keeper struct {
	l     *Lease
	every float64 // milliseconds
	next  float64 // holder milliseconds: when to begin the next renewal
	lost  bool
}

// ErrLost is returned by Keeper.Renewed for a renewal that completed after
// the lease was lost.
var ErrLost = errors.New("lease: the lease was already lost")

// MinRetry is the shortest pause a Keeper puts between a failed renewal and
// the next attempt.
const MinRetry = 10 * time.Millisecond

// NewKeeper returns a Keeper of l that renews every every, counted from
// each renewal's send instant (its lease's anchor).
func NewKeeper(l *Lease, every time.Duration) (*Keeper, error) {
	if !l.usable() {
		return nil, errNoLease()
	}
	if every <= 0 {
		return nil, argErr("every", "must be positive, got "+every.String())
	}
	return &Keeper{l: l, every: clock.Millis(every), next: l.sent + clock.Millis(every)}, nil
}

// Lease returns the current lease: the last one a renewal completed into.
func (k *Keeper) Lease() *Lease { return k.l }

// Deadline is the current lease's deadline: the work must have stopped by
// then.
func (k *Keeper) Deadline() clock.Instant { return k.l.deadline }

// NextRenewal returns when to begin the next renewal: every after the
// current lease's anchor, or sooner after a failed attempt; never after the
// deadline.
func (k *Keeper) NextRenewal() clock.Instant {
	return clock.At(k.l.domain, min(k.next, k.l.deadline.Millis))
}

// Left returns how long the lease has left at now: the longest a renewal
// begun at now may take. It is zero or less once the lease is lost, which
// Check records.
func (k *Keeper) Left(now clock.Instant) (time.Duration, error) {
	left, err := k.l.deadline.Since(now)
	if err != nil {
		return 0, err
	}
	if k.lost {
		return 0, nil
	}
	return clock.FromMillis(left), nil
}

// Check reports whether the lease is lost at now: at or past its deadline,
// or lost before. It records the loss.
func (k *Keeper) Check(now clock.Instant) (bool, error) {
	if k.lost {
		return true, nil
	}
	left, err := k.l.deadline.Since(now)
	if err != nil {
		return false, err
	}
	if left <= 0 {
		k.lost = true
	}
	return k.lost, nil
}

// Renewed takes l, the lease a renewal completed into (Client.
// CompleteRenewal), as the current lease; the next renewal is due every
// after its anchor. It refuses a lease of another token and, with ErrLost, a
// renewal that completed after the lease was lost: the work has stopped
// and the lease, still live at the coordinator, should be released. A
// lease whose deadline is not later than the current one changes nothing.
func (k *Keeper) Renewed(l *Lease) error {
	if !l.usable() {
		return errNoLease()
	}
	if l.token != k.l.token || l.domain != k.l.domain {
		return argErr("lease", "is not a renewal of the kept lease "+k.l.token.String())
	}
	if k.lost {
		return ErrLost
	}
	if l.deadline.Millis <= k.l.deadline.Millis {
		return nil
	}
	k.l = l
	k.next = l.sent + k.every
	return nil
}

// Failed records that a renewal got no answer (a transport failure) at now:
// the next attempt is due after a quarter of the lesser of every and the
// time left, at least MinRetry, and never after the deadline.
func (k *Keeper) Failed(now clock.Instant) error {
	left, err := k.l.deadline.Since(now)
	if err != nil {
		return err
	}
	k.next = now.Millis + max(min(k.every, left)/4, clock.Millis(MinRetry))
	return nil
}

// Expire records that the coordinator answered the lease is over (a
// renewal refused as expired): it is lost.
func (k *Keeper) Expire() { k.lost = true }
