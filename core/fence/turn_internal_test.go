package fence

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func testGate(t *testing.T) *Gate {
	t.Helper()
	return testGateWith(t, Options{Exclusive: true})
}

func testGateWith(t *testing.T, opts Options) *Gate {
	t.Helper()
	g, err := NewGate("r", opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// take takes g's write lock as Commit (ctx nil: no record when the gate is
// free at a claimed floor) or CommitContext does.
func take(g *Gate, tok Token, ctx context.Context) error {
	if ctx == nil {
		if tok.Fence == g.floor.Load() && g.claimed.Load() && g.turn.CompareAndSwap(0, tok.Fence<<2|lockHeld) {
			return nil
		}
		return g.lockSlow(tok, nil, nil)
	}
	return g.lockSlow(tok, &writeCtx{parent: ctx}, ctx)
}

// Many goroutines take the lock, by both paths, some with contexts that are
// cancelled at random moments. Holders never overlap, every caller either
// gets the lock or a *GateBusyError wrapping ctx.Err(), nobody waits for
// ever, and the lock ends free with no record and no waiter.
func TestWriteLockStress(t *testing.T) {
	t.Run("Exclusive", func(t *testing.T) { writeLockStress(t, true) })
	t.Run("Shared", func(t *testing.T) { writeLockStress(t, false) })
}

// writeLockStress: with exclusive, holders never overlap; with shared
// admission, holders with different fences never do.
func writeLockStress(t *testing.T, exclusive bool) {
	g := testGateWith(t, Options{Exclusive: exclusive})
	var fmu sync.Mutex
	var byFence [2]int
	shared := atomic.Int32{}
	g.claimed.Store(true)
	var inside, overlaps, got, gaveUp atomic.Int32
	var wg sync.WaitGroup
	const workers, rounds = 8, 300
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range rounds {
				var ctx context.Context
				var cancel context.CancelFunc = func() {}
				if rng.IntN(2) == 0 {
					ctx, cancel = context.WithCancel(context.Background())
					if rng.IntN(2) == 0 {
						spins := rng.IntN(3)
						go func() {
							for range spins {
								runtime.Gosched()
							}
							cancel()
						}()
					}
				}
				tok := Token{Resource: "r", HolderID: "w", Fence: uint64(rng.IntN(2))}
				if err := take(g, tok, ctx); err != nil {
					var busy *GateBusyError
					if ctx == nil || ctx.Err() == nil || !errors.As(err, &busy) || !errors.Is(err, context.Canceled) {
						t.Errorf("lock gave up with %v", err)
					}
					gaveUp.Add(1)
					cancel()
					continue
				}
				fmu.Lock()
				if byFence[1-tok.Fence] != 0 || (exclusive && byFence[tok.Fence] != 0) {
					overlaps.Add(1)
				}
				if byFence[tok.Fence] != 0 {
					shared.Add(1)
				}
				byFence[tok.Fence]++
				fmu.Unlock()
				inside.Add(1)
				if s := g.turn.Load(); s>>2 != tok.Fence || s&lockHeld == 0 {
					t.Errorf("lock word %x while fence %d holds it", s, tok.Fence)
				}
				for range rng.IntN(4) {
					runtime.Gosched()
				}
				fmu.Lock()
				byFence[tok.Fence]--
				fmu.Unlock()
				inside.Add(-1)
				got.Add(1)
				g.unlock(tok.Fence, nil)
				cancel()
			}
		})
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping holders", overlaps.Load())
	}
	if got.Load()+gaveUp.Load() != workers*rounds || got.Load() == 0 {
		t.Fatalf("%d got + %d gave up", got.Load(), gaveUp.Load())
	}
	if g.turn.Load() != 0 || len(g.waiters) != 0 || g.run.on || len(g.joined) != 0 {
		t.Fatalf("lock ends in state %x with %d waiters, %d joined, record %+v", g.turn.Load(), len(g.waiters), len(g.joined), g.run)
	}
	t.Logf("%d of %d writes ran alongside another with their fence", shared.Load(), got.Load())
}

// Waiters get the lock in the order they queued.
func TestWriteLockFIFO(t *testing.T) {
	g := testGate(t)
	first := Token{Resource: "r", HolderID: "a", Fence: 1}
	if err := take(g, first, nil); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 5)
	for i := range 5 {
		queued := make(chan struct{})
		go func() {
			go func() {
				for {
					g.mu.Lock()
					n := len(g.waiters)
					g.mu.Unlock()
					if n == i+1 {
						close(queued)
						return
					}
					runtime.Gosched()
				}
			}()
			tok := Token{Resource: "r", HolderID: "w", Fence: 1}
			if err := take(g, tok, nil); err != nil {
				t.Error(err)
			}
			order <- i
			g.unlock(tok.Fence, nil)
		}()
		<-queued
	}
	g.unlock(first.Fence, nil)
	for i := range 5 {
		if got := <-order; got != i {
			t.Fatalf("waiter %d got the lock in place %d", got, i)
		}
	}
}
