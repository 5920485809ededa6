package fence_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
)

// fakeNow is a clock for Options.Now that moves only when told to.
type fakeNow struct{ ns atomic.Int64 }

func (c *fakeNow) now() time.Time          { return time.Unix(1_700_000_000, c.ns.Load()) }
func (c *fakeNow) advance(d time.Duration) { c.ns.Add(int64(d)) }

// running is a CommitContext write started on g that runs until release is
// called; ctx is the context the write got.
type running struct {
	ctx     context.Context
	release func()
	result  chan error
}

func startWrite(t *testing.T, g *fence.Gate, tk fence.Token) *running {
	t.Helper()
	got := make(chan context.Context, 1)
	rel := make(chan struct{})
	r := &running{release: func() { close(rel) }, result: make(chan error, 1)}
	go func() {
		r.result <- g.CommitContext(context.Background(), tk, func(ctx context.Context) error { got <- ctx; <-rel; return nil })
	}()
	select {
	case r.ctx = <-got:
	case err := <-r.result:
		t.Fatalf("write of %v did not start: %v", tk, err)
	}
	return r
}

// queue starts a CommitContext of tk that has to wait, and returns once it
// is queued (it asked its context for Done). ran is closed if its write runs.
func queue(t *testing.T, g *fence.Gate, ctx context.Context, tk fence.Token) (result chan error, ran chan struct{}) {
	t.Helper()
	asked := newAskedCtx(ctx)
	result, ran = make(chan error, 1), make(chan struct{})
	go func() {
		result <- g.CommitContext(asked, tk, func(context.Context) error { close(ran); return nil })
	}()
	select {
	case <-asked.asked:
	case err := <-result:
		t.Fatalf("CommitContext of %v returned %v without waiting", tk, err)
	}
	return result, ran
}

func superseded(t *testing.T, ctx context.Context, want fence.SupersededError) {
	t.Helper()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("the running write's context is not done")
	}
	var se *fence.SupersededError
	if cause := context.Cause(ctx); !errors.As(cause, &se) || *se != want || ctx.Err() != context.Canceled {
		t.Fatalf("cause %v (err %v), want %+v", cause, ctx.Err(), want)
	}
}

// within waits for ch to be closed, failing the test after a deadline far
// above this machine's noise rather than hanging.
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not after 30 s", what)
	}
}

func notDone(t *testing.T, ctx context.Context) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("the running write's context is done: %v (cause %v)", ctx.Err(), context.Cause(ctx))
	}
}

// An Admit of a newer fence while a CommitContext write runs cancels the
// write's context at once, with both holders, both fences and the resource;
// the write keeps running, and the gate waits for it.
func TestAdmitSupersedesRunningWrite(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	r := startWrite(t, g, tok("a", 1))
	notDone(t, r.ctx)
	must(t, g.Admit(tok("b", 2)))
	superseded(t, r.ctx, fence.SupersededError{Resource: "deploy-slot", HolderID: "a", Fence: 1, NewerHolderID: "b", NewerFence: 2})
	want := `fence: the write of holder "a" with fence 1 to "deploy-slot" is superseded: holder "b" with fence 2 was admitted`
	if got := context.Cause(r.ctx).Error(); got != want {
		t.Fatalf("message %q", got)
	}
	// A later, higher Admit does not change the cause: the first one decided.
	must(t, g.Admit(tok("c", 3)))
	superseded(t, r.ctx, fence.SupersededError{Resource: "deploy-slot", HolderID: "a", Fence: 1, NewerHolderID: "b", NewerFence: 2})
	// The gate still waits for the running write: c's write queues.
	res, ran := queue(t, g, context.Background(), tok("c", 3))
	select {
	case <-ran:
		t.Fatal("a write started while the superseded write was still running")
	default:
	}
	r.release()
	must(t, <-r.result)
	must(t, <-res)
}

