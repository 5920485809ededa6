package service

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// The tests of waiting calls: every wake-up runs on the rig's manual clock,
// so an expiry is handed over exactly when the test moves the clock there,
// and a wait ends exactly when its time has passed.

// eventually waits (without sleeping on a timer of its own) until cond
// holds, failing the test after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after 10s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// answer is what a call that was sent in the background came back with.
type answer struct {
	reply wire.Reply
	err   error
}

// callAsync sends m to the service in the background.
func (r *rig) callAsync(ctx context.Context, m wire.Message) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		reply, err := r.svc.Call(ctx, m)
		ch <- answer{reply, err}
	}()
	return ch
}

// waitingAcquire is acquireMsg that may wait d.
func waitingAcquire(id, resource, holder string, d time.Duration) wire.Message {
	m := acquireMsg(id, resource, holder)
	m.Wait = d
	return m
}

// join sends a waiting acquisition and returns once it waits in the queue
// (the service counts want waiting calls).
func (r *rig) join(ctx context.Context, m wire.Message, want int) <-chan answer {
	r.t.Helper()
	ch := r.callAsync(ctx, m)
	eventually(r.t, m.Request.HolderID+" waiting", func() bool { return r.svc.Waiting() == want })
	return ch
}

// got returns the answer on ch, failing if there is none within the
// generous deadline.
func got(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after 10s")
	}
	return answer{}
}

// pending fails the test if ch already has an answer.
func pending(t *testing.T, what string, ch <-chan answer) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s was answered early: %+v %v", what, a.reply, a.err)
	default:
	}
}

func grantFence(t *testing.T, a answer, holder string) uint64 {
	t.Helper()
	if a.err != nil || !a.reply.OK || a.reply.Grant == nil || a.reply.Grant.HolderID != holder {
		t.Fatalf("%s: not granted: %+v %v", holder, a.reply, a.err)
	}
	return a.reply.Grant.Fence
}

// noWaiters checks that nothing is left of the waiting calls: no count, no
// queue, no timer.
func (r *rig) noWaiters() {
	r.t.Helper()
	eventually(r.t, "no waiters left", func() bool {
		r.svc.w.mu.Lock()
		defer r.svc.w.mu.Unlock()
		return r.svc.w.n == 0 && len(r.svc.w.queues) == 0 && r.svc.w.active.Load() == 0
	})
	if n := r.clk.Timers(); n != 0 {
		r.t.Fatalf("%d timers still armed", n)
	}
}

// TestWaitersAreServedInArrivalOrder: eight waiters on a held resource; each
// release hands it to the first of them at once, in the order they
// arrived, each with a new fence made durable before it is answered.
func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	f, secret := r.grant(wire.OpAcquire, acquireMsg("q0", "slot", "h0"))
	var waits []<-chan answer
	for i := 1; i <= 8; i++ {
		waits = append(waits, r.join(ctx, waitingAcquire("q"+strconv.Itoa(i), "slot", "h"+strconv.Itoa(i), 30*time.Second), i))
	}
	holder, fence := "h0", f
	for i, ch := range waits {
		for _, later := range waits[i:] {
			pending(t, "a later waiter", later)
		}
		writes := len(r.disk.writes)
		if st, out := r.post(wire.OpRelease, releaseMsg("rel-"+holder, "slot", holder, fence, secret)); st != 200 || out["ok"] != true {
			t.Fatalf("release by %s: %d %v", holder, st, out)
		}
		// The release and the handover are one synced write, made before
		// the waiter's answer.
		if w := r.disk.writes[writes:]; len(w) != 1 || !w[0].sync || len(w[0].b.Put) != 1 || w[0].b.Put[0].HolderID != "h"+strconv.Itoa(i+1) {
			t.Fatalf("the handover to waiter %d wrote %+v", i+1, w)
		}
		holder = "h" + strconv.Itoa(i+1)
		next := grantFence(t, got(t, ch), holder)
		if next != fence+1 {
			t.Fatalf("%s got fence %d after %d", holder, next, fence)
		}
		fence, secret = next, secretOf(holder)
	}
	r.noWaiters()
}

