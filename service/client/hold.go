package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// ErrLeaseLost is what the cause (context.Cause) of a Held's context is, by
// errors.Is, when its lease was lost: a renewal was refused (the lease is
// over at the coordinator), or none succeeded in time. The cause itself is
// a *LostError that says which, and when. Do joins it to the error of a
// callback that ran while the lease was lost.
var ErrLeaseLost = errors.New("client: lease lost")

// LostError is the cause of a Held's context when its lease was lost. It
// is ErrLeaseLost by errors.Is. Its message gives durations, not instants
// of the holder's clock: how long after the send of the call that last
// extended the lease it was given up, and how long before (or after) the
// holder's deadline.
type LostError struct {
	Token fence.Token
	// Refused: the coordinator refused a renewal (the lease is no longer
	// current there). Otherwise no renewal succeeded in time.
	Refused bool
	// Revoked: the refusal said an operator revoked the lease (the
	// error is then also ErrLeaseRevoked).
	Revoked bool
	// SinceSent is how long after the send of the call that last extended
	// the lease the loss was found, and Left how long the lease had left
	// then, to the holder's deadline (negative: past it), both by the
	// holder's clock. Known is false when the clock could not be read.
	SinceSent, Left time.Duration
	Known           bool
	// Failure is the last renewal's failure (a transport error, a refusal)
	// since the last success, or the clock's error; nil if none.
	Failure error
}

func (e *LostError) Error() string {
	msg := "client: the lease on " + strconv.Quote(e.Token.Resource) + " (fence " + strconv.FormatUint(e.Token.Fence, 10) + ") was lost: "
	when := ""
	if e.Known {
		when = durationText(clock.Millis(e.SinceSent)) + " after the send of the call that last extended it, "
		if e.Left >= 0 {
			when += durationText(clock.Millis(e.Left)) + " before the holder's deadline"
		} else {
			when += durationText(clock.Millis(-e.Left)) + " after the holder's deadline"
		}
	}
	switch {
	case !e.Known:
		msg += "the holder's clock could not be read, so its deadline could not be kept"
		if e.Failure != nil {
			msg += " (" + e.Failure.Error() + ")"
		}
	case e.Revoked:
		msg += "an operator revoked it (the coordinator answered its renewal \"revoked\"), " + when
	case e.Refused:
		msg += "the coordinator refused its renewal (it is no longer current), " + when
	default:
		msg += "no renewal succeeded in time; given up " + when
	}
	return msg
}

// Is reports whether target is ErrLeaseLost, or ErrLeaseRevoked when the
// lease was revoked.
func (e *LostError) Is(target error) bool {
	return target == ErrLeaseLost || (e.Revoked && target == ErrLeaseRevoked)
}

