// The agents of a simulated world: what each believes of its lease, its
// hold loop, and the replies it gets.

package sim

import (
	"errors"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/naive"
)

type agent struct {
	id     int
	name   string
	clk    *clock.Manual
	off    float64
	rate   float64
	client *lease.Client

	phase    phase
	req      lease.Request
	attempts int
	done     map[string]bool // request ids this agent completed

	l          *lease.Lease
	linc       int    // incarnation whose grant l came from
	gen        uint64 // generation of the current lease (order of grants)
	nl         *naive.Lease
	beyond     bool // BeliefBeyondWindow already counted for this lease
	writesLeft int

	renewing  bool
	renew     lease.Request
	renewNext int64

	busyUntil int64
	wakeGen   int
}

func (w *world) wake(a *agent) {
	if w.now < a.busyUntil {
		w.wakeAt(a, a.busyUntil)
		return
	}
	if w.rng.Float64() < w.p.PauseProb {
		w.stats.Pauses++
		a.busyUntil = w.now + 1 + w.rng.Int64N(w.p.MaxStallMs)
		w.tracef("%s pauses until %d", a.name, a.busyUntil)
		w.wakeAt(a, a.busyUntil)
		return
	}
	now := w.agentNow(a)
	ttl := w.p.TTL.Milliseconds()
	switch a.phase {
	case idle:
		res := w.resources[w.rng.IntN(len(w.resources))]
		req, err := a.client.BeginAcquireAt(now, res)
		must(err)
		a.req, a.attempts, a.phase = req, 1, acquiring
		w.tracef("%s sends acquire %s for %s", a.name, req.RequestID, res)
		w.send(&message{kind: mAcquire, agent: a.id, req: req})
		w.wakeAt(a, w.now+w.p.RetryMs)
	case acquiring:
		if a.attempts < w.p.MaxAttempts {
			a.attempts++
			w.tracef("%s retries acquire %s", a.name, a.req.RequestID)
			w.send(&message{kind: mAcquire, agent: a.id, req: a.req})
			w.wakeAt(a, w.now+w.p.RetryMs)
			return
		}
		a.phase = idle
		w.wakeAt(a, w.now+1+w.rng.Int64N(ttl))
	case holding:
		w.holdStep(a, now)
	}
}

// believesValid is the holder's own check, right before a write.
func (w *world) believesValid(a *agent, now clock.Instant) bool {
	if w.opts.Mode == Naive {
		ok, err := a.nl.Valid()
		must(err)
		return ok
	}
	exp, err := a.l.HasExpiredAt(now)
	must(err)
	return !exp
}

func (w *world) deadlineOf(a *agent) clock.Instant {
	if w.opts.Mode == Naive {
		return a.nl.ExpiresAt()
	}
	return a.l.Deadline()
}

func (w *world) drop(a *agent, why string) {
	w.tracef("%s drops %s (%s)", a.name, a.l.Token(), why)
	a.phase, a.l, a.nl, a.renewing, a.beyond = idle, nil, nil, false, false
	w.wakeAt(a, w.now+1+w.rng.Int64N(w.p.TTL.Milliseconds()/2+1))
}

func (w *world) holdStep(a *agent, now clock.Instant) {
	ttl := w.p.TTL.Milliseconds()
	if !w.believesValid(a, now) {
		w.drop(a, "expired by its own clock")
		return
	}
	left := w.deadlineOf(a).Millis - now.Millis
	switch {
	case a.renewing && w.now >= a.renewNext:
		w.tracef("%s retries renewal %s", a.name, a.renew.RequestID)
		w.send(&message{kind: mRenew, agent: a.id, req: a.renew})
		a.renewNext = w.now + w.p.RetryMs
	case !a.renewing && left < float64(ttl)/2:
		req, err := a.client.BeginRenewalAt(now, a.l)
		must(err)
		a.renew, a.renewing, a.renewNext = req, true, w.now+w.p.RetryMs
		w.tracef("%s sends renewal %s of %s", a.name, req.RequestID, a.l.Token())
		w.send(&message{kind: mRenew, agent: a.id, req: req})
	}
	if a.writesLeft == 0 {
		tok := a.l.Token()
		w.tracef("%s releases %s", a.name, tok)
		w.drop(a, "done")
		w.send(&message{kind: mRelease, agent: a.id, tok: tok})
		return
	}
	// The check above is the holder's last look at its lease; the write
	// lands after the stall (a model call) and the network delay.
	a.writesLeft--
	var stall int64
	if w.rng.Float64() < w.p.StallProb {
		w.stats.Stalls++
		stall = 1 + w.rng.Int64N(w.p.MaxStallMs)
	}
	a.busyUntil = w.now + stall
	m := &message{kind: mWrite, agent: a.id, tok: a.l.Token(), inc: a.linc, gen: a.gen}
	w.tracef("%s checked %s valid; writes after a %dms stall", a.name, m.tok, stall)
	w.push(&event{at: a.busyUntil, kind: evSendWrite, msg: m})
	w.wakeAt(a, a.busyUntil+1+w.rng.Int64N(ttl/6+1))
}

