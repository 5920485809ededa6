package sim

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// OpKind is the kind of a recorded operation.
type OpKind int

const (
	// OpAcquire is Coordinator.Acquire (POST /v1/acquire).
	OpAcquire OpKind = iota
	// OpRenew is Coordinator.Renew (POST /v1/renew).
	OpRenew
	// OpRelease is Coordinator.Release (POST /v1/release).
	OpRelease
)

// String returns "acquire", "renew" or "release".
func (k OpKind) String() string {
	switch k {
	case OpRenew:
		return "renew"
	case OpRelease:
		return "release"
	}
	return "acquire"
}

// OpInput is what a client asked (a release's RequestID is empty when the
// coordinator's API has none, as with lease.Coordinator), plus the bounds of the coordinator's clock
// around the call: the coordinator read its clock at some instant r with
// Lo <= r <= Hi. With a manual clock shared by the callers, Lo is a Peek
// before the call and Hi a Peek after it returned.
type OpInput struct {
	Kind      OpKind
	Resource  string
	Holder    string
	RequestID string // acquire and renew
	Fence     uint64 // renew and release
	Lo, Hi    float64
}

// OpOutput is the coordinator's answer as the client saw it.
type OpOutput struct {
	OK        bool    // granted (acquire, renew) or released (release)
	Fence     uint64  // of the grant
	ExpiresAt float64 // the grant's CoordinatorExpiresAt, coordinator millis
	HeldBy    string  // denial
	// RetryAfterMs is the denial's wait in milliseconds.
	RetryAfterMs float64
	Expired      bool   // renewal refused
	Err          string // any error: no sequential lease register answers with one
}

// InputOf describes a request (acquire or renew) for the history.
func InputOf(req lease.Request) OpInput {
	k := OpAcquire
	if req.Kind == lease.KindRenew {
		k = OpRenew
	}
	return OpInput{Kind: k, Resource: req.Resource, Holder: req.HolderID, RequestID: req.RequestID, Fence: req.Fence}
}

// ReleaseInputOf describes a release for the history.
func ReleaseInputOf(tok fence.Token) OpInput {
	return OpInput{Kind: OpRelease, Resource: tok.Resource, Holder: tok.HolderID, Fence: tok.Fence}
}

// OutputOf describes the answer to an acquire or renew for the history.
func OutputOf(out lease.Outcome, err error) OpOutput {
	switch {
	case err != nil:
		return OpOutput{Err: err.Error()}
	case out.OK:
		return OpOutput{OK: true, Fence: out.Grant.Fence, ExpiresAt: out.Grant.CoordinatorExpiresAt.Millis}
	case out.HeldBy != "":
		return OpOutput{HeldBy: out.HeldBy, RetryAfterMs: clock.Millis(out.RetryAfter)}
	case out.Reason == lease.Expired:
		return OpOutput{Expired: true}
	}
	return OpOutput{Err: fmt.Sprintf("unrecognised outcome %+v", out)}
}

// ReleaseOutputOf describes the answer to a release for the history.
func ReleaseOutputOf(ok bool, err error) OpOutput {
	if err != nil {
		return OpOutput{Err: err.Error()}
	}
	return OpOutput{OK: ok}
}