// durationText says ms milliseconds as "12 ms", "3.4 ms" or "2.35 s", as
// lease-fence/service-client does.
func durationText(ms float64) string {
	a := math.Abs(ms)
	switch {
	case a >= 10_000:
		return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
	case a >= 1000:
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	case a >= 10:
		return strconv.FormatFloat(math.Round(ms), 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
}

// A hold counts its lease lost lossMargin(TTL) before the holder's
// deadline: 5 % of the TTL, at most 250 ms, at least 1 ms; so that a loss
// timer that fires late, by up to that margin, still ends the context
// before the deadline.
const (
	lossMarginFraction = 0.05
	maxLossMargin      = 250 * time.Millisecond
	minLossMargin      = time.Millisecond
)

func lossMargin(ttl time.Duration) time.Duration {
	return max(minLossMargin, min(time.Duration(float64(ttl)*lossMarginFraction), maxLossMargin))
}

// endingRelease bounds the release a hold sends itself when it ends
// without Release (a loss, the end of the context given to Hold), retries
// included, so that Do settles soon after a loss even when the coordinator
// does not answer.
const endingRelease = 2 * time.Second

// ErrReleased is the cause of a Held's context once Release was called.
var ErrReleased = errors.New("client: lease released")

// WaitForever, as HoldOptions.Wait, waits for the resource until the
// context ends.
const WaitForever = time.Duration(math.MaxInt64)

// HoldOptions configures Client.Hold and Client.Do.
type HoldOptions struct {
	// Wait is how long to wait for a resource another holder has: the
	// coordinator hands it over, in the order its waiters arrived, as
	// soon as it is released or expires. Zero asks once: a held resource
	// is a *DeniedError at once. WaitForever waits until the context ends.
	// A wait that runs out is a *DeniedError naming the holder.
	Wait time.Duration
	// RenewEvery is how often the lease is renewed, counted from each
	// renewal's send instant. Zero means a third of the TTL the
	// coordinator grants. It must be less than the TTL minus the clock
	// skew and the loss margin (5 % of the TTL, at most 250 ms), or the
	// lease would lapse between renewals.
	RenewEvery time.Duration
	// Value is the lease's value (an election's: the leader's address,
	// say), at most wire.MaxValueBytes of UTF-8, answered to anyone who
	// inspects the resource; not secret. Empty: none.
	Value string
}

// Held is a lease kept alive by its own renewals: the holder's side of a
// lock held while the work runs. Token is what the work's writes present to
// their gate; Context is the work's context: it ends when the lease is lost
// (cause a *LostError, which is ErrLeaseLost), when Release is called
// (cause ErrReleased), or when the context given to Hold ends (its cause).
// When renewals fail it ends a margin before the holder's deadline (5 % of
// the TTL, at most 250 ms), so that a timer that fires late still ends it
// before the deadline; it never ends after the deadline unless its timer
// fires later than that margin. Release ends it. A Held is safe for
// concurrent use.
//
// Every renewal is a new request (lease.Client.BeginRenewal), so each
// deadline is anchored at that renewal's own send instant; a renewal takes
// at most the time the lease has left before it counts as lost (the
// renewal in flight ends with the Context); an attempt without an answer
// after half of what is left then gets a hedge beside it (see deliver), so
// one lost answer leaves time for another attempt and a slow one still
// counts. The renewals of a Client's holds that fall due within a quarter
// of their interval of one another share one call (RenewEach), each
// answered on its own. A renewal that gets no answer is tried again sooner
// (lease.Keeper); one refused as expired loses the lease at once. When the
// hold ends without Release, it releases the lease itself, within 2
// seconds (and AttemptTimeout). The Context cannot stop a write already on
// its way to the resource: that write still needs the gate (fence.Gate, a
// fenced store), which refuses it if a newer holder has written.
type Held struct {
	c        *Client
	ctx      context.Context
	cancel   context.CancelCauseFunc
	finished chan struct{}

	mu       sync.Mutex
	k        *lease.Keeper
	margin   float64 // milliseconds: how long before the deadline the lease counts as lost
	every    float64 // milliseconds: the renewal interval
	secret   string
	renewT   clock.Timer
	lossT    clock.Timer
	renewing func() // leaves the renewal in flight, if any
	done     bool   // the context ended
	released bool   // Release ended it
	renewals int
	first    chan struct{} // closed at the first renewal's success, if Hold waits for it
	failure  error         // the last renewal's failure since the last success
	ownErr   error         // the failure of the release finish sent, if it sent one
}

// Hold acquires resource, waiting for it as opts.Wait says, and keeps the
// lease alive until Release, a loss, or the end of ctx (which then also
// releases it). ctx bounds the wait and, after it, the hold.
//
// A grant (one that waited, or a slow answer) is anchored, like any grant,
// at the send instant of the acquisition. If its first renewal was already
// due when it came, Hold renews it before returning, so the lease it
// returns has its full time ahead: as the hold renews, hedged on the loss
// of the lease the acquisition made and tried again sooner if it fails
// (see Held). Nothing has run under the lease, so that loss does not end
// the attempts sent: Hold awaits them (with no more hedges) and takes a
// success that comes after it; if none succeeds, the lease is lost (and
// released). If the wait ate that lease's whole time by the holder's clock (it
// may still be live at the coordinator, which counts from the grant), the
// renewal is a plain Renew, with no loss to hedge on. A Hold that waits
// (opts.Wait not zero) whose grant is refused at that renewal (it expired
// first) or lost before any renewal of it was answered (a wait that took
// most of the TTL, and a slow coordinator) waits again, for what is left
// of opts.Wait: the caller was handed nothing, and the grant was released.
func (c *Client) Hold(ctx context.Context, resource string, opts HoldOptions) (*Held, error) {
	if opts.Wait < 0 || opts.RenewEvery < 0 {
		return nil, errors.New("client: HoldOptions.Wait and RenewEvery must not be negative")
	}
	start, err := c.lc.Now()
	if err != nil {
		return nil, err
	}
	for {
		h, err := c.hold(ctx, resource, opts)
		var lost *LostError
		if opts.Wait == 0 || !errors.Is(err, ErrExpired) && !(errors.As(err, &lost) && !lost.Refused) {
			return h, err
		}
		// The grant expired before its first renewal (a wait longer than
		// the TTL, and a slow answer), or no renewal of it was answered
		// before its loss: wait again, for what is left.
		if opts.Wait != WaitForever {
			now, cerr := c.lc.Now()
			if cerr != nil {
				return nil, cerr
			}
			waited, _ := now.Duration(start)
			if opts.Wait -= waited; opts.Wait <= 0 {
				return nil, err
			}
			start = now
		}
	}
}

// hold is one attempt of Hold.
func (c *Client) hold(ctx context.Context, resource string, opts HoldOptions) (*Held, error) {
	l, err := c.acquireWaiting(ctx, resource, opts.Wait, opts.Value)
	if err != nil {
		return nil, err
	}
	ttl := l.Grant().TTL
	every := opts.RenewEvery
	if every == 0 {
		every = ttl / 3
	}
	margin := lossMargin(ttl)
	if every >= ttl-c.lc.ClockSkew()-margin {
		c.releaseAfter(l)
		return nil, errors.New("client: HoldOptions.RenewEvery (" + every.String() + ") must be less than the TTL (" + ttl.String() +
			") minus the clock skew (" + c.lc.ClockSkew().String() + ") and the loss margin (" + margin.String() + "), or the lease would lapse between renewals")
	}
	k, err := lease.NewKeeper(l.Lease, every)
	if err != nil {
		return nil, err
	}
	now, err := c.lc.Now()
	if err != nil {
		return nil, err
	}
	due, _ := k.NextRenewal().Since(now)
	left, _ := k.Deadline().AddMillis(-clock.Millis(margin)).Since(now)
	// hedged: the first renewal is due and the acquisition's lease has
	// time left to hedge on (the hold renews it below).
	hedged := due <= 0 && left >= deadlineSlack
	renewals := 0
	if due <= 0 && !hedged {
		// The wait ate the whole lease, by the holder's clock (it may
		// still be live at the coordinator, which counts from the
		// grant): renew it now, anchored here.
		l2, err := c.Renew(ctx, l)
		if err != nil {
			c.releaseAfter(l)
			return nil, err
		}
		l = l2
		renewals = 1
		if k, err = lease.NewKeeper(l.Lease, every); err != nil {
			return nil, err
		}
	}
	h := &Held{c: c, k: k, margin: clock.Millis(margin), every: clock.Millis(every), secret: l.secret, renewals: renewals, finished: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	var first chan struct{}
	if hedged {
		first = make(chan struct{})
		h.first = first
	}
	h.mu.Lock()
	h.armLocked()
	h.mu.Unlock()
	c.holds.add(h)
	context.AfterFunc(h.ctx, h.finish)
	if first == nil {
		return h, nil
	}
	// The acquisition took its first renewal's time: the hold renews
	// now, as any of its renewals, hedged on the loss of the lease
	// anchored at the acquisition's send and tried again sooner if it
	// fails, and Hold returns once one succeeded, so the lease it returns
	// has its time ahead. A loss ends the hold, which releases the lease.
	c.renewDue(h)
	select {
	case <-first:
	case <-h.ctx.Done():
	}
	if h.ctx.Err() == nil {
		return h, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var lost *LostError
	if errors.As(context.Cause(h.ctx), &lost) && lost.Refused {
		// As a refused Renew: ErrExpired (also ErrLeaseRevoked if so),
		// which a Hold that waits waits again after.
		return nil, lost.Failure
	}
	return nil, context.Cause(h.ctx)
}

// acquireWaiting acquires resource, waiting up to wait in calls of at most
// MaxWait: every call is the same acquisition (request id and secret), so
// the coordinator keeps its place in the queue between them.
func (c *Client) acquireWaiting(ctx context.Context, resource string, wait time.Duration, value string) (*Lease, error) {
	req, secret, err := c.beginAcquire(resource)
	if err != nil {
		return nil, err
	}
	for {
		var chunk time.Duration
		if wait > 0 {
			chunk = c.maxWait
			if wait != WaitForever {
				now, err := c.lc.Now()
				if err != nil {
					return nil, err
				}
				waited, err := now.Duration(req.SentAt)
				if err != nil {
					return nil, err
				}
				chunk = min(chunk, (wait - waited).Truncate(time.Millisecond))
			}
		}
		if chunk < 0 {
			chunk = 0
		}
		reply, err := c.send(ctx, wire.Message{Op: wire.OpAcquire, Request: req, Secret: secret, Wait: chunk, Value: value}, clock.Instant{})
		if err != nil {
			return nil, err
		}
		if reply.OK {
			l, err := c.complete(req, reply, secret, c.lc.CompleteAcquire)
			if err != nil && reply.Grant != nil {
				// The request was forgotten during a long wait (the
				// client began MaxPending others since): make the lease
				// from a renewal instead, anchored at its own send.
				return c.renewGrant(ctx, reply.Grant, secret)
			}
			return l, err
		}
		if reply.Reason == wire.ReasonRevoked {
			return nil, fmt.Errorf("client: the wait for %q was ended by an operator's revoke (its place in the queue was removed): %w", resource, ErrLeaseRevoked)
		}
		if reply.HeldBy == "" || chunk == 0 {
			return nil, denied(resource, reply)
		}
	}
}

// renewGrant turns a grant whose request the lease.Client no longer has into
// a lease, through a renewal.
func (c *Client) renewGrant(ctx context.Context, g *wire.Grant, secret string) (*Lease, error) {
	req, err := c.lc.BeginRenewalOf(fence.Token{Resource: g.Resource, HolderID: g.HolderID, Fence: g.Fence}, c.lc.Domain())
	if err != nil {
		return nil, err
	}
	return c.decide(ctx, wire.Message{Op: wire.OpRenew, Request: req, Secret: secret}, nil,
		func(wire.Reply) error { return ErrExpired }, c.lc.CompleteRenewal)
}

// releaseAfter releases l in the background, for a lease given up.
func (c *Client) releaseAfter(l *Lease) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		_ = c.Release(ctx, l)
	}()
}

// armLocked schedules the next renewal and the loss, a margin before the
// deadline, at the readings the Keeper gives, on the client's clock, or
// finds the lease lost: the holder's clock reached the loss (at most a
// microsecond from now), or cannot be read.
func (h *Held) armLocked() {
	now, err := h.c.lc.Now()
	if err != nil {
		// The holder's clock cannot be read: the deadline cannot be
		// kept, so the lease is given up.
		h.loseLocked(clock.Instant{}, false, err)
		return
	}
	if h.lossT != nil {
		h.lossT.Stop()
		h.lossT = nil
	}
	left, err := h.lossAt().Since(now)
	if err != nil || left < deadlineSlack {
		if h.first != nil && h.renewing != nil {
			// Hold has not returned, and the first renewal is in
			// flight: its answer decides (renewed arms again).
			return
		}
		h.loseLocked(now, false, h.failure)
		return
	}
	// Half the slack early: converting the time left to a duration and
	// back must not put the timer past the loss.
	h.lossT = h.c.after(ceilDuration(left-deadlineSlack/2), h.onDeadline)
	if h.renewing == nil {
		if h.renewT != nil {
			h.renewT.Stop()
		}
		due, _ := h.k.NextRenewal().Since(now)
		h.renewT = h.c.after(ceilDuration(min(due, left)), h.onRenewal)
	}
}

// lossAt is when the current lease counts as lost: the margin before its
// deadline.
func (h *Held) lossAt() clock.Instant { return h.k.Deadline().AddMillis(-h.margin) }

// ceilDuration is ms milliseconds (at least 0), rounded up to the
// nanosecond, so that a timer is not due before the reading it is for.
func ceilDuration(ms float64) time.Duration {
	return time.Duration(math.Ceil(max(ms, 0) * float64(time.Millisecond)))
}

// deadlineSlack is how close to the loss a firing of its timer counts as
// reaching it: the timer is set half of it before, so that the rounding of
// readings to durations and back never puts it after.
const deadlineSlack = 0.001 // milliseconds

// onDeadline ends the hold if the holder's clock reached the loss of the
// current lease (a renewal may have moved it since the timer was set), or
// sets the timers again.
func (h *Held) onDeadline() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.armLocked()
	}
}

