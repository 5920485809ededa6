// Package fence provides the resource side of a lease: a Gate that admits a
// write only if its fencing token is not older than the newest one it has
// admitted, and records every refusal.
//
// A fence is a generation number of ownership. A holder that stalled past the
// end of its lease still carries the fence of its generation; once a newer
// holder has written, the gate refuses the stale one with a *StaleFenceError
// and appends the refusal to its rejections log, the only evidence anywhere
// that two holders overlapped.
package fence

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MaxFence is the highest fence a gate accepts: 2^53-1, the largest integer
// a JavaScript number holds exactly, and the highest fence a coordinator
// issues. A larger fence can only be forged or corrupted, and admitting it
// would raise the floor past every fence a coordinator can ever issue, locking
// the resource for good; it is refused as invalid input instead.
const MaxFence uint64 = 1<<53 - 1

// MaxIDBytes is the longest resource name or holder id a gate accepts, in
// bytes: the bound the wire protocol puts on every string. Together with the
// bounded rejections log it caps what a loop of refusals can keep in memory.
const MaxIDBytes = 1024

// DefaultMaxRejections is how many refusals a gate keeps when
// Options.MaxRejections is zero.
const DefaultMaxRejections = 1000

// MaxMaxRejections is the largest Options.MaxRejections a gate accepts.
const MaxMaxRejections = 1 << 20

// MaxRejectionsPage is the largest page of refusals a gate in a database
// reads at once (sqlfence's and redisfence's RejectionsAfter; the limit of
// lease-fence/sql's and lease-fence/redis's rejections).
//
// These four limits are written here only: scripts/gate-texts.mjs reads
// them from this file for the JavaScript gates (wasm/js/gate-texts.mjs).
const MaxRejectionsPage = 10000

// Token is what a holder presents with a write: the resource, who holds it and
// the fence of the generation it holds.
type Token struct {
	Resource string
	HolderID string
	Fence    uint64
}

// String formats t as "holder"@"resource"#fence.
func (t Token) String() string {
	return strconv.Quote(t.HolderID) + "@" + strconv.Quote(t.Resource) + "#" + strconv.FormatUint(t.Fence, 10)
}

// Validate reports whether t is well formed: a resource and a holder of 1 to
// MaxIDBytes bytes, and a fence from 1 (coordinators never issue fence 0) to
// MaxFence.
func (t Token) Validate() error {
	switch {
	case t.Resource == "":
		return &ArgumentError{Pkg: "fence", Arg: "token.resource", Reason: "must not be empty"}
	case len(t.Resource) > MaxIDBytes:
		return &ArgumentError{Pkg: "fence", Arg: "token.resource", Reason: "must be at most " + strconv.Itoa(MaxIDBytes) + " bytes"}
	case t.HolderID == "":
		return &ArgumentError{Pkg: "fence", Arg: "token.holderId", Reason: "must not be empty"}
	case len(t.HolderID) > MaxIDBytes:
		return &ArgumentError{Pkg: "fence", Arg: "token.holderId", Reason: "must be at most " + strconv.Itoa(MaxIDBytes) + " bytes"}
	case t.Fence == 0:
		return &ArgumentError{Pkg: "fence", Arg: "token.fence", Reason: "must be at least 1"}
	case t.Fence > MaxFence:
		return &ArgumentError{Pkg: "fence", Arg: "token.fence", Reason: "must be at most " + strconv.FormatUint(MaxFence, 10)}
	}
	return nil
}

// Rejection is one entry of a gate's rejections log.
type Rejection struct {
	Seq              uint64 // 1 for the gate's first refusal, then 2, 3, ...
	Resource         string
	RefusedHolderID  string
	RefusedFence     uint64
	AdmittedHolderID string // holder of the floor; empty if the floor came from InitialFloor
	AdmittedFence    uint64 // the floor at the moment of refusal
}

// Options configures a Gate.
type Options struct {
	// InitialFloor is the lowest fence the gate admits before it has seen any
	// token. Set it to a persisted floor so a restarted resource keeps
	// refusing the generations it had already superseded. At most MaxFence.
	InitialFloor uint64

	// MaxRejections is how many of the most recent refusals the log keeps:
	// 1 to MaxMaxRejections, or 0 for DefaultMaxRejections (1000). Older
	// entries are dropped; RejectionCount keeps counting all of them.
	MaxRejections int

	// Now is the clock the gate reads to tell how long a running write has
	// run (GateBusyError.Running), and for nothing else; nil means the
	// monotonic clock. The gate reads it only when a write gets its turn
	// after waiting, when a write queues behind another, and when a waiting
	// write gives up: never on the path of a write that finds the gate free.
	Now func() time.Time

	// Exclusive runs writes one at a time whatever their fences, as a gate
	// did before shared admission: a write with the floor's fence then
	// waits for a running write with the same fence. By default such
	// writes run together (shared admission).
	Exclusive bool
}

