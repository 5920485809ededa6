package service

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/wire"
)

// The tests of a Local with a Ledger (LocalConfig.Ledger): the Worker's
// objects, one per resource, each a Local, counting a token's leases in a
// ledger they share.

// fakeLedger is a Ledger in memory: the places of each owner, by resource,
// and every call made to it.
type fakeLedger struct {
	mu     sync.Mutex
	places map[string]map[string]Entry // owner -> resource -> record
	calls  []string
	// fail, if set, fails the calls whose name it returns true for.
	fail func(call string) bool
}

func newFakeLedger() *fakeLedger { return &fakeLedger{places: map[string]map[string]Entry{}} }

func (f *fakeLedger) log(call string, e Entry) error {
	f.calls = append(f.calls, call+" "+e.Owner+" "+e.Resource)
	if f.fail != nil && f.fail(call) {
		return errors.New("the ledger did not answer")
	}
	return nil
}

func (f *fakeLedger) Reserve(_ context.Context, owner string, limit int, e Entry, _ float64) (bool, error) {
	if limit == 0 {
		return true, nil // like the Worker's, no place for an owner without a limit
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.log("reserve", e); err != nil {
		return false, err
	}
	ps := f.places[owner]
	if ps == nil {
		ps = map[string]Entry{}
		f.places[owner] = ps
	}
	if _, replaced := ps[e.Resource]; !replaced && len(ps) >= limit {
		return false, nil
	}
	ps[e.Resource] = e
	return true, nil
}

// Held is 0: like the Worker's, it tells only by a Reserve.
func (f *fakeLedger) Held(string, string, int, float64) int { return 0 }

func (f *fakeLedger) Renewed(_ context.Context, e Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.log("renewed", e); err != nil {
		return err
	}
	if p, ok := f.places[e.Owner][e.Resource]; ok && p.Fence == e.Fence {
		f.places[e.Owner][e.Resource] = e
	}
	return nil
}

func (f *fakeLedger) Ended(_ context.Context, e Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.log("ended", e)
	if p, ok := f.places[e.Owner][e.Resource]; ok && p.Fence == e.Fence {
		delete(f.places[e.Owner], e.Resource)
	}
}

func (f *fakeLedger) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeLedger) held(owner string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.places[owner])
}

func sameCalls(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("%s: the ledger was called %q, want %q", what, got, want)
	}
}

// TestLedgerHoldsTheLimitAcrossLocals: two Locals (two objects) share a
// ledger; a token's third lease is refused on either, whatever each holds
// itself; a release on one gives a place back to the other; a renewal
// moves the place; a token without a limit (a place without one, which
// this ledger, like the Worker's, does not keep), and a call without a
// token, never reach the ledger.
func TestLedgerHoldsTheLimitAcrossLocals(t *testing.T) {
	led := newFakeLedger()
	one, two := newRig(t, nil, LocalConfig{Ledger: led}), newRig(t, nil, LocalConfig{Ledger: led})
	a := func(m wire.Message) wire.Message { return as(m, "a", 2, 0) }
	f1 := one.granted(a(acquireMsg("q1", "r1", "a-1")))
	two.granted(a(acquireMsg("q2", "r2", "a-2")))
	sameCalls(t, "two grants", led.took(), "reserve a r1", "reserve a r2")
	before := one.state()
	if _, err := one.call(a(acquireMsg("q3", "r3", "a-3"))); !isCode(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a third lease: %v", err)
	}
	if after := one.state(); !equalState(before, after) {
		t.Fatalf("the refusal changed the state:\n%+v\n%+v", before, after)
	}
	sameCalls(t, "the refused third", led.took(), "reserve a r3")
	// The retry of a grant is answered from the entry: no new place.
	one.granted(a(acquireMsg("q1", "r1", "a-1")))
	sameCalls(t, "a retried grant", led.took())
	// A renewal moves the place to its new expiry.
	one.clk.Advance(clockMillis(100 * time.Millisecond))
	one.granted(a(renewMsg("n1", "r1", "a-1", f1, secretOf("a-1"))))
	sameCalls(t, "a renewal", led.took(), "renewed a r1")
	if e, _ := one.store.Entry("r1"); led.places["a"]["r1"].ExpiresAt != e.ExpiresAt {
		t.Fatalf("the place is held until %v, the lease until %v", led.places["a"]["r1"].ExpiresAt, e.ExpiresAt)
	}
	// A release on one gives a place back, for the other.
	if reply, err := one.call(a(releaseMsg("x1", "r1", "a-1", f1, secretOf("a-1")))); err != nil || !reply.OK {
		t.Fatalf("release: %+v %v", reply, err)
	}
	sameCalls(t, "a release", led.took(), "ended a r1")
	two.granted(a(acquireMsg("q3", "r3", "a-3")))
	if n := led.held("a"); n != 2 {
		t.Fatalf("a holds %d places", n)
	}
	// No limit, no token: no ledger.
	one.granted(as(acquireMsg("b1", "rb", "b-1"), "b", 0, 0))
	one.granted(acquireMsg("n1", "rn", "n-1"))
	sameCalls(t, "calls without a limit", led.took(), "reserve a r3")
}