// loseLocked ends the hold with a *LostError: at now (zero if the clock
// could not be read, failure then being its error), refused if the
// coordinator refused a renewal.
func (h *Held) loseLocked(now clock.Instant, refused bool, failure error) {
	_, _ = h.k.Check(h.k.Deadline())
	l := h.k.Lease()
	e := &LostError{Token: l.Token(), Refused: refused, Revoked: refused && errors.Is(failure, ErrLeaseRevoked), Failure: failure}
	if now.Domain != "" {
		since, err1 := now.Duration(l.Anchor())
		left, err2 := l.Deadline().Duration(now)
		e.SinceSent, e.Left, e.Known = since, left, err1 == nil && err2 == nil
	}
	h.cancel(e)
}

// onRenewal begins a renewal, unless one is in flight, with the renewals
// of the client's other holds that are due within their window.
func (h *Held) onRenewal() { h.c.renewDue(h) }

// join puts the hold's renewal in a batch being made, unless it ended or
// a renewal is in flight: the first (whose renewal fell due, or which Hold
// renews at once), or another whose renewal is due within batchWindow of
// its interval at now; its renewal timer is then stopped. leave makes the
// function that takes the hold out of the batch (when it ends, or takes
// its answer).
func (h *Held) join(first bool, now clock.Instant, nowOK bool, leave func(*member) func()) *member {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || h.renewing != nil {
		return nil
	}
	if !first {
		if !nowOK {
			return nil
		}
		if due, err := h.k.NextRenewal().Since(now); err != nil || due > h.every*batchWindow {
			return nil
		}
	}
	if h.renewT != nil {
		h.renewT.Stop()
	}
	// The renewal ends with the batch's context, once every hold in it
	// has ended or taken its answer; each hold's loss ends its own wait
	// (the attempts are hedged on the earliest loss in the batch). The
	// first renewal of a hold Hold has not returned (pending) is not
	// ended by its loss: nothing ran under the lease, and a renewal that
	// succeeds is anchored at its own send; past the loss its attempts in
	// flight are awaited, without more hedges.
	m := &member{h: h, l: &Lease{Lease: h.k.Lease(), secret: h.secret}, lossAt: h.lossAt(), pending: h.first != nil}
	h.renewing = leave(m)
	return m
}

