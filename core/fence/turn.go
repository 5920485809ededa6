package fence

import (
	"sync"
	"sync/atomic"
)

// writeLock is the gate's write lock: a mutex whose lock can give up when a
// channel (a context's Done) is closed. An uncontended lock and unlock are one compare-and-swap
// each (a buffered channel used as the lock cost the admitted Commit about
// 2.5x its former CPU time); waiters queue in FIFO order and the lock is
// handed to the first of them directly, so a stream of new callers cannot
// starve one that waits.
type writeLock struct {
	// state is lockFree, lockHeld, or lockQueued (held, and waiters may be
	// queued: unlock must take mu and hand the lock on).
	state atomic.Int32

	mu      sync.Mutex
	waiters []chan struct{} // FIFO; each is closed when the lock is handed to it
}

const (
	lockFree int32 = iota
	lockHeld
	lockQueued
)

// canceller is what lock needs of a context: its Done channel.
type canceller interface{ Done() <-chan struct{} }

// lock takes the lock and reports true, or reports false without it if
// c.Done() is closed first. A nil c waits for as long as it takes. c.Done is
// called only when the lock is held by someone else, so a context can tell
// (tests and the simulator do) that its caller had to wait.
func (l *writeLock) lock(c canceller) bool {
	if l.state.CompareAndSwap(lockFree, lockHeld) {
		return true
	}
	l.mu.Lock()
	for {
		s := l.state.Load()
		if s == lockFree {
			if l.state.CompareAndSwap(lockFree, lockHeld) {
				l.mu.Unlock()
				return true
			}
			continue
		}
		if s == lockQueued || l.state.CompareAndSwap(lockHeld, lockQueued) {
			break
		}
	}
	w := make(chan struct{})
	l.waiters = append(l.waiters, w)
	l.mu.Unlock()

	var done <-chan struct{}
	if c != nil {
		done = c.Done()
	}
	select {
	case <-w:
		return true
	case <-done:
	}
	l.mu.Lock()
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			l.mu.Unlock()
			return false
		}
	}
	l.mu.Unlock()
	// The lock was handed over as done closed: it is ours, pass it on.
	<-w
	l.unlock()
	return false
}

// unlock releases the lock, handing it to the first waiter if there is one.
func (l *writeLock) unlock() {
	if l.state.CompareAndSwap(lockHeld, lockFree) {
		return
	}
	l.mu.Lock()
	if len(l.waiters) == 0 {
		l.state.Store(lockFree)
	} else {
		w := l.waiters[0]
		l.waiters[0] = nil
		l.waiters = l.waiters[1:]
		close(w) // the state stays lockQueued: the lock is now w's
	}
	l.mu.Unlock()
}
