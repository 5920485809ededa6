package sim

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/lease-fence/lease-fence/core/fence"
)

// An async write runs through Gate.CommitContext on a goroutine of its own,
// and its write callback blocks until the simulation reaches the write's end
// event. The simulation stays single-threaded in effect: after anything that
// can move a write on (its start, the end of the running write, a
// cancellation), it waits until every goroutine it touched has settled:
// started its write, returned, or queued behind the running write. A queued
// CommitContext is seen by its context: the gate asks for Done only when it
// has to wait. The gate hands its lock to waiters in FIFO order (documented),
// which is the order the simulation keeps them in. Writes with the same
// fence share the gate (shared admission): one that arrives while writes
// with its fence run, and nothing waits, starts at once; the waiters at the
// head of the queue with the fence of the one handed the turn start with
// it.
type asyncWrite struct {
	m      *message
	ri     int
	dur    int64
	fail   bool
	ctx    *askCtx
	cancel context.CancelFunc
	finish chan struct{}   // closed at the write's end event
	ev     chan asyncEvent // started, then returned
	broken bool            // skipAsyncQueue: no goroutine, no gate lock
	queued bool
	over   bool
}

type asyncEvent struct {
	started bool
	err     error
}

// askCtx closes asked the first time Done is called.
type askCtx struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (c *askCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

func (w *world) gateBusy(ri int) bool { return len(w.running[ri]) > 0 || len(w.queued[ri]) > 0 }

// startAsync begins an async write of m lasting dur.
func (w *world) startAsync(m *message, ri int, dur int64) {
	w.stats.AsyncWrites++
	ctx, cancel := context.WithCancel(context.Background())
	aw := &asyncWrite{
		m: m, ri: ri, dur: dur, fail: w.rng.Float64() < w.p.WriteFail,
		ctx: &askCtx{Context: ctx, asked: make(chan struct{})}, cancel: cancel,
		finish: make(chan struct{}), ev: make(chan asyncEvent, 2),
	}
	g := w.gates[ri]
	w.tracef("gate %s async write %s for %dms", m.tok.Resource, m.tok, dur)
	if w.opts.skipAsyncQueue {
		// The deliberate break: check the floor when the write arrives and
		// start it at once, without waiting for the running write.
		aw.broken = true
		if err := g.Admit(m.tok); err != nil {
			w.asyncDone(aw, err, false, g.Floor())
			return
		}
		w.asyncStarted(aw)
		return
	}
	go func() {
		err := g.CommitContext(aw.ctx, m.tok, func(context.Context) error {
			aw.ev <- asyncEvent{started: true}
			<-aw.finish
			if aw.fail {
				return errWriteFailed
			}
			return nil
		})
		aw.ev <- asyncEvent{err: err}
	}()
	select {
	case e := <-aw.ev:
		if e.started {
			w.chk.check(GateFloor, len(w.queued[ri]) == 0,
				"gate %s started the write of %s ahead of the waiting write of %s", m.tok.Resource, m.tok, w.queuedTok(ri))
			w.asyncStarted(aw)
		} else {
			w.asyncDone(aw, e.err, false, g.Floor())
		}
	case <-aw.ctx.asked:
		aw.queued = true
		w.stats.AsyncQueued++
		w.queued[ri] = append(w.queued[ri], aw)
		if w.p.WriteTimeoutMs > 0 {
			w.push(&event{at: w.now + w.p.WriteTimeoutMs, kind: evWriteCancel, aw: aw})
		}
		w.tracef("gate %s queues %s", m.tok.Resource, m.tok)
	}
}

func (w *world) asyncStarted(aw *asyncWrite) {
	aw.queued = false
	ri := aw.ri
	other := w.runningTok(ri)
	w.chk.check(GateFloor, other.Fence == 0 || other.Fence == aw.m.tok.Fence,
		"gate %s started the write of %s while the write of %s was running", aw.m.tok.Resource, aw.m.tok, other)
	w.running[ri] = append(w.running[ri], aw)
	w.chk.WriteRuns(aw.m.tok)
	w.push(&event{at: w.now + aw.dur, kind: evWriteEnd, aw: aw})
}

// runningTok is the token of a running write with another fence than the
// first's if there is one (the writes running together must share one),
// else of the first running write, else the zero Token.
func (w *world) runningTok(ri int) fence.Token {
	rs := w.running[ri]
	if len(rs) == 0 {
		return fence.Token{}
	}
	for _, r := range rs[1:] {
		if r.m.tok.Fence != rs[0].m.tok.Fence {
			return r.m.tok
		}
	}
	return rs[0].m.tok
}

func (w *world) queuedTok(ri int) fence.Token {
	if len(w.queued[ri]) == 0 {
		return fence.Token{}
	}
	return w.queued[ri][0].m.tok
}

// writeEnd finishes the running write aw and lets the queue move on.
func (w *world) writeEnd(aw *asyncWrite) {
	ri := aw.ri
	for i, r := range w.running[ri] {
		if r == aw {
			w.running[ri] = append(w.running[ri][:i:i], w.running[ri][i+1:]...)
			break
		}
	}
	g := w.gates[ri]
	if aw.broken {
		var err error
		if aw.fail {
			err = errWriteFailed
		}
		w.asyncDone(aw, err, true, g.Floor())
		return
	}
	// The floor as the write ends, read before it does: once it has, the
	// gate hands its turn to the next waiter, whose goroutine may raise the
	// floor while this one reads it (an answer read from the live gate made
	// the trace depend on scheduling). Ending a write or refusing a waiter
	// does not move the floor; a waiter that starts does, after these
	// answers (the order js/wasm, on one thread, also shows).
	floor := g.Floor()
	close(aw.finish)
	e := <-aw.ev
	w.asyncDone(aw, e.err, true, floor)
	w.handOn(ri, floor)
}

// handOn, once no write runs, waits for the first queued write to take its
// turn: it starts (with the waiters right behind it that have its fence), or
// it is refused and hands on to the next. floor is the gate's floor before
// any of them starts (what a refused one is answered with).
//
// The waiters right behind the first with its fence are handed the turn
// with it (shared admission): their goroutines start, or refuse themselves,
// at the same moment, and log their rejections in an order the scheduler
// chooses. The refused are answered in the order of the gate's log, so the
// trace does not depend on it. (Writes with one fence are one holder's, so
// their answers differ only in the rejection's number.)
func (w *world) handOn(ri int, floor uint64) {
	type answer struct {
		aw  *asyncWrite
		err error
	}
	seq := func(a answer) uint64 {
		var stale *fence.StaleFenceError
		if errors.As(a.err, &stale) {
			return stale.Seq
		}
		return 0
	}
	for len(w.queued[ri]) > 0 && len(w.running[ri]) == 0 {
		head := w.queued[ri][0]
		w.queued[ri] = w.queued[ri][1:]
		e := <-head.ev
		var refused []answer
		take := func(aw *asyncWrite, e asyncEvent) {
			if e.started {
				w.asyncStarted(aw)
			} else {
				refused = append(refused, answer{aw, e.err})
			}
		}
		take(head, e)
		for len(w.queued[ri]) > 0 && w.queued[ri][0].m.tok.Fence == head.m.tok.Fence {
			next := w.queued[ri][0]
			w.queued[ri] = w.queued[ri][1:]
			en := <-next.ev
			if e.started {
				w.chk.check(GateFloor, en.started,
					"gate %s refused the waiting write of %s, with the fence of %s that it admitted (%v)", next.m.tok.Resource, next.m.tok, head.m.tok, en.err)
			} else {
				w.chk.check(GateFloor, !en.started,
					"gate %s started the waiting write of %s, with the fence of %s that it refused (%v)", next.m.tok.Resource, next.m.tok, head.m.tok, e.err)
			}
			take(next, en)
		}
		slices.SortStableFunc(refused, func(a, b answer) int { return cmp.Compare(seq(a), seq(b)) })
		for _, a := range refused {
			w.asyncDone(a.aw, a.err, false, floor)
		}
		if e.started {
			return
		}
	}
}

// cancelWait cancels aw's context if it is still waiting for its turn: it
// must return the context's error having logged nothing and moved nothing.
func (w *world) cancelWait(aw *asyncWrite) {
	if !aw.queued || aw.over {
		return
	}
	g := w.gates[aw.ri]
	floor, logged := g.Floor(), g.RejectionCount()
	aw.cancel()
	e := <-aw.ev
	q := w.queued[aw.ri]
	for i, x := range q {
		if x == aw {
			w.queued[aw.ri] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	aw.queued, aw.over = false, true
	w.stats.AsyncCancelled++
	w.chk.check(GateFloor, !e.started && errors.Is(e.err, context.Canceled) && g.Floor() == floor && g.RejectionCount() == logged,
		"gate %s: cancelling the waiting write of %s returned %v (started %v), floor %d -> %d, log %d -> %d",
		aw.m.tok.Resource, aw.m.tok, e.err, e.started, floor, g.Floor(), logged, g.RejectionCount())
	w.tracef("gate %s cancels the waiting write of %s", aw.m.tok.Resource, aw.m.tok)
	w.send(&message{kind: mWriteResult, agent: aw.m.agent, tok: aw.m.tok})
}

// asyncDone accounts for an async write that returned err, the gate's
// floor then being floor.
func (w *world) asyncDone(aw *asyncWrite, err error, ran bool, floor uint64) {
	aw.over, aw.queued = true, false
	w.answered(aw.m, floor, ran, err)
}

// closeAsync ends what is still in flight when the run stops, so no
// goroutine outlives it: waiting writes are cancelled, running ones end.
func (w *world) closeAsync() {
	for ri := range w.running {
		for _, aw := range w.queued[ri] {
			if !aw.broken {
				aw.cancel()
				<-aw.ev
			}
		}
		w.queued[ri] = nil
		for _, aw := range w.running[ri] {
			if !aw.broken {
				close(aw.finish)
				<-aw.ev
			}
		}
		w.running[ri] = nil
	}
}

// StoreGate is a gate kept outside the run's memory, as the simulator
// drives it: gates/sqlfence in the tests. Commit runs the write of token
// (recording its fence as one landed write of the resource) in the same
// step as the fence check, or refuses it; a write that fails leaves no
// landed write behind. Writes lists the fences of the landed writes of a
// resource, in the order they landed.
type StoreGate interface {
	Admit(ctx context.Context, tok fence.Token) error
	Commit(ctx context.Context, tok fence.Token, fail bool) (ran bool, err error)
	Floor(ctx context.Context, resource string) (uint64, error)
	Rejections(ctx context.Context, resource string) ([]fence.Rejection, error)
	Writes(ctx context.Context, resource string) ([]uint64, error)
	Close() error
}

// openSQL opens the run's store gate if the run writes through one.
func (w *world) openSQL() {
	if !w.p.SQL || w.opts.OpenStore == nil || w.opts.Mode != Fenced {
		return
	}
	var err error
	w.store, err = w.opts.OpenStore()
	must(err)
	w.sqlLanded = make(map[string]int)
	w.sqlRefused = make(map[string]int)
}

// sqlResource runs a write or a push through the store.
func (w *world) sqlResource(m *message) {
	ctx := context.Background()
	tok := m.tok
	var err error
	ran := false
	if m.kind == mAdmit {
		err = w.store.Admit(ctx, tok)
	} else {
		fail := w.rng.Float64() < w.p.WriteFail
		ran, err = w.store.Commit(ctx, tok, fail)
		if err == nil {
			// Only a committed write counts: a failed one rolled back.
			w.chk.WriteRuns(tok)
			w.sqlLanded[tok.Resource]++
		}
	}
	floor, ferr := w.store.Floor(ctx, tok.Resource)
	must(ferr)
	var stale *fence.StaleFenceError
	if errors.As(err, &stale) {
		w.sqlRefused[tok.Resource]++
	}
	w.chk.GateAnsweredFloor(floor, tok, m.kind == mAdmit, ran, err)
	w.account(m, ran, err)
	w.tracef("store %s %s %s -> floor %d, err %v", tok.Resource, msgNames[m.kind], tok, floor, err)
	if m.kind == mWrite {
		w.send(&message{kind: mWriteResult, agent: m.agent, tok: tok, refused: errors.As(err, &stale)})
	}
}

// closeSQL checks what the database holds against what the run saw, then
// closes it: rows per resource in commit order carry non-decreasing fences,
// one row per landed write, one rejection row per refusal.
func (w *world) closeSQL() {
	if w.store == nil {
		return
	}
	defer w.store.Close()
	ctx := context.Background()
	for _, res := range w.resources {
		fences, err := w.store.Writes(ctx, res)
		must(err)
		var last uint64
		n := 0
		for _, f := range fences {
			w.chk.check(GateFloor, f >= last, "store %s committed fence %d after fence %d", res, f, last)
			last = f
			n++
		}
		rej, err := w.store.Rejections(ctx, res)
		must(err)
		w.chk.check(GateFloor, n == w.sqlLanded[res] && len(rej) == w.sqlRefused[res],
			"store %s holds %d rows and %d rejections; the run saw %d land and %d refused", res, n, len(rej), w.sqlLanded[res], w.sqlRefused[res])
	}
}
