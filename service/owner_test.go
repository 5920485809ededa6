package service

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// The tests of the limits of a token (wire.Caller): its lease records are
// counted by the owner stored with them, so the count is right across
// release, expiry, sweep and restart, and holds under concurrent calls.

func as(m wire.Message, name string, maxLeases, maxWaiters int) wire.Message {
	m.Caller = wire.Caller{Name: name, MaxLeases: maxLeases, MaxWaiters: maxWaiters}
	return m
}

func (r *rig) call(m wire.Message) (wire.Reply, error) {
	r.t.Helper()
	return r.svc.Call(context.Background(), m)
}

// granted calls m and returns its grant's fence, failing unless granted.
func (r *rig) granted(m wire.Message) uint64 {
	r.t.Helper()
	reply, err := r.call(m)
	return mustGrant(r.t, reply, err)
}

// owned returns how many of owner's places r's store (its Ledger in
// memory) holds live at the clock's reading.
func (r *rig) owned(owner string) int {
	return r.store.ledger.(*memLedger).live(owner, r.clk.Peek().Millis)
}

// places returns how many places r's store holds for owner, live or lapsed.
func (r *rig) places(owner string) int {
	m := r.store.ledger.(*memLedger)
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.owners[owner]; o != nil {
		return len(o.places)
	}
	return 0
}

func mustGrant(t *testing.T, reply wire.Reply, err error) uint64 {
	t.Helper()
	if err != nil || !reply.OK || reply.Grant == nil {
		t.Fatalf("not granted: %+v %v", reply, err)
	}
	return reply.Grant.Fence
}

func TestTokenLeaseLimit(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	a := func(id, res string) wire.Message { return as(acquireMsg(id, res, "a-1"), "a", 3, 0) }
	var fences []uint64
	for i := range 3 {
		reply, err := r.call(a("q"+strconv.Itoa(i), "r"+strconv.Itoa(i)))
		fences = append(fences, mustGrant(t, reply, err))
	}
	if e, ok := r.store.Entry("r0"); !ok || e.Owner != "a" {
		t.Fatalf("the owner is not stored: %+v", e)
	}
	before := r.state()
	if _, err := r.call(a("q3", "r3")); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a fourth lease of a's: %v", err)
	}
	if after := r.state(); !equalState(before, after) {
		t.Fatalf("a refusal changed the state:\n%+v\n%+v", before, after)
	}
	if we, _ := errAs(r.call(a("q3", "r3"))); we == nil || we.Status != 429 {
		t.Fatalf("the refusal's status: %+v", we)
	}
	// The retry of an acquisition that made a lease is answered with its
	// grant; a renewal is a renewal: neither takes a place.
	if reply, err := r.call(a("q0", "r0")); mustGrant(t, reply, err) != fences[0] {
		t.Fatalf("the retry got %+v", reply)
	}
	r.clk.Advance(clockMillis(100 * time.Millisecond))
	if reply, err := r.call(as(renewMsg("n0", "r0", "a-1", fences[0], secretOf("a-1")), "a", 3, 0)); mustGrant(t, reply, err) != fences[0] {
		t.Fatalf("the renewal got %+v", reply)
	}
	// Other tokens, and calls without a token, are not affected.
	r.granted(as(acquireMsg("b0", "rb", "b-1"), "b", 3, 0))
	r.granted(acquireMsg("n0", "rn", "anyone"))
	// A release gives the place back.
	if reply, err := r.call(as(releaseMsg("x0", "r1", "a-1", fences[1], secretOf("a-1")), "a", 3, 0)); err != nil || !reply.OK {
		t.Fatalf("release: %+v %v", reply, err)
	}
	r.granted(a("q4", "r4"))
	if n := r.owned("a"); n != 3 {
		t.Fatalf("a owns %d records, want 3", n)
	}
	// An expired lease holds no place: the acquisition at the limit is
	// granted with the expired records still stored (no sweep).
	r.clk.Advance(clockMillis(ttl))
	r.granted(a("q5", "r5"))
	if n, leases := r.owned("a"), r.store.Leases(); n != 1 || leases != 6 {
		t.Fatalf("a owns %d records, want 1; the store holds %d, want 6 (r0, r2, r4, r5, rb, rn)", n, leases)
	}
	// The sweep of the expired records gives their places back.
	if n, err := r.store.Sweep(context.Background()); err != nil || n != 5 {
		t.Fatalf("the sweep deleted %d: %v", n, err)
	}
	if n, m := r.places("a"), r.places("b"); n != 1 || m != 0 {
		t.Fatalf("after the sweep a has %d places, b %d; want 1 and 0", n, m)
	}
}

