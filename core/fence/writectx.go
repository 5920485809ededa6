package fence

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// writeCtx is the context a CommitContext write gets: its parent's values
// and deadline, cancelled when the parent is, with a *SupersededError as its
// cause when a newer fence reaches the gate while the write runs, and with
// context.Canceled once the write has returned.
//
// It is a context.WithCancelCause of the parent made on first use, so that a
// write that never looks at its context costs no child context, no
// registration with its parent, and no call to the parent's Done (which
// would tell a context that watches it, as the tests and the simulator do,
// that its caller waited). Once made, it is that standard context in all but
// name: Value hands over the standard cancel context itself, so
// context.Cause, and children made with context.WithTimeout and the like,
// attach to it directly.
type writeCtx struct {
	// parent and inner are context.Contexts, held as any: a Gate keeps a
	// *writeCtx, and a field of interface type context.Context would make
	// a program that keeps a *Gate in an interface (the wasm bridge) link
	// in time.Time's methods (Deadline returns one): about 90 KB of time
	// formatting in the wasm.
	parent any

	// state is ctxLive until the first end: ctxSuperseded (cause set, under
	// mu) or ctxFinished. made is set once inner exists. The write's own end
	// (finish) takes no lock unless inner was made: it sets state first and
	// then reads made, while ctx() sets made and then reads state, so one of
	// the two always sees the other and cancels inner.
	state atomic.Int32
	made  atomic.Bool

	mu     sync.Mutex // guards inner, cancel and cause
	inner  any        // made on first use
	cancel context.CancelCauseFunc
	cause  error
}

const (
	ctxLive int32 = iota
	ctxSuperseded
	ctxFinished
)

func (c *writeCtx) ctx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		var inner context.Context
		inner, c.cancel = context.WithCancelCause(c.parent.(context.Context))
		c.inner = inner
		c.made.Store(true)
		if c.state.Load() != ctxLive {
			c.cancel(c.cause) // nil cause once finished: context.Canceled
		}
	}
	return c.inner.(context.Context)
}

// supersede cancels the context with cause, unless it already ended.
func (c *writeCtx) supersede(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.state.CompareAndSwap(ctxLive, ctxSuperseded) {
		return
	}
	c.cause = cause
	if c.cancel != nil {
		c.cancel(cause)
	}
}

// finish ends the context as its write returns: context.Canceled, unless it
// was superseded first.
func (c *writeCtx) finish() {
	if !c.state.CompareAndSwap(ctxLive, ctxFinished) || !c.made.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel(nil)
}

func (c *writeCtx) Deadline() (time.Time, bool) { return c.parent.(context.Context).Deadline() }
func (c *writeCtx) Done() <-chan struct{}       { return c.ctx().Done() }
func (c *writeCtx) Err() error                  { return c.ctx().Err() }
func (c *writeCtx) Value(key any) any           { return c.ctx().Value(key) }
