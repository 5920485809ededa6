package fence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
)

// askedCtx reports, by closing asked, the first time someone waits on it:
// CommitContext asks for Done only once it is queued behind a running write.
type askedCtx struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func newAskedCtx(parent context.Context) *askedCtx {
	return &askedCtx{Context: parent, asked: make(chan struct{})}
}

func (c *askedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// holdGate starts a write on g with tok that runs until the returned release
// is called; it returns once the write is running. wait returns its result.
func holdGate(t *testing.T, g *fence.Gate, tk fence.Token) (release func(), wait func() error) {
	t.Helper()
	inside := make(chan struct{})
	rel := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- g.Commit(tk, func() error { close(inside); <-rel; return nil })
	}()
	<-inside
	return func() { close(rel) }, func() error { return <-done }
}

type ctxKey struct{}

func TestCommitContextOrdering(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	ctx := context.WithValue(context.Background(), ctxKey{}, "parent's value")
	steps := []struct {
		tok     fence.Token
		fail    error
		want    string
		floor   uint64
		log     int
		wantRan bool
	}{
		{tok("a", 1), nil, "", 1, 0, true},
		{tok("b", 2), nil, "", 2, 0, true},
		{tok("a", 1), nil, "stale", 2, 1, false},
		{tok("c", 3), errWrite, "", 3, 1, true},
		{tok("b", 2), nil, "stale", 3, 2, false},
		{tok("c", 3), nil, "", 3, 2, true},
	}
	for i, s := range steps {
		ran := false
		var got context.Context
		err := g.CommitContext(ctx, s.tok, func(c context.Context) error { ran = true; got = c; return s.fail })
		checkErr(t, err, s.want, s.fail)
		if ran != s.wantRan || g.Floor() != s.floor || g.RejectionCount() != s.log {
			t.Fatalf("step %d: ran %v floor %d log %d", i, ran, g.Floor(), g.RejectionCount())
		}
		// The write's context carries the parent's values, and is cancelled
		// (plainly: nothing superseded it) once the write has returned.
		if ran && (got.Value(ctxKey{}) != "parent's value" || got.Err() != context.Canceled || context.Cause(got) != context.Canceled) {
			t.Fatalf("step %d: write's context has value %v, err %v, cause %v", i, got.Value(ctxKey{}), got.Err(), context.Cause(got))
		}
	}
	var se *fence.StaleFenceError
	if err := g.CommitContext(ctx, tok("a", 1), func(context.Context) error { return nil }); !errors.As(err, &se) ||
		se.AdmittedHolderID != "c" || se.AdmittedFence != 3 || se.RefusedHolderID != "a" || se.Seq != 3 {
		t.Fatalf("err = %v", err)
	}
}