// Gate stands in front of one resource. Commit (a synchronous write) and
// CommitContext (a write that waits, or does I/O, under a context) are the
// methods most callers want. A Gate must be created with NewGate; it is safe
// for concurrent use. The zero Gate, and a nil *Gate, refuse every call with
// an *ArgumentError.
//
// Writes with the same fence run together (shared admission): a write
// whose fence equals that of the running writes joins them at once, unless
// a write with a higher fence already waits. A write with a higher fence
// waits until every running write has finished, then raises the floor and
// runs (exclusive admission). This holds whichever of Commit and
// CommitContext starts them. A write's fence is checked against the floor
// when its turn comes, and the floor is raised to it before the write runs,
// so once a fence is admitted no write with a lower fence runs or starts.
// With Options.Exclusive, writes run one at a time whatever their fences.
//
// A running CommitContext write is told when a newer fence reaches the gate
// (its context is cancelled with a *SupersededError), but the gate still
// waits for it to finish: a write that has started cannot be stopped from
// outside, and letting the next one in before it ends would let two writes
// overlap.
type Gate struct {
	resource  string
	maxRej    int
	exclusive bool
	// elapsed reads Options.Now as a duration since its first reading. No
	// field of a Gate holds a time.Time: a program that keeps a *Gate in an
	// interface (the wasm bridge does) would link in every method of the
	// types of its fields, and time.Time's String with them (about 90 KB
	// of time formatting in the wasm).
	elapsed func() time.Duration

	floor   atomic.Uint64 // highest fence admitted; written only under mu
	claimed atomic.Bool   // a token has been admitted at the current floor

	turn  atomic.Uint64 // the write lock (turn.go); shared by Commit and CommitContext
	ready bool          // made by NewGate

	mu          sync.Mutex // guards the fields below, raises of floor and the write lock's slow paths
	floorHolder string
	prevFence   uint64      // the floor before the last raise
	prevHolder  string      // and its holder
	ring        []Rejection // the most recent refusals; ring[count%maxRej] is the next slot
	count       uint64      // refusals so far
	waiters     []*waiter   // writes waiting for their turn, first come first served
	run         running     // the running write, as far as the gate knows it
	// joined are the writes that share the turn with the running one
	// (shared admission: the same fence) and have not ended, one entry
	// each: the context of a CommitContext write, nil for a Commit. The
	// turn ends when the running write and all of them have ended.
	joined []*writeCtx

	// freeCtx is the context of a running CommitContext write that took the
	// gate by the lock-free path (nil otherwise): published after it took
	// the lock, read under mu by whoever supersedes it.
	freeCtx atomic.Pointer[writeCtx]
}

var errNoGate = &ArgumentError{Pkg: "fence", Arg: "gate", Reason: "is nil or was not created with NewGate"}

// NewGate returns a gate for resource.
func NewGate(resource string, opts Options) (*Gate, error) {
	switch {
	case resource == "":
		return nil, &ArgumentError{Pkg: "fence", Arg: "resource", Reason: "must not be empty"}
	case len(resource) > MaxIDBytes:
		return nil, &ArgumentError{Pkg: "fence", Arg: "resource", Reason: "must be at most " + strconv.Itoa(MaxIDBytes) + " bytes"}
	case opts.InitialFloor > MaxFence:
		return nil, &ArgumentError{Pkg: "fence", Arg: "options.initialFloor", Reason: "must be at most " + strconv.FormatUint(MaxFence, 10)}
	case opts.MaxRejections < 0 || opts.MaxRejections > MaxMaxRejections:
		return nil, &ArgumentError{Pkg: "fence", Arg: "options.maxRejections", Reason: "must be from 1 to " + strconv.Itoa(MaxMaxRejections) + ", or 0 for the default"}
	}
	g := &Gate{resource: resource, maxRej: opts.MaxRejections, exclusive: opts.Exclusive, ready: true}
	if g.maxRej == 0 {
		g.maxRej = DefaultMaxRejections
	}
	g.elapsed = elapsedSince(opts.Now)
	g.floor.Store(opts.InitialFloor)
	return g, nil
}

// Resource returns the resource the gate guards ("" for a nil or zero Gate).
func (g *Gate) Resource() string {
	if g == nil {
		return ""
	}
	return g.resource
}

// Floor returns the highest fence the gate has admitted (or its initial floor).
func (g *Gate) Floor() uint64 {
	if g == nil {
		return 0
	}
	return g.floor.Load()
}

// MaxRejections returns how many refusals the log keeps.
func (g *Gate) MaxRejections() int {
	if g == nil {
		return 0
	}
	return g.maxRej
}