// renewed takes the answer of the hold's renewal: the renewed lease l2, or
// the failure err; lossAt is when the lease the renewal was begun from
// counted as lost.
func (h *Held) renewed(l2 *Lease, err error, lossAt clock.Instant) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.renewing != nil {
		h.renewing()
		h.renewing = nil
	}
	if h.done || h.ctx.Err() != nil {
		// The hold ended meanwhile; finish releases the lease.
		return
	}
	now, nerr := h.c.lc.Now()
	if nerr != nil {
		h.loseLocked(clock.Instant{}, false, nerr)
		return
	}
	switch {
	case err == nil:
		// An answer taken after the lease counted as lost does not
		// revive the hold: the work had to stop by then (the loss
		// timer is late). Before Hold returns no work ran, and the
		// renewed lease, anchored at the renewal's send, is taken
		// unless it too is lost already.
		if h.first != nil {
			lossAt = l2.Deadline().AddMillis(-h.margin)
		}
		if left, lerr := lossAt.Since(now); lerr != nil || left < deadlineSlack || h.k.Renewed(l2.Lease) != nil {
			h.loseLocked(now, false, h.failure)
			return
		}
		h.renewals++
		h.failure = nil
		if h.first != nil {
			close(h.first)
			h.first = nil
		}
	case errors.Is(err, ErrExpired):
		h.k.Expire()
		h.loseLocked(now, true, err)
		return
	default:
		h.failure = err
		_ = h.k.Failed(now)
	}
	h.armLocked()
}