// TestExpiryHandsOverByItself: the waiter gets the lease when the lease it
// waits behind expires, by the service's own timer (no other call comes),
// at the reading of the expiry.
func TestExpiryHandsOverByItself(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	r.grant(wire.OpAcquire, acquireMsg("q0", "slot", "a"))
	ch := r.join(ctx, waitingAcquire("q1", "slot", "b", 30*time.Second), 1)
	at, ok := r.clk.NextTimer()
	if !ok || at.Millis != 2000 {
		t.Fatalf("the next wake-up is at %v (%v), want the expiry at 2000", at, ok)
	}
	r.clk.Advance(999)
	pending(t, "the waiter before the expiry", ch)
	r.clk.Advance(1)
	a := got(t, ch)
	grantFence(t, a, "b")
	if exp := a.reply.Grant.CoordinatorExpiresAt.Millis; exp != 3000 {
		t.Fatalf("the handover was decided at %v, want 2000 (+ TTL)", exp-1000)
	}
	r.noWaiters()
}

// TestWaitEndsWithTheOrdinaryDenial: a wait that runs out is answered as a
// call that does not wait would be, and leaves nothing behind once its
// place is no longer kept.
func TestWaitEndsWithTheOrdinaryDenial(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	r.grant(wire.OpAcquire, acquireMsg("q0", "slot", "a"))
	ch := r.join(ctx, waitingAcquire("q1", "slot", "b", 300*time.Millisecond), 1)
	r.clk.Advance(299)
	pending(t, "the waiter", ch)
	r.clk.Advance(1)
	a := got(t, ch)
	if a.err != nil || a.reply.OK || a.reply.HeldBy != "a" || a.reply.RetryAfterMillis != 700 {
		t.Fatalf("after the wait: %+v %v", a.reply, a.err)
	}
	r.clk.Advance(clockMillis(DefaultKeepPlace))
	r.noWaiters()
}

func clockMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestGoneWaiterIsPassedOver: a waiter whose client went away keeps its
// place for a retry but is passed over by the handover; its retry after
// that waits at the end of the queue.
func TestGoneWaiterIsPassedOver(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	f, s := r.grant(wire.OpAcquire, acquireMsg("q0", "slot", "a"))
	gone, leave := context.WithCancel(ctx)
	chB := r.join(gone, waitingAcquire("qb", "slot", "b", 30*time.Second), 1)
	chC := r.join(ctx, waitingAcquire("qc", "slot", "c", 30*time.Second), 2)
	leave()
	if a := got(t, chB); a.err == nil {
		t.Fatalf("b's call ended by its client was answered %+v", a.reply)
	}
	if n := r.svc.Waiting(); n != 2 {
		t.Fatalf("%d waiting, want c and b's kept place", n)
	}
	r.released(releaseMsg("rel", "slot", "a", f, s)) // handed over to c, past b
	fc := grantFence(t, got(t, chC), "c")
	if fc != f+1 {
		t.Fatalf("c got fence %d", fc)
	}
	// b's retry finds no place: it waits behind c's lease, at the end.
	chB = r.join(ctx, waitingAcquire("qb", "slot", "b", 30*time.Second), 1)
	r.released(releaseMsg("rel-c", "slot", "c", fc, secretOf("c")))
	if fb := grantFence(t, got(t, chB), "b"); fb != fc+1 {
		t.Fatalf("b got fence %d", fb)
	}
	r.noWaiters()
}

