package client

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// Status is what Inspect and Observe report of a resource.
type Status struct {
	// Held reports a live lease; HolderID, Fence and Remaining (the
	// coordinator's time left, as of its answer) describe it.
	Held      bool
	HolderID  string
	Fence     uint64
	Remaining time.Duration
	// LastFence is, when Held is false, the fence of the resource's last
	// lease: 0 if it was never held (or so long ago that the coordinator
	// forgot it).
	LastFence uint64
	// Value is the live lease's value (HoldOptions.Value, Proclaim), ""
	// if none.
	Value string
}

// Current is the fence an observer compares: the live lease's, or 0.
func (s Status) Current() uint64 {
	if s.Held {
		return s.Fence
	}
	return 0
}

// Inspect reports who holds resource, changing nothing.
func (c *Client) Inspect(ctx context.Context, resource string) (Status, error) {
	return c.inspect(ctx, wire.Message{Op: wire.OpInspect, Request: lease.Request{Resource: resource}})
}

// Observe reports resource's state as soon as its current fence (the live
// lease's, 0 when none is live) differs from after, or when wait ends (up
// to the client's MaxWait), with the state then. An observer passes the
// Current of the last Status it had.
func (c *Client) Observe(ctx context.Context, resource string, after uint64, wait time.Duration) (Status, error) {
	if wait < 0 || wait > c.maxWait {
		return Status{}, errors.New("client: Observe waits from 0 to the client's MaxWait (" + c.maxWait.String() + "), not " + wait.String())
	}
	return c.inspect(ctx, wire.Message{Op: wire.OpInspect, Request: lease.Request{Resource: resource}, After: after, HasAfter: true,
		Wait: wait.Truncate(time.Millisecond)})
}

func (c *Client) inspect(ctx context.Context, m wire.Message) (Status, error) {
	reply, err := c.send(ctx, m, clock.Instant{})
	if err != nil {
		return Status{}, err
	}
	if !reply.OK || reply.Held == nil || (!*reply.Held && reply.LastFence == nil) {
		return Status{}, errors.New("client: an inspection's answer without its state")
	}
	if *reply.Held {
		return Status{Held: true, HolderID: reply.HolderID, Fence: reply.Fence, Remaining: clock.FromMillis(reply.RemainingMillis),
			Value: reply.Value}, nil
	}
	return Status{LastFence: *reply.LastFence}, nil
}

// Leader is the holder of an election's lease, and the value it
// campaigned with or last proclaimed.
type Leader struct {
	HolderID string
	Fence    uint64
	Value    string
}

// Election is leader election over one resource, the election's name: the
// leader is the holder of its lease. Campaign waits to lead; Observe follows
// the leaders.
type Election struct {
	c    *Client
	name string
	// Options are those of the hold Campaign makes; its Wait is
	// WaitForever and its Value Campaign's, whatever is set here.
	Options HoldOptions

	mu   sync.Mutex
	held *Held // the last Campaign's
}

// NewElection returns the election of name, campaigned and observed through
// c.
func NewElection(c *Client, name string) *Election { return &Election{c: c, name: name} }

// Campaign waits, in the resource's queue, until this holder leads, or ctx
// ends; value (at most wire.MaxValueBytes, not secret: the leader's
// address, say) is the lead's value, which observers receive with the
// leader. The Held renews itself; Release resigns (and hands the lead to
// the next campaigner at once); its Context ends when the lead is lost.
func (e *Election) Campaign(ctx context.Context, value string) (*Held, error) {
	opts := e.Options
	opts.Wait, opts.Value = WaitForever, value
	h, err := e.c.Hold(ctx, e.name, opts)
	if err == nil {
		e.mu.Lock()
		e.held = h
		e.mu.Unlock()
	}
	return h, err
}

// Proclaim changes the value of the lead this Election's last Campaign
// won. It returns ErrExpired if that lead is over (also ErrLeaseRevoked if
// it was revoked), an error if Campaign never won.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	e.mu.Lock()
	h := e.held
	e.mu.Unlock()
	if h == nil {
		return errors.New("client: Proclaim needs a lead won by this Election's Campaign")
	}
	if h.Context().Err() != nil {
		return ErrExpired
	}
	return e.c.Proclaim(ctx, h.Lease(), value)
}

// Leader returns the current leader, and false if nobody leads.
func (e *Election) Leader(ctx context.Context) (Leader, bool, error) {
	st, err := e.c.Inspect(ctx, e.name)
	if err != nil || !st.Held {
		return Leader{}, false, err
	}
	return Leader{HolderID: st.HolderID, Fence: st.Fence, Value: st.Value}, true, nil
}

// Observe yields the election's leaders until ctx ends or the loop
// breaks: the current leader first (if there is one), then each new
// leader as it is elected, once each and in fence order, and the leader
// again each time it proclaims a new value. A leader whose
// lease ended while nobody waited is followed by the next one elected. The
// coordinator answers each change at once (an inspection waiting with
// afterFence), so a new leader is seen as soon as it is elected, not at
// the next poll. Failures to reach the coordinator are retried, pausing as
// the client's Backoff says.
func (e *Election) Observe(ctx context.Context) iter.Seq[Leader] {
	return func(yield func(Leader) bool) {
		var after, last uint64
		var value, lastValue string
		first, fails := true, 0
		for ctx.Err() == nil {
			var st Status
			var err error
			if first {
				st, err = e.c.Inspect(ctx, e.name)
			} else {
				st, err = e.c.inspect(ctx, wire.Message{Op: wire.OpInspect, Request: lease.Request{Resource: e.name}, After: after, HasAfter: true,
					AfterValue: value, HasAfterValue: true, Wait: e.c.maxWait.Truncate(time.Millisecond)})
			}
			if err != nil {
				fails++
				if !e.c.pause(ctx, e.c.backoff(min(fails, 8)+1)) {
					return
				}
				continue
			}
			first, fails = false, 0
			after, value = st.Current(), st.Value
			if st.Held && (st.Fence > last || st.Fence == last && st.Value != lastValue) {
				last, lastValue = st.Fence, st.Value
				if !yield(Leader{HolderID: st.HolderID, Fence: st.Fence, Value: st.Value}) {
					return
				}
			}
		}
	}
}

// pause waits d on the client's clock, or until ctx ends (false).
func (c *Client) pause(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	t := c.after(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