// TestLedgerFailsClosed: a ledger that does not answer refuses the grants
// and renewals of a token with a limit (503 unavailable), and nothing is
// written; a release is answered, its place lapsing at the lease's expiry.
func TestLedgerFailsClosed(t *testing.T) {
	led := newFakeLedger()
	r := newRig(t, nil, LocalConfig{Ledger: led})
	a := func(m wire.Message) wire.Message { return as(m, "a", 2, 0) }
	f := r.granted(a(acquireMsg("q1", "r1", "a-1")))
	led.took()
	led.fail = func(string) bool { return true }
	before := r.state()
	if _, err := r.call(a(acquireMsg("q2", "r2", "a-2"))); !isCode(err, wire.CodeUnavailable) {
		t.Fatalf("a grant without the ledger: %v", err)
	}
	r.clk.Advance(clockMillis(100 * time.Millisecond))
	if _, err := r.call(a(renewMsg("n1", "r1", "a-1", f, secretOf("a-1")))); !isCode(err, wire.CodeUnavailable) {
		t.Fatalf("a renewal without the ledger: %v", err)
	}
	if after := r.state(); !equalState(before, after) {
		t.Fatalf("the refusals changed the state:\n%+v\n%+v", before, after)
	}
	// Calls of tokens without a limit go on.
	r.granted(as(acquireMsg("b1", "rb", "b-1"), "b", 0, 0))
	if reply, err := r.call(a(releaseMsg("x1", "r1", "a-1", f, secretOf("a-1")))); err != nil || !reply.OK {
		t.Fatalf("a release without the ledger: %+v %v", reply, err)
	}
	sameCalls(t, "without the ledger", led.took(), "reserve a r2", "renewed a r1", "ended a r1")
}

// TestLedgerWithWaiters: a release that hands the resource over reserves
// for the waiter's token (and ends the holder's place); a waiter whose
// token has no place left is refused, and the next one served.
func TestLedgerWithWaiters(t *testing.T) {
	led := newFakeLedger()
	r := newRig(t, nil, LocalConfig{Ledger: led})
	f := r.granted(as(acquireMsg("h", "doc", "h-1"), "h", 1, 0))
	if _, err := led.Reserve(context.Background(), "w", 1, Entry{Owner: "w", Resource: "elsewhere", Fence: 1}, 0); err != nil {
		t.Fatal(err)
	}
	led.took()
	ctx := context.Background()
	w := r.join(ctx, as(waitingAcquire("w1", "doc", "w-1", time.Minute), "w", 1, 0), 1)
	v := r.join(ctx, as(waitingAcquire("v1", "doc", "v-1", time.Minute), "v", 1, 0), 2)
	if reply, err := r.call(as(releaseMsg("x", "doc", "h-1", f, secretOf("h-1")), "h", 1, 0)); err != nil || !reply.OK {
		t.Fatalf("release: %+v %v", reply, err)
	}
	if a := got(t, w); !isCode(a.err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("the waiter at its limit: %+v %v", a.reply, a.err)
	}
	if a := got(t, v); a.err != nil || !a.reply.OK || a.reply.Grant.HolderID != "v-1" {
		t.Fatalf("the next waiter: %+v %v", a.reply, a.err)
	}
	sameCalls(t, "the handover", led.took(), "reserve w doc", "reserve v doc", "ended h doc")
	if led.held("h") != 0 || led.held("v") != 1 || led.held("w") != 1 {
		t.Fatalf("places: %v", led.places)
	}
}

