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
	"strconv"
	"sync"
	"sync/atomic"
)

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

// Validate reports whether t is well formed: non-empty resource and holder,
// and a fence of at least 1 (coordinators never issue fence 0).
func (t Token) Validate() error {
	switch {
	case t.Resource == "":
		return &ArgumentError{Pkg: "fence", Arg: "token.resource", Reason: "must not be empty"}
	case t.HolderID == "":
		return &ArgumentError{Pkg: "fence", Arg: "token.holderId", Reason: "must not be empty"}
	case t.Fence == 0:
		return &ArgumentError{Pkg: "fence", Arg: "token.fence", Reason: "must be at least 1"}
	}
	return nil
}

// Rejection is one entry of a gate's rejections log.
type Rejection struct {
	Seq            uint64 // 1 for the gate's first refusal, then 2, 3, ...
	Resource       string
	RefusedHolder  string
	RefusedFence   uint64
	AdmittedHolder string // holder of the floor; empty if the floor came from InitialFloor
	AdmittedFence  uint64 // the floor at the moment of refusal
}

// Options configures a Gate.
type Options struct {
	// InitialFloor is the lowest fence the gate admits before it has seen any
	// token. Set it to a persisted floor so a restarted resource keeps
	// refusing the generations it had already superseded.
	InitialFloor uint64
}

// Gate stands in front of one resource. Commit is the method most callers
// want. A Gate must be created with NewGate; it is safe for concurrent use.
//
// The check and the write are one step: a Commit raises the floor to its
// fence, then runs its write while holding the gate's write lock, checking
// the floor once more under that lock. A write never runs while another
// write is running, and never after a write with a higher fence began.
type Gate struct {
	resource string

	floor   atomic.Uint64 // highest fence admitted; written only under mu
	claimed atomic.Bool   // a token has been admitted at the current floor
	writeMu sync.Mutex    // held while a write callback runs

	mu          sync.Mutex // guards the fields below and raises of floor
	floorHolder string
	rejections  []Rejection
}

// NewGate returns a gate for resource.
func NewGate(resource string, opts Options) (*Gate, error) {
	if resource == "" {
		return nil, &ArgumentError{Pkg: "fence", Arg: "resource", Reason: "must not be empty"}
	}
	g := &Gate{resource: resource}
	g.floor.Store(opts.InitialFloor)
	return g, nil
}

// Resource returns the resource the gate guards.
func (g *Gate) Resource() string { return g.resource }

// Floor returns the highest fence the gate has admitted (or its initial floor).
func (g *Gate) Floor() uint64 { return g.floor.Load() }

// Rejections returns a copy of the rejections log, oldest first.
func (g *Gate) Rejections() []Rejection {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Rejection(nil), g.rejections...)
}

// RejectionCount returns the number of refusals so far.
func (g *Gate) RejectionCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.rejections)
}

// Commit runs write if tok's fence is not below the floor, as one step with
// the check. The floor is raised to tok's fence before write runs and stays
// raised whatever write returns or panics, because the resource may already
// hold part of the newer write. A stale token is refused with a
// *StaleFenceError, appended to the rejections log, and write does not run.
// Otherwise Commit returns what write returns.
//
// Inside write, a Commit to the same gate with an older fence is refused at
// once. A Commit with the same or a newer fence waits for write to return, so
// calling it from inside write on the same goroutine deadlocks.
func (g *Gate) Commit(tok Token, write func() error) error {
	if write == nil {
		return &ArgumentError{Pkg: "fence", Arg: "write", Reason: "must not be nil"}
	}
	if err := g.check(tok); err != nil {
		return err
	}
	if err := g.raise(tok); err != nil {
		return err
	}
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	if tok.Fence < g.floor.Load() {
		// A newer holder raised the floor while this commit waited its turn.
		return g.refuse(tok)
	}
	return write()
}

// Admit raises the floor to tok's fence without writing, so a coordinator can
// push a new generation to the resource at reassignment and the old holder is
// refused even before the new one writes. A token below the floor is refused
// and logged like a stale write.
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
	if tok.Resource != g.resource {
		if err := tok.Validate(); err != nil {
			return err
		}
		return &ResourceMismatchError{Gate: g.resource, Token: tok.Resource}
	}
	if tok.HolderID == "" || tok.Fence == 0 {
		return tok.Validate()
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
		g.floor.Store(tok.Fence)
		g.floorHolder = tok.HolderID
		g.claimed.Store(true)
	case !g.claimed.Load():
		// Equal to an initial floor nobody has claimed yet.
		g.floorHolder = tok.HolderID
		g.claimed.Store(true)
	}
	return nil
}

func (g *Gate) refuse(tok Token) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refuseLocked(tok)
}

func (g *Gate) refuseLocked(tok Token) error {
	r := Rejection{
		Seq:            uint64(len(g.rejections)) + 1,
		Resource:       g.resource,
		RefusedHolder:  tok.HolderID,
		RefusedFence:   tok.Fence,
		AdmittedHolder: g.floorHolder,
		AdmittedFence:  g.floor.Load(),
	}
	g.rejections = append(g.rejections, r)
	return &StaleFenceError{Rejection: r}
}