// TestTokenLeaseLimitOverItsOwnExpiredLease: at its limit, a token may
// acquire a resource whose expired lease is its own (the record is
// replaced, the count does not change), but not one whose expired lease
// is another token's.
func TestTokenLeaseLimitOverItsOwnExpiredLease(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	r.granted(as(acquireMsg("a0", "mine", "a-1"), "a", 1, 0))
	r.granted(as(acquireMsg("b0", "theirs", "b-1"), "b", 1, 0))
	r.clk.Advance(clockMillis(ttl))
	r.granted(as(acquireMsg("a1", "mine", "a-2"), "a", 1, 0))
	if n := r.places("a"); n != 1 {
		t.Fatalf("a has %d places", n)
	}
	if _, err := r.call(as(acquireMsg("a2", "theirs", "a-2"), "a", 1, 0)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a over b's expired lease at a's limit: %v", err)
	}
	r.granted(as(acquireMsg("b1", "theirs", "b-2"), "b", 1, 0))
	if n := r.store.Expired(); n != 2 {
		t.Fatalf("%d records ran out, want 2: replaced, not swept", n)
	}
}

// TestTokenHandoverWithinItsLimit: at its limit, a token's waiter is handed
// the resource its own lease is released from: the place is the
// resource's, and passes from the one record to the next.
func TestTokenHandoverWithinItsLimit(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f := r.granted(as(acquireMsg("a0", "doc", "a-1"), "a", 1, 0))
	w := r.join(context.Background(), as(waitingAcquire("w", "doc", "a-2", time.Minute), "a", 1, 0), 1)
	r.released(as(releaseMsg("x", "doc", "a-1", f, secretOf("a-1")), "a", 1, 0))
	grantFence(t, got(t, w), "a-2")
	if n := r.places("a"); n != 1 {
		t.Fatalf("a has %d places", n)
	}
	if _, err := r.call(as(acquireMsg("a1", "other", "a-3"), "a", 1, 0)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a at its limit: %v", err)
	}
}

// TestTokenCountsSurviveARestart: the owners are stored with the leases, so
// a restarted store counts them again.
func TestTokenCountsSurviveARestart(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	for i := range 2 {
		r.granted(as(acquireMsg("a"+strconv.Itoa(i), "r"+strconv.Itoa(i), "a-1"), "a", 2, 0))
	}
	r2 := newRig(t, r.disk, LocalConfig{})
	if err := r2.store.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r2.owned("a"); n != 2 {
		t.Fatalf("after the restart a owns %d", n)
	}
	if _, err := r2.call(as(acquireMsg("a9", "r9", "a-1"), "a", 2, 0)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("after the restart: %v", err)
	}
}

// TestTokenLeaseLimitUnderAFlood: 64 concurrent acquisitions of one token
// on 64 resources get exactly its limit of grants; another token still
// acquires; the count agrees with the entries. The store's writes are held
// until every refusal came back, so the grants being written are all in
// flight at once while the others decide: a place is taken when the
// decision is made, not when it is written.
func TestTokenLeaseLimitUnderAFlood(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	const limit, calls = 10, 64
	// Resources on distinct lock stripes, so that no call waits for the
	// stripe of a write that is held.
	var names []string
	used := map[int]bool{}
	for i := 0; len(names) < calls; i++ {
		name := "flood-" + strconv.Itoa(i)
		if st := r.store.stripeOf(name); !used[st] {
			used[st] = true
			names = append(names, name)
		}
	}
	gate, allRefused := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-allRefused:
		case <-time.After(5 * time.Second): // only if the limit failed: more writes than it allows are held
		}
		close(gate)
	}()
	r.disk.fail = func(b Batch) error {
		if len(b.Put) == 1 && b.Put[0].Owner == "a" {
			<-gate
		}
		return nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, refused := 0, 0
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := strconv.Itoa(i)
			reply, err := r.svc.Call(context.Background(), as(acquireMsg("f"+id, names[i], "a-1"), "a", limit, 0))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && reply.OK:
				granted++
			case isCode(err, wire.CodeTooManyTokenLeases):
				if refused++; refused == calls-limit {
					close(allRefused)
				}
			default:
				t.Errorf("%s: %+v %v", id, reply, err)
			}
		}()
	}
	wg.Wait()
	if granted != limit || refused != calls-limit {
		t.Fatalf("%d granted, %d refused; want %d and %d", granted, refused, limit, calls-limit)
	}
	r.disk.fail = nil
	r.granted(as(acquireMsg("b", "other", "b-1"), "b", limit, 0))
	owned := 0
	for _, e := range r.state().Memory {
		if e.Owner == "a" && e.Fence != 0 {
			owned++
		}
	}
	if owned != limit || r.places("a") != limit {
		t.Fatalf("entries of a: %d, places %d", owned, r.places("a"))
	}
}