// Rejections returns a copy of the most recent refusals (at most
// MaxRejections of them), oldest first. Their Seq numbers tell how many older
// ones were dropped. It costs O(MaxRejections), however many refusals there
// have been.
func (g *Gate) Rejections() []Rejection {
	if g == nil || g.maxRej == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ring) < g.maxRej {
		return append([]Rejection(nil), g.ring...)
	}
	at := int(g.count % uint64(g.maxRej))
	out := make([]Rejection, 0, len(g.ring))
	out = append(out, g.ring[at:]...)
	return append(out, g.ring[:at]...)
}

// RejectionCount returns the number of refusals so far, including those the
// log no longer keeps. It equals the Seq of the newest rejection.
func (g *Gate) RejectionCount() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return int(g.count)
}

// Commit runs write if tok's fence is not below the floor, as one step with
// the check. The floor is raised to tok's fence before write runs and stays
// raised whatever write returns or panics, because the resource may already
// hold part of the newer write. A stale token is refused with a
// *StaleFenceError, appended to the rejections log, and write does not run.
// Otherwise Commit returns what write returns.
//
// While another write runs on the gate, a Commit with an older fence is
// refused at once; one with the same or a newer fence waits for its turn and
// is checked again then, so a token that became stale while it waited is
// refused. A Commit with a newer fence that waits tells a running
// CommitContext write it is superseded. Calling Commit with the same or a
// newer fence from inside write deadlocks. Use CommitContext when the wait
// must be bounded.
func (g *Gate) Commit(tok Token, write func() error) error {
	if write == nil {
		return &ArgumentError{Pkg: "fence", Arg: "write", Reason: "must not be nil"}
	}
	if err := g.precheck(tok); err != nil {
		return err
	}
	// The common case, a holder writing again at the floor it claimed while
	// nothing else runs, takes the lock with one compare-and-swap: the
	// write's holder is then the floor's, so it needs no record.
	f := tok.Fence
	if f != g.floor.Load() || !g.claimed.Load() || !g.turn.CompareAndSwap(0, f<<2|lockHeld) {
		_ = g.lockSlow(tok, nil, nil) // waits for as long as it takes
	}
	defer g.unlock(f, nil)
	if err := g.raise(tok); err != nil {
		return err
	}
	return write()
}

// CommitContext is Commit for a write that takes a context: one that does I/O
// or waits. It gives the same guarantees as Commit and shares its write lock,
// so writes through Commit and CommitContext on one gate run one at a time.
//
// While CommitContext waits for the running write to finish, it honours ctx:
// if ctx is already done when called, it returns ctx.Err(); if ctx is done
// while it waits, it returns a *GateBusyError that names the running write
// (holder, fence, how long it has run) and wraps ctx.Err(). Either way write
// does not run, nothing is logged and the floor does not move. A
// CommitContext with a newer fence that has to wait tells a running
// CommitContext write with a lower fence that it is superseded.
//
// Once its turn comes the token is checked against the floor, which is
// raised before write runs. write gets a context derived from ctx (same
// values and deadline) that is also cancelled, with a *SupersededError as
// its context.Cause, as soon as a newer fence reaches the gate while write
// runs: Admit raises the floor past it, or a Commit or CommitContext with a
// higher fence passes its check and waits for this write to finish (also
// one that was already waiting when this write started). The gate still
// waits for write to return before the next write starts: the signal asks
// the stale write to stop early, it does not stop it. An equal fence (the
// same generation) never supersedes, and nothing is signalled once write
// has returned; that context is then cancelled with context.Canceled, as an
// http.Request's is when its handler returns. CommitContext returns what
// write returns.
func (g *Gate) CommitContext(ctx context.Context, tok Token, write func(context.Context) error) error {
	switch {
	case ctx == nil:
		return &ArgumentError{Pkg: "fence", Arg: "ctx", Reason: "must not be nil"}
	case write == nil:
		return &ArgumentError{Pkg: "fence", Arg: "write", Reason: "must not be nil"}
	}
	if err := g.check(tok); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.precheck(tok); err != nil {
		return err
	}
	wc := &writeCtx{parent: ctx}
	f := tok.Fence
	free := false
	// The common case takes the lock-free path Commit takes, and then
	// publishes its context; a write that queued, or an Admit that raised
	// the floor, in between (they set lockSlow first) is caught up with.
	if f == g.floor.Load() && g.claimed.Load() && g.turn.CompareAndSwap(0, f<<2|lockHeld) {
		free = true
		if testHookLockFree != nil {
			testHookLockFree()
		}
		g.freeCtx.Store(wc)
		if g.turn.Load()&lockSlow != 0 {
			g.mu.Lock()
			g.catchUp(f)
			g.mu.Unlock()
		}
	} else if err := g.lockSlow(tok, wc, ctx); err != nil {
		return err
	}
	defer func() {
		wc.finish() // first: nothing is signalled once write has returned
		if free {
			g.freeCtx.Store(nil)
		}
		g.unlock(f, wc)
	}()
	if err := g.raise(tok); err != nil {
		return err
	}
	return write(wc)
}