func TestCommitContextBadInput(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("a", 3), nop))
	ran := false
	write := func(context.Context) error { ran = true; return nil }
	cases := []struct {
		name  string
		ctx   context.Context
		tok   fence.Token
		write func(context.Context) error
		text  string
	}{
		{"NilContext", nil, tok("a", 3), write, "ctx must not be nil"},
		{"NilWrite", context.Background(), tok("a", 3), nil, "write must not be nil"},
		{"EmptyHolder", context.Background(), fence.Token{Resource: "deploy-slot", Fence: 3}, write, "token.holderId"},
		{"FenceAboveMax", context.Background(), tok("a", fence.MaxFence+1), write, "token.fence must be at most 9007199254740991"},
		{"OtherResource", context.Background(), fence.Token{Resource: "db", HolderID: "a", Fence: 3}, write, `"db"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snap(g)
			err := g.CommitContext(tc.ctx, tc.tok, tc.write)
			var ia interface{ InvalidArgument() bool }
			if !errors.As(err, &ia) || !ia.InvalidArgument() || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want an argument error naming %q", err, tc.text)
			}
			if ran {
				t.Fatal("write ran")
			}
			sameSnapshot(t, before, snap(g))
		})
	}
}

// An already-cancelled context is refused before anything else happens, even
// for a token that would be stale: nothing is logged, the floor stays.
func TestCommitContextAlreadyDone(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("b", 2), nop))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time0())
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		tok  fence.Token
		want error
	}{
		{cancelled, tok("c", 3), context.Canceled},
		{cancelled, tok("a", 1), context.Canceled},
		{expired, tok("c", 3), context.DeadlineExceeded},
	} {
		before := snap(g)
		ran := false
		err := g.CommitContext(tc.ctx, tc.tok, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, tc.want) || ran {
			t.Fatalf("err = %v ran = %v, want %v", err, ran, tc.want)
		}
		sameSnapshot(t, before, snap(g))
	}
}

// While it waits for the running write, CommitContext gives up when its
// context is cancelled: the write never runs, nothing is logged, the floor
// does not move, and the gate keeps working.
func TestCommitContextCancelledWhileWaiting(t *testing.T) {
	for _, running := range []string{"Commit", "CommitContext"} {
		t.Run("Behind"+running, func(t *testing.T) {
			g := newGate(t, "deploy-slot", 0)
			inside := make(chan struct{})
			release := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				hold := func() error { close(inside); <-release; return nil }
				if running == "Commit" {
					done <- g.Commit(tok("a", 1), hold)
				} else {
					done <- g.CommitContext(context.Background(), tok("a", 1), func(context.Context) error { return hold() })
				}
			}()
			<-inside
			before := snap(g)
			parent, cancel := context.WithCancel(context.Background())
			ctx := newAskedCtx(parent)
			waited := make(chan error, 1)
			ran := atomic.Bool{}
			go func() {
				waited <- g.CommitContext(ctx, tok("b", 5), func(context.Context) error { ran.Store(true); return nil })
			}()
			select {
			case <-ctx.asked: // queued behind the running write
			case err := <-waited:
				t.Fatalf("CommitContext returned %v without waiting for the running write", err)
			}
			cancel()
			if err := <-waited; !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if ran.Load() {
				t.Fatal("cancelled write ran")
			}
			sameSnapshot(t, before, snap(g))
			if g.Floor() != 1 {
				t.Fatalf("floor = %d", g.Floor())
			}
			close(release)
			must(t, <-done)
			// The gate is free again, for both kinds of commit.
			must(t, g.CommitContext(context.Background(), tok("b", 5), func(context.Context) error { return nil }))
			must(t, g.Commit(tok("b", 5), nop))
			checkErr(t, g.Commit(tok("a", 1), nop), "stale", nil)
		})
	}
}

// A CommitContext that waited while a newer fence wrote is refused when its
// turn comes, and logged.
func TestCommitContextStaleWhenItsTurnComes(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	release, wait := holdGate(t, g, tok("a", 1))
	ctx := newAskedCtx(context.Background())
	res := make(chan error, 1)
	go func() {
		res <- g.CommitContext(ctx, tok("b", 2), func(context.Context) error { t.Error("stale write ran"); return nil })
	}()
	select {
	case <-ctx.asked:
	case err := <-res:
		t.Fatalf("CommitContext returned %v without waiting for the running write", err)
	}
	must(t, g.Admit(tok("c", 3))) // the floor moves while b waits
	release()
	must(t, wait())
	var se *fence.StaleFenceError
	if err := <-res; !errors.As(err, &se) || se.RefusedFence != 2 || se.AdmittedFence != 3 || se.AdmittedHolderID != "c" {
		t.Fatalf("err = %v", err)
	}
	if g.RejectionCount() != 1 {
		t.Fatalf("%d rejections", g.RejectionCount())
	}
}

// An older fence arriving while a newer write runs is refused at once, not
// queued: this returns without the running write finishing.
func TestCommitContextOlderFenceRefusedAtOnce(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("a", 1), nop))
	release, wait := holdGate(t, g, tok("b", 2))
	checkErr(t, g.CommitContext(context.Background(), tok("a", 1), func(context.Context) error { return nil }), "stale", nil)
	checkErr(t, g.Commit(tok("a", 1), nop), "stale", nil)
	release()
	must(t, wait())
}

// Writes on one gate never overlap, whichever method starts them. Each
// callback yields many times while it runs (and some block on a channel that
// another goroutine closes), so a gate that let two writes in at once is
// caught without the race detector. Fences of started writes never decrease;
// ran + refused + cancelled = attempts; every refusal is logged.
//
// With shared admission (the default), writes with the same fence may run
// together, and only writes with different fences never overlap.
func TestGateWritesSerialized(t *testing.T) {
	t.Run("Exclusive", func(t *testing.T) { gateWritesSerialized(t, true) })
	t.Run("Shared", func(t *testing.T) { gateWritesSerialized(t, false) })
}

func gateWritesSerialized(t *testing.T, exclusive bool) {
	const writers, perWriter = 8, 40
	g, err := fence.NewGate("deploy-slot", fence.Options{MaxRejections: writers * perWriter, Exclusive: exclusive})
	must(t, err)
	var inside, overlaps atomic.Int32
	var mu sync.Mutex
	var started []uint64
	running := map[uint64]int{}
	var ran, refused, cancelled atomic.Int32
	body := func(f uint64, rng *rand.Rand) {
		inside.Add(1)
		mu.Lock()
		if len(running) > 1 || len(running) == 1 && (running[f] == 0 || exclusive) {
			overlaps.Add(1)
		}
		running[f]++
		started = append(started, f)
		mu.Unlock()
		for range rng.IntN(20) {
			runtime.Gosched()
		}
		if rng.IntN(4) == 0 {
			ch := make(chan struct{})
			go func() { runtime.Gosched(); close(ch) }()
			<-ch
		}
		mu.Lock()
		if running[f]--; running[f] == 0 {
			delete(running, f)
		}
		mu.Unlock()
		inside.Add(-1)
		ran.Add(1)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range perWriter {
				f := uint64(1 + rng.IntN(30))
				tk := fence.Token{Resource: "deploy-slot", HolderID: "w", Fence: f}
				var err error
				if rng.IntN(2) == 0 {
					err = g.Commit(tk, func() error { body(f, rng); return nil })
				} else {
					ctx, cancel := context.WithCancel(context.Background())
					if rng.IntN(4) == 0 {
						go func() { runtime.Gosched(); cancel() }()
					}
					err = g.CommitContext(ctx, tk, func(context.Context) error { body(f, rng); return nil })
					cancel()
				}
				var se *fence.StaleFenceError
				switch {
				case err == nil:
				case errors.As(err, &se):
					refused.Add(1)
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Fatalf("%d writes started while another write was running", overlaps.Load())
	}
	for i := 1; i < len(started); i++ {
		if started[i] < started[i-1] {
			t.Fatalf("write with fence %d started after a write with fence %d", started[i], started[i-1])
		}
	}
	if n := ran.Load() + refused.Load() + cancelled.Load(); n != writers*perWriter || int(ran.Load()) != len(started) {
		t.Fatalf("%d ran + %d refused + %d cancelled != %d", ran.Load(), refused.Load(), cancelled.Load(), writers*perWriter)
	}
	if g.RejectionCount() != int(refused.Load()) || len(g.Rejections()) != int(refused.Load()) {
		t.Fatalf("log has %d entries for %d refusals", g.RejectionCount(), refused.Load())
	}
	if refused.Load() == 0 {
		t.Fatal("nothing was refused: the writers never overlapped")
	}
}

// A write that is running keeps every other write out, deterministically:
// the running write yields until the second commit is queued (CommitContext
// asks its context for Done only then) or has started its own write, which
// would be the gate letting two writes in at once.
func TestSecondWriteWaitsForTheFirst(t *testing.T) {
	for _, first := range []string{"Commit", "CommitContext"} {
		t.Run(first, func(t *testing.T) {
			g := newGate(t, "deploy-slot", 0)
			ctx := newAskedCtx(context.Background())
			secondStarted := make(chan struct{})
			second := make(chan error, 1)
			firstWrite := func() error {
				go func() {
					second <- g.CommitContext(ctx, tok("b", 2), func(context.Context) error { close(secondStarted); return nil })
				}()
				for {
					select {
					case <-ctx.asked:
						return nil
					case <-secondStarted:
						t.Error("the second write started while the first was running")
						return nil
					default:
						runtime.Gosched()
					}
				}
			}
			if first == "Commit" {
				must(t, g.Commit(tok("a", 1), firstWrite))
			} else {
				must(t, g.CommitContext(context.Background(), tok("a", 1), func(context.Context) error { return firstWrite() }))
			}
			must(t, <-second)
		})
	}
	// And a plain Commit waits for a running CommitContext: it yields for a
	// long time without the second write getting in.
	g := newGate(t, "deploy-slot", 0)
	var secondRan atomic.Bool
	done := make(chan error, 1)
	must(t, g.CommitContext(context.Background(), tok("a", 1), func(context.Context) error {
		go func() { done <- g.Commit(tok("b", 2), func() error { secondRan.Store(true); return nil }) }()
		for range 2000 {
			runtime.Gosched()
			if secondRan.Load() {
				t.Error("Commit's write ran while CommitContext's was running")
				break
			}
		}
		return nil
	}))
	must(t, <-done)
}

// A panicking write gives the lock back; a waiting CommitContext gets it.
func TestCommitContextPanicUnlocks(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	func() {
		defer func() { _ = recover() }()
		_ = g.CommitContext(context.Background(), tok("a", 1), func(context.Context) error { panic("half written") })
	}()
	if g.Floor() != 1 {
		t.Fatalf("floor = %d", g.Floor())
	}
	must(t, g.CommitContext(context.Background(), tok("a", 1), func(context.Context) error { return nil }))
}

func time0() (t time.Time) { return t }