// TestTokenWaiterLimit: a token's waiting calls (acquisitions and
// observers) are bounded by its maxWaiters; another token still waits.
func TestTokenWaiterLimit(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	r.granted(acquireMsg("h", "held", "holder"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w1 := r.join(ctx, as(waitingAcquire("w1", "held", "a-1", time.Minute), "a", 0, 2), 1)
	obs := as(wire.Message{Op: wire.OpInspect, Request: requestOf("held"), After: 1, HasAfter: true, Wait: time.Minute}, "a", 0, 2)
	o1 := r.join(ctx, obs, 2)
	before := r.svc.Waiting()
	if _, err := r.call(as(waitingAcquire("w2", "held", "a-1", time.Minute), "a", 0, 2)); !isCode(err, wire.CodeTooManyTokenWaiters) {
		t.Fatalf("a third waiting call of a's: %v", err)
	}
	if _, err := r.call(obs); !isCode(err, wire.CodeTooManyTokenWaiters) {
		t.Fatalf("a third (observer) of a's: %v", err)
	}
	if r.svc.Waiting() != before {
		t.Fatal("a refused waiter was counted")
	}
	w3 := r.join(ctx, as(waitingAcquire("w3", "held", "b-1", time.Minute), "b", 0, 2), 3)
	cancel()
	for _, ch := range []<-chan answer{w1, o1, w3} {
		got(t, ch)
	}
	// The places of the acquisitions that went away are kept (a retry);
	// once they are forgotten nothing is left, by token either.
	r.clk.Advance(clockMillis(DefaultKeepPlace))
	r.noWaiters()
	if len(r.svc.w.byOwner) != 0 {
		t.Fatalf("waiters by token left: %v", r.svc.w.byOwner)
	}
}

// TestWaiterOverItsTokenLimitIsPassedOver: a release hands the resource to
// the first waiter whose token has room; a waiter whose token is at its
// limit is answered with that refusal.
func TestWaiterOverItsTokenLimitIsPassedOver(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f := r.granted(acquireMsg("h", "held", "holder"))
	r.granted(as(acquireMsg("a0", "elsewhere", "a-1"), "a", 1, 0))
	ctx := context.Background()
	wa := r.join(ctx, as(waitingAcquire("wa", "held", "a-1", time.Minute), "a", 1, 0), 1)
	wb := r.join(ctx, as(waitingAcquire("wb", "held", "b-1", time.Minute), "b", 1, 0), 2)
	r.released(releaseMsg("rel", "held", "holder", f, secretOf("holder")))
	if a := got(t, wa); !isCode(a.err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a's waiter: %+v %v", a.reply, a.err)
	}
	grantFence(t, got(t, wb), "b-1")
	r.noWaiters()
}

// ownerless is a store that does not count by owner.
type ownerless struct{ Store }

func (o ownerless) Update(ctx context.Context, res string, fn func(*Txn) error) error {
	return o.Store.Update(ctx, res, func(t *Txn) error { t.Owners = nil; return fn(t) })
}

// TestTokenLimitNeedsAStoreThatCounts: a store that does not count leases
// by owner cannot keep a token's maxLeases: the call is refused (500), not
// granted beyond it; a token without a limit of its own is served.
func TestTokenLimitNeedsAStoreThatCounts(t *testing.T) {
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	l, err := NewLocal(LocalConfig{Clock: clk, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{TTL: ttl, Store: ownerless{l}, AfterFunc: clk.AfterFunc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Call(context.Background(), as(acquireMsg("a", "r", "a-1"), "a", 5, 0)); !isCode(err, wire.CodeInternal) {
		t.Fatalf("with a limit: %v", err)
	}
	reply, err := svc.Call(context.Background(), as(acquireMsg("b", "r", "b-1"), "b", 0, 0))
	mustGrant(t, reply, err)
}

// errAs returns the answer of the HTTP layer to a refusal.
func errAs(_ wire.Reply, err error) (*wire.Error, bool) {
	rf, ok := err.(*wire.Refusal)
	if !ok {
		return nil, false
	}
	return httpapi.ErrorOf(rf), true
}

// TestTokenRenewalKeepsItsPlace: a renewal moves its record's place to the
// new expiry, so past the first one the token is still at its limit.
func TestTokenRenewalKeepsItsPlace(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f := r.granted(as(acquireMsg("a0", "r0", "a-1"), "a", 1, 0))
	r.clk.Advance(clockMillis(ttl / 2))
	r.granted(as(renewMsg("n0", "r0", "a-1", f, secretOf("a-1")), "a", 1, 0))
	r.clk.Advance(clockMillis(ttl/2) + 1)
	if _, err := r.call(as(acquireMsg("a1", "r1", "a-1"), "a", 1, 0)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("past the first expiry of a renewed lease: %v", err)
	}
}

// TestTokenPlaceOfAFailedWrite: a grant whose write fails gives its place
// back at once; one over the token's own record gives it back to that
// record.
func TestTokenPlaceOfAFailedWrite(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	r.disk.fail = func(Batch) error { return errors.New("disk full") }
	if _, err := r.call(as(acquireMsg("a0", "r0", "a-1"), "a", 1, 0)); !isCode(err, wire.CodeUnavailable) {
		t.Fatalf("a grant whose write fails: %v", err)
	}
	r.disk.fail = nil
	f := r.granted(as(acquireMsg("a1", "r1", "a-1"), "a", 1, 0))
	if n := r.places("a"); n != 1 {
		t.Fatalf("a has %d places", n)
	}
	// Over its own expired record, whose write fails: the place is the
	// record's again.
	r.clk.Advance(clockMillis(ttl))
	r.disk.fail = func(Batch) error { return errors.New("disk full") }
	if _, err := r.call(as(acquireMsg("a2", "r1", "a-2"), "a", 1, 0)); !isCode(err, wire.CodeUnavailable) {
		t.Fatalf("a grant whose write fails: %v", err)
	}
	r.disk.fail = nil
	m := r.store.ledger.(*memLedger)
	if p := m.owners["a"].places["r1"]; p.fence != f {
		t.Fatalf("the place of r1 is %+v, want fence %d", p, f)
	}
}

// TestTokenLimitBeforeTheStoreLimit: a token at its limit on a full store
// is told of its own limit (429), not of the store's (503).
func TestTokenLimitBeforeTheStoreLimit(t *testing.T) {
	r := newRig(t, nil, LocalConfig{Limits: Limits{MaxLeases: 2}})
	r.granted(as(acquireMsg("a0", "r0", "a-1"), "a", 1, 0))
	r.granted(acquireMsg("n0", "r1", "n-1"))
	if _, err := r.call(as(acquireMsg("a1", "r2", "a-1"), "a", 1, 0)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a at its limit on a full store: %v", err)
	}
	if _, err := r.call(as(acquireMsg("b0", "r2", "b-1"), "b", 1, 0)); !isCode(err, wire.CodeTooManyLeases) {
		t.Fatalf("b on a full store: %v", err)
	}
}

// pausingClock is a manual clock whose next reading, once armed, waits
// for release after it is taken.
type pausingClock struct {
	*clock.Manual
	armed            atomic.Bool
	reached, release chan struct{}
}

func (c *pausingClock) Now() (clock.Instant, error) {
	at, err := c.Manual.Now()
	if c.armed.CompareAndSwap(true, false) {
		close(c.reached)
		<-c.release
	}
	return at, err
}

// TestTokenRenewalInFlightKeepsItsPlace: a renewal that read the clock just
// before its lease's expiry, and has not yet moved the place, keeps it: a
// grant that reads the clock just after, on another resource, does not
// count the place as lapsed, and the token is not taken past its limit.
func TestTokenRenewalInFlightKeepsItsPlace(t *testing.T) {
	man, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	clk := &pausingClock{Manual: man, reached: make(chan struct{}), release: make(chan struct{})}
	store, err := NewLocal(LocalConfig{Clock: clk, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{TTL: ttl, Store: store, AfterFunc: man.AfterFunc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reply, err := svc.Call(ctx, as(acquireMsg("a0", "r0", "a-1"), "a", 1, 0))
	f := mustGrant(t, reply, err)
	other := "r1"
	for i := 2; store.stripeOf(other) == store.stripeOf("r0"); i++ {
		other = "r" + strconv.Itoa(i)
	}
	man.Advance(clockMillis(ttl) - 1)
	clk.armed.Store(true)
	renewed := make(chan error, 1)
	go func() {
		reply, err := svc.Call(ctx, as(renewMsg("n0", "r0", "a-1", f, secretOf("a-1")), "a", 1, 0))
		if err == nil && !reply.OK {
			err = errors.New("not renewed")
		}
		renewed <- err
	}()
	<-clk.reached
	man.Advance(2)
	_, err = svc.Call(ctx, as(acquireMsg("a1", other, "a-1"), "a", 1, 0))
	close(clk.release)
	if err := <-renewed; err != nil {
		t.Fatalf("the renewal: %v", err)
	}
	if !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a grant while a's renewal was in flight: %v", err)
	}
}

// TestTokenLimitCountsLeasesFromBefore: the leases a token acquired
// without a limit count once it has one (a tokens file read again).
func TestTokenLimitCountsLeasesFromBefore(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	r.granted(as(acquireMsg("a0", "r0", "a-1"), "a", 0, 0))
	r.granted(as(acquireMsg("a1", "r1", "a-1"), "a", 0, 0))
	if _, err := r.call(as(acquireMsg("a2", "r2", "a-1"), "a", 2, 0)); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a with a limit of 2, holding 2 from before: %v", err)
	}
}