// TestLedgerOverOwnExpiredLease: a token's grant over its own expired
// record takes a place again (the ledger's place for it may have lapsed).
func TestLedgerOverOwnExpiredLease(t *testing.T) {
	led := newFakeLedger()
	r := newRig(t, nil, LocalConfig{Ledger: led})
	r.granted(as(acquireMsg("a0", "mine", "a-1"), "a", 1, 0))
	r.clk.Advance(clockMillis(ttl))
	r.granted(as(acquireMsg("a1", "mine", "a-2"), "a", 1, 0))
	sameCalls(t, "a grant over its own expired record", led.took(), "reserve a mine", "reserve a mine", "ended a mine")
	if n := led.held("a"); n != 1 {
		t.Fatalf("a holds %d places", n)
	}
}

// TestMemLedgerPlaces: the Ledger of a Local in memory counts only the
// places live at the reading it is given (the earliest expiry found again
// after a renewal moved it; a lapsed place kept while its resource's
// decision runs), replaces the place of the same resource,
// takes one without a limit at 0, and gives back only the place of the
// fence it is told of.
func TestMemLedgerPlaces(t *testing.T) {
	deciding := map[string]bool{}
	m, ctx := newMemLedger(func(r string) bool { return !deciding[r] }), context.Background()
	rec := func(res string, fence uint64, until float64) Entry {
		return Entry{Owner: "a", Resource: res, Fence: fence, ExpiresAt: until}
	}
	reserve := func(e Entry, limit int, now float64, want bool) {
		t.Helper()
		if ok, err := m.Reserve(ctx, "a", limit, e, now); err != nil || ok != want {
			t.Fatalf("reserve %s at %v (limit %d): %v %v, want %v", e.Resource, now, limit, ok, err, want)
		}
	}
	reserve(rec("p", 1, 10), 2, 0, true)
	reserve(rec("q", 2, 20), 2, 0, true)
	reserve(rec("r", 3, 70), 2, 5, false)
	reserve(rec("q", 4, 40), 2, 5, true) // q's place replaced
	if err := m.Renewed(ctx, rec("p", 1, 50)); err != nil {
		t.Fatal(err)
	}
	reserve(rec("r", 3, 70), 2, 15, false) // p renewed: live until 50
	deciding["q"] = true
	reserve(rec("r", 3, 70), 2, 45, false) // q lapsed at 40, but may be renewing
	deciding["q"] = false
	reserve(rec("r", 3, 70), 2, 45, true)
	if n := m.live("a", 45); n != 2 {
		t.Fatalf("%d live places, want 2 (p, r)", n)
	}
	reserve(rec("s", 5, 60), 0, 45, true) // no limit
	m.Ended(ctx, rec("p", 9, 50))         // not p's fence: kept
	if n := m.live("a", 45); n != 3 {
		t.Fatalf("%d live places, want 3", n)
	}
	for _, e := range []Entry{rec("p", 1, 50), rec("r", 3, 70), rec("s", 5, 60)} {
		m.Ended(ctx, e)
	}
	if len(m.owners) != 0 {
		t.Fatalf("places left: %+v", m.owners["a"])
	}
}

// live returns how many of owner's places are live at now.
func (m *memLedger) live(owner string, now float64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	if o := m.owners[owner]; o != nil {
		for _, p := range o.places {
			if now < p.until {
				n++
			}
		}
	}
	return n
}
