package client

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// RenewEach renews each of ls in one call (wire.RenewalsPath; several if
// there are more than wire.MaxRenewals), each on its own: the i-th lease
// or error answers ls[i], as Renew answers it, and one refused never
// affects another. Each new lease is anchored at the batch's send (its own
// request's send instant). A coordinator that does not take batches (a
// Worker answers 501) gets one call per lease, concurrently, from then on.
func (c *Client) RenewEach(ctx context.Context, ls []*Lease) ([]*Lease, []error) {
	out, errs := make([]*Lease, len(ls)), make([]error, len(ls))
	for i := 0; i < len(ls); i += wire.MaxRenewals {
		end := min(i+wire.MaxRenewals, len(ls))
		c.renewBatch(ctx, ls[i:end], out[i:end], errs[i:end], nil)
	}
	return out, errs
}

// renewBatch renews ls (at most wire.MaxRenewals) into out and errs. until,
// if not nil, is when the answers are of no use (see deliver).
func (c *Client) renewBatch(ctx context.Context, ls []*Lease, out []*Lease, errs []error, until func() clock.Instant) {
	reqs := make([]lease.Request, len(ls))
	var ms []wire.Message
	var at []int // the index in ls of each of ms
	for i, l := range ls {
		if l == nil {
			errs[i] = errors.New("client: Renew needs a lease")
			continue
		}
		req, err := c.lc.BeginRenewal(l.Lease)
		if err != nil {
			errs[i] = err
			continue
		}
		reqs[i] = req
		ms, at = append(ms, wire.Message{Op: wire.OpRenew, Request: req, Secret: l.secret}), append(at, i)
	}
	answer := func(i int, reply wire.Reply, err error) {
		switch {
		case err != nil:
			errs[i] = err
		case !reply.OK:
			errs[i] = refusedReason(reply.Reason)
		default:
			out[i], errs[i] = c.complete(reqs[i], reply, ls[i].secret, c.lc.CompleteRenewal)
		}
	}
	if len(ms) == 0 {
		return
	}
	if len(ms) == 1 || c.noBatch.Load() {
		c.renewApart(ctx, ms, at, until, answer)
		return
	}
	pending := make([]int, len(ms)) // indexes in ms still to answer
	for k := range pending {
		pending[k] = k
	}
	for round := 1; ; round++ {
		batch := make([]wire.Message, len(pending))
		for j, k := range pending {
			batch[j] = ms[k]
		}
		body, err := wire.EncodeRenewals(batch)
		if err != nil {
			for _, k := range pending {
				errs[at[k]] = err
			}
			return
		}
		var rr wire.RenewalsReply
		err = c.deliver(ctx, "renewals", wire.RenewalsPath, body, 0, until, func(data []byte) error {
			rr = wire.RenewalsReply{}
			if err := json.Unmarshal(data, &rr); err != nil {
				return err
			}
			if !rr.OK || len(rr.Results) != len(batch) {
				return errors.New("a batch of " + strconv.Itoa(len(batch)) + " renewals answered with " + strconv.Itoa(len(rr.Results)) + " results")
			}
			return nil
		})
		var we *wire.Error
		if errors.As(err, &we) && (we.Code == wire.CodeNotSupported || we.Code == wire.CodeNotFound) {
			// A Worker, or a coordinator older than batches.
			c.noBatch.Store(true)
			left := make([]wire.Message, len(pending))
			idx := make([]int, len(pending))
			for j, k := range pending {
				left[j], idx[j] = ms[k], at[k]
			}
			c.renewApart(ctx, left, idx, until, answer)
			return
		}
		if err != nil {
			for _, k := range pending {
				errs[at[k]] = err
			}
			return
		}
		var again []int
		for j, k := range pending {
			r := &rr.Results[j]
			if e := r.Err(); e != nil {
				if e.Temporary() && !finalCodes[e.Code] && round < c.attempts && ctx.Err() == nil {
					// This renewal alone met a failure that changed
					// nothing (its resource's store was unavailable): it
					// is sent again, with the same request.
					again = append(again, k)
				}
				answer(at[k], wire.Reply{}, e)
				continue
			}
			answer(at[k], r.Reply, nil)
		}
		if len(again) == 0 {
			return
		}
		if err := c.backoffBefore(ctx, len(c.bases)+round); err != nil {
			return
		}
		pending = again
	}
}