// finish runs once the hold's context ended, for whatever cause: it stops
// the timers and the renewal in flight and, unless Release is doing it,
// releases the lease (lost at the holder's deadline, it may still be live
// at the coordinator, and others may be waiting).
func (h *Held) finish() {
	h.mu.Lock()
	h.done = true
	for _, t := range []clock.Timer{h.renewT, h.lossT} {
		if t != nil {
			t.Stop()
		}
	}
	if h.renewing != nil {
		h.renewing()
	}
	released := h.released
	l := &Lease{Lease: h.k.Lease(), secret: h.secret}
	h.mu.Unlock()
	h.c.holds.remove(h)
	if !released {
		if err := h.c.releaseBounded(l); err != nil {
			h.mu.Lock()
			h.ownErr = err
			h.mu.Unlock()
		}
	}
	close(h.finished)
}

// releaseBounded releases l for a hold that ended without Release, within
// endingRelease (or AttemptTimeout, if less) of the holder's clock, each
// attempt hedged at half the time left, and within AttemptTimeout of real
// time. A lease the coordinator no longer has is not an error.
func (c *Client) releaseBounded(l *Lease) error {
	bound := min(endingRelease, c.timeout)
	noAnswer := func(d time.Duration, of string) error {
		return errors.New("client: the release of a lost hold got no answer within " + d.String() + of)
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), c.timeout, noAnswer(c.timeout, ""))
	defer cancel()
	var until clock.Instant
	if now, err := c.lc.Now(); err == nil {
		until = now.Add(bound)
		bctx, bcancel := context.WithCancelCause(ctx)
		defer bcancel(nil)
		t := c.after(bound, func() { bcancel(noAnswer(bound, " of the holder's clock")) })
		defer t.Stop()
		ctx = bctx
	} else {
		// No holder's clock: the bound in real time.
		var bcancel context.CancelFunc
		ctx, bcancel = context.WithTimeoutCause(ctx, bound, noAnswer(bound, ""))
		defer bcancel()
	}
	err := c.release(ctx, l, until)
	if err != nil && ctx.Err() != nil {
		err = errors.Join(context.Cause(ctx), err)
	}
	if errors.Is(err, ErrExpired) {
		return nil
	}
	return err
}