// TestRetryKeepsItsPlace: a waiter that comes back with the same request id
// (and secret) takes its place back, ahead of those who came after it; two
// calls with one request id share one place and get one grant; another
// holder or another secret with that id is refused.
func TestRetryKeepsItsPlace(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	f, s := r.grant(wire.OpAcquire, acquireMsg("q0", "slot", "a"))
	gone, leave := context.WithCancel(ctx)
	first := r.join(gone, waitingAcquire("qb", "slot", "b", 30*time.Second), 1)
	chC := r.join(ctx, waitingAcquire("qc", "slot", "c", 30*time.Second), 2)
	leave()
	got(t, first)
	// The retry, and a second copy of it (a duplicated request).
	retry := r.callAsync(ctx, waitingAcquire("qb", "slot", "b", 30*time.Second))
	dup := r.join(ctx, waitingAcquire("qb", "slot", "b", 30*time.Second), 3)
	eventually(t, "both calls attached", func() bool { return r.svc.Waiting() == 3 })
	r.svc.w.mu.Lock()
	places := len(r.svc.w.queues["slot"].places)
	r.svc.w.mu.Unlock()
	if places != 2 {
		t.Fatalf("%d places, want b's and c's", places)
	}
	for _, bad := range []wire.Message{waitingAcquire("qb", "slot", "z", time.Second), func() wire.Message {
		m := waitingAcquire("qb", "slot", "b", time.Second)
		m.Secret = "another-secret-0123456789"
		return m
	}()} {
		if _, err := r.svc.Call(ctx, bad); err == nil {
			t.Fatalf("%s with b's waiting request id was accepted", bad.Request.HolderID)
		} else if !isCode(err, wire.CodeRequestIDReused) && !isCode(err, wire.CodeWrongSecret) {
			t.Fatalf("refused with %v", err)
		}
	}
	r.released(releaseMsg("rel", "slot", "a", f, s))
	fb := grantFence(t, got(t, retry), "b")
	if fd := grantFence(t, got(t, dup), "b"); fb != f+1 || fd != fb {
		t.Fatalf("b's two calls got fences %d and %d, want %d once", fb, fd, f+1)
	}
	pending(t, "c", chC)
	if r.store.Issued() != fb {
		t.Fatalf("%d fences issued, want %d", r.store.Issued(), fb)
	}
	r.released(releaseMsg("rel-b", "slot", "b", fb, secretOf("b")))
	grantFence(t, got(t, chC), "c")
	r.noWaiters()
}

// TestTooManyWaiters: MaxWaiters counts waiting calls and kept places; a
// call beyond is refused, changing nothing; one that does not wait is
// answered as usual; a wait beyond MaxWait is refused.
func TestTooManyWaiters(t *testing.T) {
	r := newRigWaiters(t, nil, LocalConfig{}, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.grant(wire.OpAcquire, acquireMsg("q0", "slot", "a"))
	var waits []<-chan answer
	for i := 1; i <= 3; i++ {
		waits = append(waits, r.join(ctx, waitingAcquire("q"+strconv.Itoa(i), "slot", "w"+strconv.Itoa(i), time.Minute), i))
	}
	before := r.state()
	if _, err := r.svc.Call(ctx, waitingAcquire("q4", "slot", "w4", time.Minute)); !isCode(err, wire.CodeTooManyWaiters) {
		t.Fatalf("the fourth waiter: %v", err)
	}
	ob := wire.Message{Op: wire.OpInspect, Request: requestOf("slot"), HasAfter: true, After: 1, Wait: time.Minute}
	if _, err := r.svc.Call(ctx, ob); !isCode(err, wire.CodeTooManyWaiters) {
		t.Fatalf("an observer beyond the bound: %v", err)
	}
	if reply, err := r.svc.Call(ctx, acquireMsg("q5", "slot", "w5")); err != nil || reply.HeldBy != "a" {
		t.Fatalf("a call that does not wait: %+v %v", reply, err)
	}
	if st := r.state(); !equalState(st, before) {
		t.Fatalf("refusals changed the state: %+v, was %+v", st, before)
	}
	if _, err := r.svc.Call(ctx, waitingAcquire("q6", "other", "w6", wire.DefaultMaxWait+time.Millisecond)); !isCode(err, wire.CodeInvalidValue) {
		t.Fatalf("a wait over MaxWait: %v", err)
	}
	st, out := r.do("POST", "/v1/acquire", `{"requestId":"q7","resource":"other","holderId":"w7","sentAt":{"millis":1,"domain":"d"},"kind":"acquire","secret":"0123456789abcdef","waitMillis":60001}`)
	if st != 400 || errCodeOf(t, out) != wire.CodeInvalidValue {
		t.Fatalf("the handler took waitMillis 60001: %d %v", st, out)
	}
	cancel()
	for _, ch := range waits {
		got(t, ch)
	}
	r.clk.Advance(clockMillis(DefaultKeepPlace))
	r.noWaiters()
}

// isCode reports whether err is a refusal that the HTTP layer answers with
// code.
func isCode(err error, code string) bool {
	var rf *wire.Refusal
	return errors.As(err, &rf) && httpapi.ErrorOf(rf).Code == code
}

func equalState(a, b state) bool {
	if len(a.Stored) != len(b.Stored) || len(a.Memory) != len(b.Memory) || a.Leases != b.Leases || a.Issued != b.Issued {
		return false
	}
	for k, v := range a.Stored {
		if b.Stored[k] != v {
			return false
		}
	}
	return true
}

// TestManyWaitersComeAndGo: hostile use (a thousand waiters on a thousand
// resources that go away, and their retries) leaves no count, no queue and
// no timer behind once their places are no longer kept.
func TestManyWaitersComeAndGo(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 1000 {
		r.grant(wire.OpAcquire, acquireMsg("q"+strconv.Itoa(i), "r"+strconv.Itoa(i), "a"))
	}
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Add(2)
		for range 2 { // a call and its retry, both waiting
			go func() {
				defer wg.Done()
				_, _ = r.svc.Call(ctx, waitingAcquire("w"+strconv.Itoa(i), "r"+strconv.Itoa(i), "b", time.Minute))
			}()
		}
	}
	eventually(t, "2,000 calls waiting", func() bool { return r.svc.Waiting() == 2000 })
	cancel()
	wg.Wait()
	if n := r.svc.Waiting(); n != 1000 {
		t.Fatalf("%d counted, want the 1,000 kept places", n)
	}
	r.clk.Advance(clockMillis(DefaultKeepPlace))
	r.noWaiters()
}