// A newer write that waits for the running one, through CommitContext or
// Commit, supersedes it as it queues: it does not have to wait for its turn
// to tell the stale holder.
func TestWaitingNewerWriteSupersedesRunningWrite(t *testing.T) {
	for _, how := range []string{"CommitContext", "Commit"} {
		t.Run(how, func(t *testing.T) {
			g := newGate(t, "deploy-slot", 0)
			r := startWrite(t, g, tok("a", 1))
			done := make(chan error, 1)
			if how == "CommitContext" {
				res, _ := queue(t, g, context.Background(), tok("b", 2))
				go func() { done <- <-res }()
			} else {
				go func() { done <- g.Commit(tok("b", 2), nop) }()
			}
			within(t, r.ctx.Done(), "the running write's context") // the queued write cancels it
			superseded(t, r.ctx, fence.SupersededError{Resource: "deploy-slot", HolderID: "a", Fence: 1, NewerHolderID: "b", NewerFence: 2, NewerWaiting: true})
			if !strings.HasSuffix(context.Cause(r.ctx).Error(), `holder "b" with fence 2 waits for it to finish`) {
				t.Fatalf("message %q", context.Cause(r.ctx))
			}
			select {
			case err := <-done:
				t.Fatalf("the newer write returned %v while the superseded write ran", err)
			default:
			}
			r.release()
			must(t, <-r.result)
			must(t, <-done)
			if g.Floor() != 2 {
				t.Fatalf("floor %d", g.Floor())
			}
		})
	}
}

// The same generation never supersedes: an Admit or a waiting write with an
// equal fence (another holder's as well) leaves the running write's context
// alone, and so does an older fence (refused at once).
func TestEqualFenceNeverSupersedes(t *testing.T) {
	g, err := fence.NewGate("deploy-slot", fence.Options{Exclusive: true}) // equal fences queue
	must(t, err)
	must(t, g.Commit(tok("a", 5), nop))
	r := startWrite(t, g, tok("a", 5))
	must(t, g.Admit(tok("a", 5)))
	must(t, g.Admit(tok("z", 5)))
	res1, _ := queue(t, g, context.Background(), tok("a", 5))
	res2, _ := queue(t, g, context.Background(), tok("z", 5))
	checkErr(t, g.Commit(tok("old", 4), nop), "stale", nil)
	checkErr(t, g.Admit(tok("old", 4)), "stale", nil)
	checkErr(t, g.CommitContext(context.Background(), tok("old", 4), func(context.Context) error { return nil }), "stale", nil)
	notDone(t, r.ctx)
	r.release()
	must(t, <-r.result)
	must(t, <-res1)
	must(t, <-res2)
}

// Nothing is signalled once the write has returned: its context (kept past
// the write, as a leaked goroutine would) is cancelled plainly when the write
// returns, and a newer fence arriving after that does not make it a
// SupersededError.
func TestNoSignalAfterWriteReturned(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	var kept context.Context
	must(t, g.CommitContext(context.Background(), tok("a", 1), func(ctx context.Context) error { kept = ctx; return nil }))
	must(t, g.Admit(tok("b", 2)))
	must(t, g.CommitContext(context.Background(), tok("b", 2), func(context.Context) error { return nil }))
	if kept.Err() != context.Canceled || context.Cause(kept) != context.Canceled {
		t.Fatalf("err %v cause %v", kept.Err(), context.Cause(kept))
	}

	// The same for a context the write looked at while it ran.
	var looked context.Context
	must(t, g.CommitContext(context.Background(), tok("b", 2), func(ctx context.Context) error {
		looked = ctx
		if ctx.Err() != nil {
			t.Errorf("done while running: %v", ctx.Err())
		}
		return nil
	}))
	must(t, g.Admit(tok("c", 3)))
	if context.Cause(looked) != context.Canceled {
		t.Fatalf("cause %v", context.Cause(looked))
	}
}

// A write that starts while a newer fence is already waiting behind it gets
// its context already cancelled: A runs, B (fence 2) and C (fence 3) queue;
// when B's turn comes it is superseded by C before it writes a byte.
func TestWriteStartsSupersededWhenNewerWaits(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	rel, wait := holdGate(t, g, tok("a", 1))
	bCtx := make(chan context.Context, 1)
	bDone := make(chan error, 1)
	asked := newAskedCtx(context.Background())
	go func() {
		bDone <- g.CommitContext(asked, tok("b", 2), func(ctx context.Context) error { bCtx <- ctx; return nil })
	}()
	<-asked.asked
	cDone, _ := queue(t, g, context.Background(), tok("c", 3))
	rel()
	must(t, wait())
	must(t, <-bDone)
	superseded(t, <-bCtx, fence.SupersededError{Resource: "deploy-slot", HolderID: "b", Fence: 2, NewerHolderID: "c", NewerFence: 3, NewerWaiting: true})
	must(t, <-cDone)
}