// renewApart sends each of ms (renewals begun already) in a call of its
// own, concurrently, and answers each (at[k] is the index of ms[k]).
func (c *Client) renewApart(ctx context.Context, ms []wire.Message, at []int, until func() clock.Instant, answer func(int, wire.Reply, error)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for k, m := range ms {
		wg.Go(func() {
			reply, err := c.sendUntil(ctx, m, until)
			mu.Lock()
			defer mu.Unlock()
			answer(at[k], reply, err)
		})
	}
	wg.Wait()
}

// holds are a client's Held: a renewal that falls due takes with it the
// renewals of the others due within their window (batchWindow), in one
// call.
type holds struct {
	mu sync.Mutex
	m  map[*Held]struct{}
}

func (hs *holds) add(h *Held) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.m == nil {
		hs.m = map[*Held]struct{}{}
	}
	hs.m[h] = struct{}{}
}

func (hs *holds) remove(h *Held) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.m, h)
}

func (hs *holds) list() []*Held {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := make([]*Held, 0, len(hs.m))
	for h := range hs.m {
		out = append(out, h)
	}
	return out
}

// batchWindow is the part of a hold's renewal interval within which its
// renewal, not due yet, joins another hold's that is: sent up to that much
// early, and from then on due with it.
const batchWindow = 0.25

// member is a hold in a batch of renewals.
type member struct {
	h       *Held
	l       *Lease
	lossAt  clock.Instant
	pending bool        // the first renewal of a hold Hold has not returned
	in      atomic.Bool // until its hold left the batch (ended)
}

// renewDue begins the renewal of first, which is due, with those of the
// client's other holds due within their window, in one call.
func (c *Client) renewDue(first *Held) {
	now, nerr := c.lc.Now()
	ctx, cancel := context.WithCancel(context.Background())
	// The batch's context ends once every hold in it has left (ended, or
	// taken its answer); the builder counts as one until it is done.
	var left atomic.Int32
	left.Store(1)
	leaveOf := func(m *member) func() {
		m.in.Store(true)
		left.Add(1)
		return sync.OnceFunc(func() {
			m.in.Store(false)
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	var batch []*member
	if m := first.join(true, now, nerr == nil, leaveOf); m != nil {
		batch = append(batch, m)
	}
	if len(batch) == 1 {
		for _, h := range c.holds.list() {
			if len(batch) == wire.MaxRenewals {
				break
			}
			if h == first {
				continue
			}
			if m := h.join(false, now, nerr == nil, leaveOf); m != nil {
				batch = append(batch, m)
			}
		}
	}
	if left.Add(-1) == 0 || len(batch) == 0 {
		cancel()
		return
	}
	// The earliest loss of the holds still in the batch: its attempts
	// are hedged on that. A pending hold past its loss counts no more:
	// the attempts in flight are awaited for it, without hedges.
	until := func() clock.Instant {
		now, nerr := c.lc.Now()
		var u clock.Instant
		for _, m := range batch {
			if !m.in.Load() {
				continue
			}
			if left, err := m.lossAt.Since(now); m.pending && (nerr != nil || err != nil || left < deadlineSlack) {
				continue
			}
			if u.Domain == "" || m.lossAt.Millis < u.Millis {
				u = m.lossAt
			}
		}
		return u
	}
	go func() {
		defer cancel()
		out, errs := make([]*Lease, len(batch)), make([]error, len(batch))
		if len(batch) == 1 {
			out[0], errs[0] = c.renew(ctx, batch[0].l, until)
		} else {
			ls := make([]*Lease, len(batch))
			for i, m := range batch {
				ls[i] = m.l
			}
			c.renewBatch(ctx, ls, out, errs, until)
		}
		for i, m := range batch {
			m.h.renewed(out[i], errs[i], m.lossAt)
		}
	}()
}