func (w *world) agentMail(a *agent, m *message) {
	switch m.kind {
	case mAcquireReply:
		w.acquireReply(a, m)
	case mRenewReply:
		w.renewReply(a, m)
	case mWriteResult:
		if m.refused && a.phase == holding && a.l.Token() == m.tok {
			w.drop(a, "the gate refused its write")
		}
	}
}

func (w *world) acquireReply(a *agent, m *message) {
	current := a.phase == acquiring && m.req.RequestID == a.req.RequestID
	if m.err != nil || !m.out.OK {
		if current {
			a.phase = idle
			wait := w.rng.Int64N(w.p.TTL.Milliseconds() + 1)
			if m.out.RetryAfter > 0 {
				wait += m.out.RetryAfter.Milliseconds()
			}
			w.wakeAt(a, w.now+1+wait)
		}
		return
	}
	g := m.out.Grant
	if a.done[m.req.RequestID] {
		// A duplicate or retried reply to a request already completed: the
		// client must refuse to make a second lease from it.
		w.completeAgain(a, "acquisition", m.req, g, a.client.CompleteAcquire)
		return
	}
	if !current {
		return // an answer to a request the agent gave up on
	}
	l, err := a.client.CompleteAcquire(a.req, g)
	if !w.chk.check(CoreError, err == nil, "%s could not complete %s: %v", a.name, a.req.RequestID, err) {
		return
	}
	a.done[a.req.RequestID] = true
	a.l, a.linc, a.phase, a.renewing, a.beyond = l, m.inc, holding, false, false
	a.gen = w.gens[leaseKey{m.inc, g.Resource, g.Fence}]
	a.writesLeft = 1 + w.rng.IntN(6)
	if w.opts.Mode == Naive {
		a.nl, err = naive.Acquire(a.clk, w.p.TTL)
		must(err)
	}
	w.tracef("%s holds %s until %s", a.name, l.Token(), w.deadlineOf(a))
	w.wakeAt(a, w.now+w.rng.Int64N(w.p.TTL.Milliseconds()/8+1))
}

// completeAgain checks that completing req a second time, for a duplicate
// or retried reply, is refused with a *lease.CompletedError.
func (w *world) completeAgain(a *agent, what string, req lease.Request, g lease.Grant, complete func(lease.Request, lease.Grant) (*lease.Lease, error)) {
	_, err := complete(req, g)
	var ce *lease.CompletedError
	w.chk.check(SingleUse, errors.As(err, &ce),
		"%s completed %s %s a second time (err %v)", a.name, what, req.RequestID, err)
}

func (w *world) renewReply(a *agent, m *message) {
	current := a.phase == holding && a.renewing && m.req.RequestID == a.renew.RequestID
	if m.err != nil || !m.out.OK {
		if current {
			w.drop(a, "renewal refused")
		}
		return
	}
	g := m.out.Grant
	if a.done[m.req.RequestID] {
		w.completeAgain(a, "renewal", m.req, g, a.client.CompleteRenewal)
		return
	}
	if !current {
		return
	}
	l, err := a.client.CompleteRenewal(a.renew, g)
	if !w.chk.check(CoreError, err == nil, "%s could not complete renewal %s: %v", a.name, a.renew.RequestID, err) {
		return
	}
	w.chk.check(FenceOrder, l.Token() == a.l.Token(), "renewal turned %s into %s", a.l.Token(), l.Token())
	a.done[a.renew.RequestID] = true
	// After an amnesiac restart a renewal can reach a new incarnation that
	// reissued the same fence to the same holder; the window is then that
	// incarnation's.
	a.l, a.linc, a.renewing = l, m.inc, false
	if w.opts.Mode == Naive {
		must(a.nl.Renewed())
	}
	w.tracef("%s renewed %s until %s", a.name, l.Token(), w.deadlineOf(a))
}
