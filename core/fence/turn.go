package fence

import (
	"context"
	"time"
)

// The gate's write lock. Gate.turn holds 0 while no write runs, and
// otherwise the running write's fence<<2 | lockHeld, plus lockSlow when the
// end of that write must take Gate.mu: writes are queued behind it, or
// Gate.run describes it. An uncontended lock and unlock are one
// compare-and-swap each (a buffered channel used as the lock cost the
// admitted Commit about 2.5x its former CPU time), and with the running
// fence in the same word a waiter learns which write it waits for without
// the write having stored anything. Waiters queue in FIFO order under
// Gate.mu and the lock is handed to the first of them directly, so a stream
// of new callers cannot starve one that waits.
const (
	lockHeld uint64 = 1
	lockSlow uint64 = 2
)

// waiter is a write queued for its turn. (Its token's holder and fence, not
// the Token: a Token field would link Token.String into a program that
// keeps a *Gate in an interface.)
type waiter struct {
	ch     chan struct{} // closed when the turn is handed to it
	holder string
	fence  uint64
	wc     *writeCtx // CommitContext's context, or nil for Commit
	prev   running   // the write that ran before it, set at the handoff
}

// running is what the gate knows of the running write, under Gate.mu. A
// Commit that found the gate free at the floor it had claimed records
// nothing (that path takes no lock); the first caller that needs a record
// (a write queueing behind it, an Admit raising the floor past it) makes one
// from the lock word and the floor.
type running struct {
	on     bool
	holder string
	fence  uint64
	since  time.Duration // Gate.elapsed when it started, or when the gate first looked
	timed  bool          // since is set
	exact  bool          // since is the write's start, not when the gate first looked
	wc     *writeCtx
}

// lockSlow takes the gate's write lock for a write of tok, under mu. A free
// gate is taken at once, with a record of the write (and wc, the context of
// a CommitContext write, to tell it). Otherwise the write queues, tells
// a running CommitContext write with a lower fence that it is superseded,
// and waits for its turn, or until ctx (nil for Commit: for as long as it
// takes) is done; then it leaves the queue and returns a *GateBusyError
// naming the write it waited for. ctx.Done is called only when the write has
// to wait, so a context can tell (tests and the simulator do) that its
// caller waited.
func (g *Gate) lockSlow(tok Token, wc *writeCtx, ctx context.Context) error {
	f := tok.Fence
	g.mu.Lock()
	for {
		s := g.turn.Load()
		if s == 0 {
			if g.turn.CompareAndSwap(0, f<<2|lockHeld|lockSlow) {
				// No clock reading: a write that found the gate free is
				// timed from when the first write queues behind it.
				g.run = running{on: true, holder: tok.HolderID, fence: f, wc: wc}
				g.mu.Unlock()
				return nil
			}
			continue
		}
		if s&lockSlow != 0 || g.turn.CompareAndSwap(s, s|lockSlow) {
			break
		}
	}
	if !g.exclusive && g.turn.Load()>>2 == f && len(g.waiters) == 0 {
		// Shared admission: the running write has this fence and no
		// higher one waits; run alongside it.
		g.describeRunning()
		g.joined = append(g.joined, wc)
		g.mu.Unlock()
		return nil
	}
	w := &waiter{ch: make(chan struct{}), holder: tok.HolderID, fence: tok.Fence, wc: wc}
	g.waiters = append(g.waiters, w)
	g.describeRunning()
	g.supersede(tok.HolderID, tok.Fence, true)
	g.mu.Unlock()

	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	select {
	case <-w.ch:
		return nil
	case <-done:
	}
	g.mu.Lock()
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			err := g.busy(tok, g.run, ctx.Err())
			g.mu.Unlock()
			return err
		}
	}
	g.mu.Unlock()
	// The turn was handed over as done closed: it is ours; pass it on.
	<-w.ch
	g.mu.Lock()
	err := g.busy(tok, w.prev, ctx.Err())
	g.mu.Unlock()
	g.unlock(f, wc)
	return err
}