// The write's context behaves as a standard one: children made from it and
// AfterFunc see the supersession, and it keeps its parent's deadline and
// values; a cancelled parent cancels it with the parent's cause.
func TestWriteContextIsStandard(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	deadline := time.Now().Add(time.Hour)
	parent, cancelParent := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, "v"), deadline)
	defer cancelParent()
	inside := make(chan struct{})
	rel := make(chan struct{})
	done := make(chan error, 1)
	var child context.Context
	afterFunc := make(chan struct{})
	go func() {
		done <- g.CommitContext(parent, tok("a", 1), func(ctx context.Context) error {
			if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) || ctx.Value(ctxKey{}) != "v" {
				t.Errorf("deadline %v %v, value %v", d, ok, ctx.Value(ctxKey{}))
			}
			var cancel context.CancelFunc
			child, cancel = context.WithTimeout(ctx, time.Hour)
			defer cancel()
			context.AfterFunc(ctx, func() { close(afterFunc) })
			close(inside)
			<-rel
			return nil
		})
	}()
	<-inside
	must(t, g.Admit(tok("b", 2)))
	within(t, child.Done(), "the child context")
	within(t, afterFunc, "AfterFunc")
	var se *fence.SupersededError
	if !errors.As(context.Cause(child), &se) || se.NewerFence != 2 {
		t.Fatalf("child's cause %v", context.Cause(child))
	}
	close(rel)
	must(t, <-done)

	// The parent's cancellation reaches the write with the parent's cause.
	stop := errors.New("shutting down")
	p2, cancel2 := context.WithCancelCause(context.Background())
	must(t, g.CommitContext(p2, tok("b", 2), func(ctx context.Context) error {
		cancel2(stop)
		<-ctx.Done()
		if context.Cause(ctx) != stop {
			t.Errorf("cause %v", context.Cause(ctx))
		}
		return nil
	}))
}