// Admit raises the floor to tok's fence without writing, so a coordinator can
// push a new generation to the resource at reassignment and the old holder is
// refused even before the new one writes. A token below the floor is refused
// and logged like a stale write. Admit does not wait for a running write (it
// has already started): a running CommitContext write with a lower fence is
// told it is superseded, and writes still waiting are checked against the
// raised floor when their turn comes.
func (g *Gate) Admit(tok Token) error {
	if err := g.check(tok); err != nil {
		return err
	}
	return g.raise(tok)
}

// WouldAdmit reports whether a Commit with tok would pass the floor check at
// this instant. It is advisory: the answer may be stale by the time a write
// happens, so never branch a write on it.
func (g *Gate) WouldAdmit(tok Token) (bool, error) {
	if err := g.check(tok); err != nil {
		return false, err
	}
	return tok.Fence >= g.floor.Load(), nil
}

func (g *Gate) check(tok Token) error {
	if g == nil || !g.ready {
		return errNoGate
	}
	if tok.Resource != g.resource {
		if err := tok.Validate(); err != nil {
			return err
		}
		return &ResourceMismatchError{Gate: g.resource, Token: tok.Resource}
	}
	if tok.HolderID == "" || tok.Fence == 0 || tok.Fence > MaxFence || len(tok.HolderID) > MaxIDBytes {
		return tok.Validate()
	}
	return nil
}

// precheck validates tok and refuses it at once if it is already below the
// floor (as it is when an older fence arrives while a newer write runs).
func (g *Gate) precheck(tok Token) error {
	if err := g.check(tok); err != nil {
		return err
	}
	if tok.Fence < g.floor.Load() {
		return g.refuse(tok)
	}
	return nil
}

// raise refuses tok if it is below the floor, and otherwise raises the floor
// to it. The common case, a holder writing again at the current floor, takes
// no lock.
func (g *Gate) raise(tok Token) error {
	if tok.Fence == g.floor.Load() && g.claimed.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch floor := g.floor.Load(); {
	case tok.Fence < floor:
		return g.refuseLocked(tok)
	case tok.Fence > floor:
		// Admit raising the floor past a running write: record that write
		// (while its holder is still the floor's) and tell it.
		past := false
		if s := g.turn.Load(); s != 0 && s>>2 < tok.Fence {
			past = g.pastRunning(tok.Fence)
		}
		g.prevFence, g.prevHolder = floor, g.floorHolder
		g.floor.Store(tok.Fence)
		g.floorHolder = tok.HolderID
		g.claimed.Store(true)
		if past {
			g.supersede(tok.HolderID, tok.Fence, false)
		}
	case !g.claimed.Load():
		// Equal to an initial floor nobody has claimed yet.
		g.floorHolder = tok.HolderID
		g.claimed.Store(true)
	}
	return nil
}

// elapsedSince returns a clock of durations since its first reading of now,
// which must be called under the gate's mu (it keeps that first reading
// unguarded). A nil now is the monotonic clock: time.Now would read the wall
// clock as well, and the gate only subtracts its readings.
func elapsedSince(now func() time.Time) func() time.Duration {
	if now == nil {
		base := time.Now()
		return func() time.Duration { return time.Since(base) }
	}
	var base time.Time
	started := false
	return func() time.Duration {
		t := now()
		if !started {
			base, started = t, true
		}
		return t.Sub(base)
	}
}

// testHookLockFree, when set by a test, runs between CommitContext taking
// the gate by the lock-free path and publishing its context.
var testHookLockFree func()

// pastRunning reports, under mu, whether a write with a fence below f is
// running, and makes sure g.run describes it.
func (g *Gate) pastRunning(f uint64) bool {
	for {
		s := g.turn.Load()
		if s == 0 || s>>2 >= f {
			return false
		}
		if s&lockSlow != 0 || g.turn.CompareAndSwap(s, s|lockSlow) {
			g.describeRunning()
			return true
		}
	}
}

func (g *Gate) refuse(tok Token) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refuseLocked(tok)
}

func (g *Gate) refuseLocked(tok Token) error {
	g.count++
	r := Rejection{
		Seq:              g.count,
		Resource:         g.resource,
		RefusedHolderID:  tok.HolderID,
		RefusedFence:     tok.Fence,
		AdmittedHolderID: g.floorHolder,
		AdmittedFence:    g.floor.Load(),
	}
	if len(g.ring) < g.maxRej {
		g.ring = append(g.ring, r)
	} else {
		g.ring[(g.count-1)%uint64(g.maxRej)] = r
	}
	return &StaleFenceError{Rejection: r}
}