// unlock ends a running write, whose fence is f and context wc (nil for a
// Commit). When it was the last write of the turn it hands the turn to the
// first waiter if there is one (and, with shared admission, to the waiters
// right behind it with the same fence).
func (g *Gate) unlock(f uint64, wc *writeCtx) {
	if g.turn.CompareAndSwap(f<<2|lockHeld, 0) {
		return
	}
	g.mu.Lock()
	if n := len(g.joined); n > 0 {
		// Others share the turn: only this write ends. If it is not one
		// of those that joined, it was the running write: one that joined
		// takes its place.
		i := n - 1
		for j, x := range g.joined {
			if x == wc {
				i = j
				break
			}
		}
		if g.joined[i] != wc {
			g.run.wc = g.joined[i]
		}
		g.joined[i] = g.joined[n-1]
		g.joined[n-1] = nil
		g.joined = g.joined[:n-1]
		g.mu.Unlock()
		return
	}
	prev := g.run
	g.run = running{}
	if len(g.waiters) == 0 {
		g.turn.Store(0)
		g.mu.Unlock()
		return
	}
	w := g.waiters[0]
	g.waiters[0] = nil
	g.waiters = g.waiters[1:]
	w.prev = prev
	g.turn.Store(w.fence<<2 | lockHeld | lockSlow)
	g.run = running{on: true, holder: w.holder, fence: w.fence, since: g.elapsed(), timed: true, exact: true, wc: w.wc}
	for !g.exclusive && len(g.waiters) > 0 && g.waiters[0].fence == w.fence {
		// Shared admission: the waiters right behind it with its fence
		// run with it.
		x := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		x.prev = prev
		g.joined = append(g.joined, x.wc)
		close(x.ch)
	}
	// A newer fence already waiting behind it supersedes it before it starts.
	for _, x := range g.waiters {
		if x.fence > w.fence {
			g.supersede(x.holder, x.fence, true)
			break
		}
	}
	close(w.ch)
	g.mu.Unlock()
}

// describeRunning makes sure g.run describes the running write and has a
// time, under mu, with lockSlow set so that the write's end clears it. A
// write that took the gate without a record (Commit's lock-free path) holds
// the floor it claimed, so its holder is the floor's, or the previous floor's
// if an Admit raised the floor past it since.
func (g *Gate) describeRunning() {
	if g.run.on {
		if !g.run.timed {
			g.run.since, g.run.timed = g.elapsed(), true
		}
		return
	}
	rf := g.turn.Load() >> 2
	holder := ""
	switch rf {
	case g.floor.Load():
		holder = g.floorHolder
	case g.prevFence:
		holder = g.prevHolder
	}
	g.run = running{on: true, holder: holder, fence: rf, since: g.elapsed(), timed: true}
}

// supersede tells the running CommitContext write, under mu, that a newer
// fence reached the gate: its context is cancelled with a *SupersededError
// (once; a write that already ended is not told).
func (g *Gate) supersede(holder string, fence uint64, waiting bool) {
	r := &g.run
	if !r.on || fence <= r.fence {
		return
	}
	wc := r.wc
	if wc == nil {
		// A CommitContext that took the gate by the lock-free path; nil
		// if it has not published its context yet (it then catches up).
		wc = g.freeCtx.Load()
	}
	e := &SupersededError{
		Resource: g.resource, HolderID: r.holder, Fence: r.fence,
		NewerHolderID: holder, NewerFence: fence, NewerWaiting: waiting,
	}
	if wc != nil {
		wc.supersede(e)
	}
	for _, x := range g.joined {
		if x != nil {
			x.supersede(e)
		}
	}
}

// catchUp, under mu, tells the CommitContext write of fence f that took the
// gate by the lock-free path about a newer fence that reached the gate before
// it published its context: a write waiting for it, or a floor raised past
// it.
func (g *Gate) catchUp(f uint64) {
	g.describeRunning()
	for _, x := range g.waiters {
		if x.fence > f {
			g.supersede(x.holder, x.fence, true)
			return
		}
	}
	if floor := g.floor.Load(); floor > f {
		g.supersede(g.floorHolder, floor, false)
	}
}

// busy is the error of a write of tok that gave up waiting behind r, under
// mu.
func (g *Gate) busy(tok Token, r running, err error) *GateBusyError {
	e := &GateBusyError{
		Resource: g.resource, HolderID: tok.HolderID, Fence: tok.Fence,
		RunningHolderID: r.holder, RunningFence: r.fence, Err: err, atLeast: !r.exact,
	}
	if r.timed {
		e.Running = max(g.elapsed()-r.since, 0)
	}
	return e
}