// A CommitContext that gives up waiting returns a *GateBusyError naming the
// running write's holder and fence and how long it has run, wrapping the
// context's error; it is not an anonymous context.Canceled.
func TestGateBusyErrorNamesRunningWrite(t *testing.T) {
	clk := &fakeNow{}
	g, err := fence.NewGate("deploy-slot", fence.Options{Now: clk.now})
	must(t, err)
	r := startWrite(t, g, tok("a", 5)) // found the gate free: its start is not read
	clk.advance(1500 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	res, ran := queue(t, g, ctx, tok("b", 6)) // the gate reads its clock now
	clk.advance(250 * time.Millisecond)
	cancel()
	err = <-res
	var busy *fence.GateBusyError
	if !errors.As(err, &busy) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	want := fence.GateBusyError{Resource: "deploy-slot", HolderID: "b", Fence: 6, RunningHolderID: "a", RunningFence: 5,
		Running: 250 * time.Millisecond, Err: context.Canceled}
	if busy.Resource != want.Resource || busy.HolderID != want.HolderID || busy.Fence != want.Fence || busy.RunningHolderID != want.RunningHolderID ||
		busy.RunningFence != want.RunningFence || busy.Running != want.Running || busy.Err != want.Err {
		t.Fatalf("got %+v", busy)
	}
	const msg = `fence: the write of holder "b" with fence 6 to "deploy-slot" gave up waiting for its turn (context canceled): ` +
		`holder "a" has been writing with fence 5 for at least 250ms`
	if err.Error() != msg {
		t.Fatalf("message %q", err)
	}
	select {
	case <-ran:
		t.Fatal("the write that gave up ran")
	default:
	}
	// Its supersession of the running write stands; the floor did not move.
	superseded(t, r.ctx, fence.SupersededError{Resource: "deploy-slot", HolderID: "a", Fence: 5, NewerHolderID: "b", NewerFence: 6, NewerWaiting: true})
	if g.Floor() != 5 || g.RejectionCount() != 0 {
		t.Fatalf("floor %d, %d rejections", g.Floor(), g.RejectionCount())
	}
	r.release()
	must(t, <-r.result)

	// A deadline that passes while it waits: errors.Is DeadlineExceeded.
	r = startWrite(t, g, tok("a", 5))
	// The deadline passes once the write is queued (a real 1 ms timeout
	// could pass before CommitContext is even called, on a busy machine).
	dctx := &expiringCtx{Context: context.Background(), done: make(chan struct{})}
	res, _ = queue(t, g, dctx, tok("b", 6))
	dctx.expire()
	if err := <-res; !errors.As(err, &busy) ||
		!errors.Is(err, context.DeadlineExceeded) || busy.RunningHolderID != "a" || busy.RunningFence != 5 {
		t.Fatalf("err = %v", err)
	}
	r.release()
	must(t, <-r.result)
}

// Behind a write that found the gate free (the gate reads no clock then),
// the time is counted from when the first write queued behind it, and the
// message says "at least"; behind a write that got its turn after waiting,
// from the moment it got it.
func TestGateBusyErrorTimes(t *testing.T) {
	clk := &fakeNow{}
	g, err := fence.NewGate("deploy-slot", fence.Options{Now: clk.now})
	must(t, err)
	must(t, g.Commit(tok("a", 5), nop)) // claims fence 5, so the next Commit takes the lock-free path
	rel, wait := holdGate(t, g, tok("a", 5))
	clk.advance(time.Hour) // unseen: the gate read no clock when a's write started
	ctx1, cancel1 := context.WithCancel(context.Background())
	res1, _ := queue(t, g, ctx1, tok("b", 6))
	clk.advance(2 * time.Second)

	// d queues too, with a write that blocks, and e behind it.
	dAsked := newAskedCtx(context.Background())
	dIn, dRel, dDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		dDone <- g.CommitContext(dAsked, tok("d", 8), func(context.Context) error { close(dIn); <-dRel; return nil })
	}()
	<-dAsked.asked
	ctx2, cancel2 := context.WithCancel(context.Background())
	res2, _ := queue(t, g, ctx2, tok("e", 9))

	clk.advance(time.Second)
	cancel1()
	var busy *fence.GateBusyError
	if err := <-res1; !errors.As(err, &busy) || busy.Running != 3*time.Second || busy.RunningHolderID != "a" || busy.RunningFence != 5 ||
		!strings.HasSuffix(err.Error(), `holder "a" has been writing with fence 5 for at least 3s`) {
		t.Fatalf("err = %v", err)
	}

	rel() // d gets its turn now
	must(t, wait())
	<-dIn
	clk.advance(700 * time.Millisecond)
	cancel2()
	if err := <-res2; !errors.As(err, &busy) || busy.Running != 700*time.Millisecond || busy.RunningHolderID != "d" || busy.RunningFence != 8 ||
		!strings.HasSuffix(err.Error(), `holder "d" has been writing with fence 8 for 700ms`) {
		t.Fatalf("err = %v", err)
	}
	close(dRel)
	must(t, <-dDone)
}

// expiringCtx is a context whose deadline passes when the test says so.
type expiringCtx struct {
	context.Context
	done    chan struct{}
	expired atomic.Bool
}

func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *expiringCtx) expire() { c.expired.Store(true); close(c.done) }

// Shared admission: writes with the floor's fence run together; a write
// with a higher fence that arrives waits for all of them and tells each one
// it is superseded; an old fence that arrives after it waits behind it and
// is refused when its turn comes.
func TestEqualFencesShareTheGate(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("a", 5), nop))
	var rs []*running
	for range 8 {
		rs = append(rs, startWrite(t, g, tok("a", 5))) // each starts while the others run
	}
	raise, raised := queue(t, g, context.Background(), tok("b", 6))
	for i, r := range rs {
		var sup *fence.SupersededError
		if !errors.As(context.Cause(r.ctx), &sup) || sup.NewerFence != 6 || sup.Fence != 5 || !sup.NewerWaiting {
			t.Fatalf("write %d: cause %v, want superseded by fence 6", i, context.Cause(r.ctx))
		}
	}
	late, lateRan := queue(t, g, context.Background(), tok("a", 5))
	for i, r := range rs {
		select {
		case <-raised:
			t.Fatalf("fence 6 ran while %d writes with fence 5 had not ended", len(rs)-i)
		default:
		}
		r.release()
		must(t, <-r.result)
	}
	must(t, <-raise)
	checkErr(t, <-late, "stale", nil)
	select {
	case <-lateRan:
		t.Fatal("fence 5 ran after fence 6")
	default:
	}
	if g.Floor() != 6 {
		t.Fatalf("floor %d", g.Floor())
	}
}
