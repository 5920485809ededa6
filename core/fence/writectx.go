package fence

import (
	"context"
	"sync"
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

	mu     sync.Mutex
	inner  any // made on first use
	cancel context.CancelCauseFunc
	ended  bool
	cause  error
}

func (c *writeCtx) ctx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		var inner context.Context
		inner, c.cancel = context.WithCancelCause(c.parent.(context.Context))
		c.inner = inner
		if c.ended {
			c.cancel(c.cause)
		}
	}
	return c.inner.(context.Context)
}

// end cancels the context with cause (nil: context.Canceled). The first call
// decides the cause.
func (c *writeCtx) end(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended, c.cause = true, cause
	if c.cancel != nil {
		c.cancel(cause)
	}
}

func (c *writeCtx) Deadline() (time.Time, bool) { return c.parent.(context.Context).Deadline() }
func (c *writeCtx) Done() <-chan struct{}       { return c.ctx().Done() }
func (c *writeCtx) Err() error                  { return c.ctx().Err() }
func (c *writeCtx) Value(key any) any           { return c.ctx().Value(key) }
