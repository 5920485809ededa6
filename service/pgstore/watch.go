//go:build !js && !wasip1

package pgstore

import (
	"sync"
	"time"
)

// WatchPoll is how often Watch reports a watched resource.
const WatchPoll = 100 * time.Millisecond

// Watch calls fn every WatchPoll while the watch lasts (service.Store): the
// Store does not hear of the other replicas' commits as they happen, so it
// reports every watched resource on a poll, and a waiter on this replica
// is handed a resource released on another one within a poll. (A LISTEN
// connection with a NOTIFY in each committing transaction would report at
// once; the poll would stay as the fallback while that connection is down.)
func (s *Store) Watch(resource string, fn func()) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	var tick func()
	tick = func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		t = time.AfterFunc(WatchPoll, tick)
		mu.Unlock()
		fn()
	}
	mu.Lock()
	t = time.AfterFunc(WatchPoll, tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