// Token returns the fencing token of the lease: the same for the whole
// hold.
func (h *Held) Token() fence.Token {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.k.Lease().Token()
}

// Lease returns the current lease: the last renewal's, with its deadline.
func (h *Held) Lease() *Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &Lease{Lease: h.k.Lease(), secret: h.secret}
}

// Renewing reports whether a renewal of the lease is in flight.
func (h *Held) Renewing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewing != nil
}

// Renewals returns how many renewals succeeded, counting the one Hold made
// before it returned when the acquisition's answer came after the first
// renewal was due.
func (h *Held) Renewals() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewals
}

// Context returns the work's context: see Held.
func (h *Held) Context() context.Context { return h.ctx }

// Release ends the hold: the context ends first (cause ErrReleased), then
// the lease is released at the coordinator, which hands the resource to
// its next waiter. It returns nil when the coordinator ended the lease (or
// had), ErrLeaseLost if the hold was lost before, the cause of the context
// given to Hold if that ended it (the lease was then released in the
// background), or the transport's error. A second Release returns nil.
func (h *Held) Release(ctx context.Context) error {
	h.mu.Lock()
	if h.done || h.ctx.Err() != nil {
		released := h.released
		h.mu.Unlock()
		if released {
			return nil
		}
		<-h.finished
		return context.Cause(h.ctx)
	}
	h.released = true
	l := &Lease{Lease: h.k.Lease(), secret: h.secret}
	h.mu.Unlock()
	h.cancel(ErrReleased)
	if err := h.c.Release(ctx, l); err != nil && !errors.Is(err, ErrExpired) {
		return err
	}
	return nil
}

// Do holds resource while fn runs: it acquires it as Hold does, calls fn
// with the hold's context and the hold, and releases the lease when fn
// returns, whatever it returns. Its error is fn's, joined with the
// *LostError (errors.Is ErrLeaseLost) if the lease was lost while fn ran
// (fn should stop when ctx ends; fn's own error alone if it is that
// loss), and with the release's error if that failed. After a loss, or
// the end of ctx, the release is the one the hold sent itself, bounded to
// 2 seconds: Do returns within that of fn's return.
func (c *Client) Do(ctx context.Context, resource string, opts HoldOptions, fn func(ctx context.Context, h *Held) error) error {
	h, err := c.Hold(ctx, resource, opts)
	if err != nil {
		return err
	}
	ferr := fn(h.Context(), h)
	cause := context.Cause(h.Context())
	lost := errors.Is(cause, ErrLeaseLost)
	rerr := h.Release(context.WithoutCancel(ctx))
	if errors.Is(rerr, ErrLeaseLost) || errors.Is(rerr, context.Cause(ctx)) {
		rerr = nil
	}
	h.mu.Lock()
	own := h.ownErr
	h.mu.Unlock()
	rerr = errors.Join(rerr, own)
	if lost && !errors.Is(ferr, cause) {
		return errors.Join(ferr, cause, rerr)
	}
	return errors.Join(ferr, rerr)
}