// TestStopWaiting: every waiting call is answered at once; later calls do
// not wait.
func TestStopWaiting(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	f, _ := r.grant(wire.OpAcquire, acquireMsg("q0", "slot", "a"))
	ch := r.join(ctx, waitingAcquire("q1", "slot", "b", time.Minute), 1)
	ob := r.callAsync(ctx, wire.Message{Op: wire.OpInspect, Request: requestOf("slot"), HasAfter: true, After: f, Wait: time.Minute})
	eventually(t, "the observer", func() bool { return r.svc.Waiting() == 2 })
	r.svc.StopWaiting()
	if a := got(t, ch); a.err != nil || a.reply.HeldBy != "a" {
		t.Fatalf("the waiter: %+v %v", a.reply, a.err)
	}
	if a := got(t, ob); a.err != nil || a.reply.Current() != f {
		t.Fatalf("the observer: %+v %v", a.reply, a.err)
	}
	if _, err := r.svc.Call(ctx, waitingAcquire("q2", "slot", "c", time.Minute)); !isCode(err, wire.CodeUnavailable) {
		t.Fatalf("a waiter after StopWaiting: %v", err)
	}
}

// TestFailedHandoverChangesNothing: when the store cannot write the
// handover, the release is refused (503), the lease stays with its holder
// and the waiter keeps waiting; the next release hands over.
func TestFailedHandoverChangesNothing(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	f, s := r.grant(wire.OpAcquire, acquireMsg("q0", "slot", "a"))
	ch := r.join(ctx, waitingAcquire("q1", "slot", "b", time.Minute), 1)
	before := r.state()
	r.disk.fail = func(Batch) error { return errDiskFull }
	if st, out := r.post(wire.OpRelease, releaseMsg("rel", "slot", "a", f, s)); st != 503 || errCodeOf(t, out) != wire.CodeUnavailable {
		t.Fatalf("release over a full disk: %d %v", st, out)
	}
	pending(t, "the waiter", ch)
	// Only the failed grant's fence stays issued (as for any failed grant).
	before.Issued++
	if st := r.state(); !equalState(st, before) {
		t.Fatalf("the failed handover changed %+v into %+v", before, st)
	}
	r.disk.fail = nil
	r.released(releaseMsg("rel", "slot", "a", f, s))
	grantFence(t, got(t, ch), "b")
}

// released sends m, a release, and fails unless it ended the lease.
func (r *rig) released(m wire.Message) {
	r.t.Helper()
	if st, out := r.post(wire.OpRelease, m); st != 200 || out["ok"] != true {
		r.t.Fatalf("release %s: %d %v", m.Request.RequestID, st, out)
	}
}

func requestOf(resource string) lease.Request { return lease.Request{Resource: resource} }