// History records concurrent operations for a linearizability check. Call
// and return stamps come from one counter, so the real-time order of
// operations is exact and no wall clock is involved. It is safe for
// concurrent use.
type History struct {
	peek  func() float64
	ticks atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewHistory returns an empty history. peek returns the coordinator clock's
// current reading without moving it (clock.Manual.Peek); it bounds when the
// coordinator could have processed each call.
func NewHistory(peek func() float64) *History { return &History{peek: peek} }

// Pending is an operation that has been called and not yet returned.
type Pending struct {
	h      *History
	client int
	in     OpInput
	call   int64
}

// Begin stamps the call of an operation by client (numbered from 0).
func (h *History) Begin(client int, in OpInput) *Pending {
	in.Lo = h.peek()
	return &Pending{h: h, client: client, in: in, call: h.ticks.Add(1)}
}

// End stamps the return of the operation with what it answered.
func (p *Pending) End(out OpOutput) {
	ret := p.h.ticks.Add(1)
	p.in.Hi = p.h.peek()
	p.h.mu.Lock()
	defer p.h.mu.Unlock()
	p.h.ops = append(p.h.ops, porcupine.Operation{ClientId: p.client, Input: p.in, Call: p.call, Output: out, Return: ret})
}

// Operations returns the recorded operations.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Recording wraps a coordinator so every call is recorded in a History.
type Recording struct {
	h      *History
	co     *lease.Coordinator
	client int
	// Yield, if set, runs after the call is stamped and before the return
	// is stamped, widening the window in which operations overlap (tests
	// pass runtime.Gosched).
	Yield func()
}

func (r *Recording) yield() {
	if r.Yield != nil {
		r.Yield()
	}
}

// Record returns a view of co whose calls by client are recorded in h.
func (h *History) Record(co *lease.Coordinator, client int) *Recording {
	return &Recording{h: h, co: co, client: client}
}

// Acquire calls the coordinator's Acquire (which reads its clock) and
// records it.
func (r *Recording) Acquire(req lease.Request) (lease.Outcome, error) {
	return r.call(r.co.Acquire, req)
}

// Renew calls the coordinator's Renew and records it.
func (r *Recording) Renew(req lease.Request) (lease.Outcome, error) {
	return r.call(r.co.Renew, req)
}

// call makes the call do(req) and records it.
func (r *Recording) call(do func(lease.Request) (lease.Outcome, error), req lease.Request) (lease.Outcome, error) {
	p := r.h.Begin(r.client, InputOf(req))
	r.yield()
	out, err := do(req)
	r.yield()
	p.End(OutputOf(out, err))
	return out, err
}

// Release calls the coordinator's Release and records it.
func (r *Recording) Release(tok fence.Token) (bool, error) {
	p := r.h.Begin(r.client, ReleaseInputOf(tok))
	r.yield()
	ok, err := r.co.Release(tok)
	r.yield()
	p.End(ReleaseOutputOf(ok, err))
	return ok, err
}

// register is the sequential state of one resource's lease.
type register struct {
	Has      bool
	Holder   string
	Fence    uint64
	Exp      float64 // current end of the lease, coordinator millis
	ReqID    string  // the request that minted Fence
	GrantExp float64 // the expiry in that first grant, which a replay repeats
	MaxFence uint64
	Last     float64 // the latest coordinator reading the history implies
	// Released lists the releases that ended a lease of this resource, in
	// the order they happened (see releasedKey). A coordinator that
	// remembers them (service/wire does, for a bounded number) answers a retry
	// of any of them, same request id, with ok again, whatever happened to
	// the resource since. A string keeps the register comparable.
	Released string
}

// releasedKey is one entry of register.Released, framed so that Contains
// matches whole entries only.
func releasedKey(in OpInput) string {
	return "\x01" + in.RequestID + "\x00" + in.Holder + "\x00" + strconv.FormatUint(in.Fence, 10) + "\x01"
}

// timeTolerance absorbs the rounding of RetryAfter to nanoseconds.
const timeTolerance = 1e-6

// LeaseModel is the sequential specification of a coordinator as a lease
// register per resource, for porcupine. Time is part of the state: every
// operation happened at one coordinator reading inside its [Lo, Hi], and
// readings never go backwards along the linearization. Where the answer
// reveals the reading (a grant's expiry minus the TTL, a denial's expiry
// minus its wait) the model uses it; otherwise it takes the earliest reading
// the answer allows, which constrains later operations least.
func LeaseModel(ttl time.Duration) porcupine.Model {
	ttlMs := clock.Millis(ttl)
	return porcupine.Model{
		Partition: partitionByResource,
		Init:      func() any { return register{} },
		Step: func(state, input, output any) (bool, any) {
			return step(ttlMs, state.(register), input.(OpInput), output.(OpOutput))
		},
		Equal: func(a, b any) bool { return a.(register) == b.(register) },
		DescribeOperation: func(input, output any) string {
			return describeOp(input.(OpInput), output.(OpOutput))
		},
		DescribeState: func(state any) string {
			s := state.(register)
			if !s.Has {
				return fmt.Sprintf("free (max fence %d, t>=%s)", s.MaxFence, clock.FormatMillis(s.Last))
			}
			return fmt.Sprintf("%s #%d until %s (req %s, t>=%s)", s.Holder, s.Fence, clock.FormatMillis(s.Exp), s.ReqID, clock.FormatMillis(s.Last))
		},
	}
}

func partitionByResource(history []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	for _, op := range history {
		r := op.Input.(OpInput).Resource
		by[r] = append(by[r], op)
	}
	out := make([][]porcupine.Operation, 0, len(by))
	for _, k := range slices.Sorted(maps.Keys(by)) {
		out = append(out, by[k])
	}
	return out
}

func step(ttl float64, s register, in OpInput, out OpOutput) (bool, register) {
	if out.Err != "" {
		return false, s
	}
	lo, hi := math.Max(in.Lo, s.Last), in.Hi
	inRange := func(t float64) bool { return t >= lo-timeTolerance && t <= hi+timeTolerance }
	liveAt := func(t float64) bool { return s.Has && t < s.Exp }
	matches := s.Has && s.Holder == in.Holder && s.Fence == in.Fence
	// earliestEnded is the earliest reading in range at which the lease
	// named by in is not current, or NaN if there is none.
	earliestEnded := func() float64 {
		t := lo
		if matches {
			t = math.Max(t, s.Exp)
		}
		if t > hi {
			return math.NaN()
		}
		return t
	}
	switch in.Kind {
	case OpAcquire:
		switch {
		case out.OK && s.Has && out.Fence == s.Fence:
			// A replay: the same request, answered with its first grant,
			// while that lease is current.
			if in.RequestID != s.ReqID || in.Holder != s.Holder || out.ExpiresAt != s.GrantExp || !(lo <= hi && liveAt(lo)) {
				return false, s
			}
			s.Last = lo
			return true, s
		case out.OK:
			t := out.ExpiresAt - ttl
			if !inRange(t) || liveAt(t) || out.Fence <= s.MaxFence {
				return false, s
			}
			return true, register{Has: true, Holder: in.Holder, Fence: out.Fence, Exp: out.ExpiresAt,
				ReqID: in.RequestID, GrantExp: out.ExpiresAt, MaxFence: out.Fence, Last: t,
				Released: s.Released}
		case out.HeldBy != "":
			t := s.Exp - out.RetryAfterMs
			if !s.Has || out.HeldBy != s.Holder || out.RetryAfterMs <= 0 || !inRange(t) ||
				(in.RequestID == s.ReqID && in.Holder == s.Holder) {
				return false, s
			}
			s.Last = math.Max(s.Last, t)
			return true, s
		}
	case OpRenew:
		switch {
		case out.OK:
			t := out.ExpiresAt - ttl
			if !matches || out.Fence != in.Fence || !inRange(t) || !liveAt(t) {
				return false, s
			}
			s.Exp, s.Last = out.ExpiresAt, t
			return true, s
		case out.Expired:
			t := earliestEnded()
			if math.IsNaN(t) {
				return false, s
			}
			s.Last = t
			return true, s
		}
	case OpRelease:
		if out.OK {
			if in.RequestID != "" && lo <= hi && strings.Contains(s.Released, releasedKey(in)) {
				s.Last = lo // a retry of a release that ended a lease
				return true, s
			}
			if !matches || lo > hi || !liveAt(lo) {
				return false, s
			}
			released := s.Released
			if in.RequestID != "" {
				released += releasedKey(in)
			}
			return true, register{MaxFence: s.MaxFence, Last: lo, Released: released}
		}
		t := earliestEnded()
		if math.IsNaN(t) {
			return false, s
		}
		s.Last = t
		return true, s
	}
	return false, s
}

func describeOp(in OpInput, out OpOutput) string {
	var ans string
	switch {
	case out.Err != "":
		ans = "error: " + out.Err
	case in.Kind == OpRelease:
		ans = fmt.Sprint(out.OK)
	case out.OK:
		ans = fmt.Sprintf("#%d until %s", out.Fence, clock.FormatMillis(out.ExpiresAt))
	case out.HeldBy != "":
		ans = fmt.Sprintf("held by %s for %sms", out.HeldBy, clock.FormatMillis(out.RetryAfterMs))
	case out.Expired:
		ans = "expired"
	}
	arg := in.Holder
	if in.Kind == OpAcquire {
		arg += " " + in.RequestID
	} else {
		arg += fmt.Sprintf(" #%d", in.Fence)
	}
	return fmt.Sprintf("%s(%s, %s) @[%s,%s] -> %s", in.Kind, in.Resource, arg,
		clock.FormatMillis(in.Lo), clock.FormatMillis(in.Hi), ans)
}

// ErrNotLinearizable is matched by the error CheckHistory returns for a
// history porcupine rejects.
var ErrNotLinearizable = errors.New("sim: history is not linearizable")

// CheckHistory checks ops against LeaseModel(ttl). When porcupine rejects the
// history (or cannot decide within timeout), it writes porcupine's HTML view
// to dir/<name>.html and returns an error naming that file. It returns the
// path it wrote, if any.
func CheckHistory(name, dir string, ttl time.Duration, ops []porcupine.Operation, timeout time.Duration) (string, error) {
	model := LeaseModel(ttl)
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if res == porcupine.Ok {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return "", fmt.Errorf("sim: history %s is %s, and its visualization failed: %w", name, res, err)
	}
	if res == porcupine.Illegal {
		return path, fmt.Errorf("%w: %s (%d operations); see %s", ErrNotLinearizable, name, len(ops), path)
	}
	return path, fmt.Errorf("sim: porcupine could not decide history %s (%d operations) within %v; see %s", name, len(ops), timeout, path)
}
