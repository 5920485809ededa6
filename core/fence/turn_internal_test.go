package fence

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// Many goroutines take the lock, some with contexts that are cancelled at
// random moments. Holders never overlap, every caller either gets the lock or
// ctx.Err(), nobody waits for ever, and the lock ends free.
func TestWriteLockStress(t *testing.T) {
	var l writeLock
	var inside, overlaps, got, gaveUp atomic.Int32
	var wg sync.WaitGroup
	const workers, rounds = 8, 300
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				var c canceller
				if ctx != nil {
					c = ctx
				}
				if !l.lock(c) {
					if ctx == nil || ctx.Err() == nil {
						t.Errorf("lock gave up with no cancelled context")
					}
					gaveUp.Add(1)
					cancel()
					continue
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				for range rng.IntN(4) {
					runtime.Gosched()
				}
				inside.Add(-1)
				got.Add(1)
				l.unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping holders", overlaps.Load())
	}
	if got.Load()+gaveUp.Load() != workers*rounds || got.Load() == 0 {
		t.Fatalf("%d got + %d gave up", got.Load(), gaveUp.Load())
	}
	if l.state.Load() != lockFree || len(l.waiters) != 0 {
		t.Fatalf("lock ends in state %d with %d waiters", l.state.Load(), len(l.waiters))
	}
}

// Waiters get the lock in the order they queued.
func TestWriteLockFIFO(t *testing.T) {
	var l writeLock
	l.lock(nil)
	order := make(chan int, 5)
	for i := range 5 {
		queued := make(chan struct{})
		go func() {
			go func() {
				for {
					l.mu.Lock()
					n := len(l.waiters)
					l.mu.Unlock()
					if n == i+1 {
						close(queued)
						return
					}
					runtime.Gosched()
				}
			}()
			l.lock(nil)
			order <- i
			l.unlock()
		}()
		<-queued
	}
	l.unlock()
	for i := range 5 {
		if got := <-order; got != i {
			t.Fatalf("waiter %d got the lock in place %d", got, i)
		}
	}
}
