package wire

import (
	"context"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
)

// TestReplayedAcquireNeedsTheSecret: the request id of an acquisition (which
// is logged) is worth nothing without the secret its holder chose: a replay
// with another secret is refused with nothing usable in the answer, and
// changes nothing; with the secret it gets the same grant. The renewal and
// release paths check the secret too.
func TestReplayedAcquireNeedsTheSecret(t *testing.T) {
	r := newRig(t, nil)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
	if !strings.Contains(r.logs.String(), "requestId=q1") {
		t.Fatalf("the request id is not in the log: %s", r.logs.String())
	}
	before := r.state()
	for _, other := range []string{"", "0123456789abcdef", secret + "!", strings.ToUpper(secret), secretOf("b")} {
		m := acquireMsg("q1", "deploy", "a")
		m.Secret = other
		if other == "" {
			// Without a secret at all the request does not even decode.
			body, _ := EncodeMessage(m)
			st, out := r.do("POST", OpAcquire.Path(), strings.Replace(string(body), `,"secret":""`, ``, 1))
			if st != 400 || errCodeOf(t, out) != CodeMissingField {
				t.Fatalf("replay without a secret: %d %v", st, out)
			}
			continue
		}
		st, out := r.post(OpAcquire, m)
		if st != 403 || errCodeOf(t, out) != CodeWrongSecret {
			t.Fatalf("replay with secret %q: %d %v", other, st, out)
		}
		// Nothing renewable: the attacker's secret does not work either.
		st, out = r.post(OpRenew, renewMsg("q2", "deploy", "a", f, other))
		if st != 403 || errCodeOf(t, out) != CodeWrongSecret {
			t.Fatalf("renew with the attacker's secret: %d %v", st, out)
		}
		st, out = r.post(OpRelease, releaseMsg("q3", "deploy", "a", f, other))
		if st != 403 || errCodeOf(t, out) != CodeWrongSecret {
			t.Fatalf("release with the attacker's secret: %d %v", st, out)
		}
	}
	if after := r.state(); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused replays changed the state:\n%+v\n%+v", before, after)
	}
	// The holder's own retry gets its grant.
	st, out := r.post(OpAcquire, acquireMsg("q1", "deploy", "a"))
	if g, _ := grantOf(t, st, out); g != f {
		t.Fatalf("the holder's retry got fence %d", g)
	}
	// Once the lease is over, the same request id with the same secret is a
	// new acquisition (the spec's rule), and with another secret it is still
	// refused while the record stands.
	r.clk.Advance(1000)
	m := acquireMsg("q1", "deploy", "a")
	m.Secret = "yet-another-secret"
	if st, out := r.post(OpAcquire, m); st != 403 {
		t.Fatalf("replay of an expired acquisition with another secret: %d %v", st, out)
	}
	if g, _ := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a")); g != f+1 {
		t.Fatalf("a retry after the lease ended got fence %d, want %d", g, f+1)
	}
	if strings.Contains(r.logs.String(), secret) {
		t.Fatal("a secret is in the log")
	}
}

// TestReleaseIsIdempotent: a retried release whose first attempt ended the
// lease is answered ok whatever happened since (another holder acquired
// and released, or holds it now), only with the same request id and secret,
// and only for one TTL.
func TestReleaseIsIdempotent(t *testing.T) {
	r := newRig(t, nil)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
	ok := func(m Message) {
		t.Helper()
		if st, out := r.post(OpRelease, m); st != 200 || out["ok"] != true || len(out) != 1 {
			t.Fatalf("release %s: %d %v", m.Request.RequestID, st, out)
		}
	}
	expired := func(m Message) {
		t.Helper()
		if st, out := r.post(OpRelease, m); st != 200 || out["reason"] != "expired" {
			t.Fatalf("release %s: %d %v", m.Request.RequestID, st, out)
		}
	}
	rel := releaseMsg("rel-1", "deploy", "a", f, secret)
	ok(rel)
	ok(rel)
	fb, sb := r.grant(OpAcquire, acquireMsg("q2", "deploy", "b"))
	ok(rel) // b holds it now
	ok(releaseMsg("rel-2", "deploy", "b", fb, sb))
	r.grant(OpAcquire, acquireMsg("q3", "deploy", "c"))
	ok(rel) // b came and went, c holds it
	// Another request id, or the same one with another secret, is not a
	// retry: the lease is over.
	expired(releaseMsg("rel-3", "deploy", "a", f, secret))
	forged := rel
	forged.Secret = "not-the-holders-secret"
	expired(forged)
	// After one TTL the release is forgotten, by the store too once swept.
	r.clk.Advance(1001)
	expired(rel)
	if n := r.state().Released; n != 0 {
		t.Fatalf("%d releases still remembered after a TTL", n)
	}
	if _, err := r.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := r.state(); len(st.Stored.Released) != 0 {
		t.Fatalf("the store still keeps %+v", st.Stored.Released)
	}
}

// TestRefusedCallsCreateNoState: renewals and releases of leases that were
// never granted, denied acquisitions and refused bodies leave nothing behind.
func TestRefusedCallsCreateNoState(t *testing.T) {
	r := newRig(t, nil)
	r.grant(OpAcquire, acquireMsg("q0", "held", "a"))
	before := r.state()
	long := strings.Repeat("n", 200)
	for i := range 500 {
		name := long + strconv.Itoa(i)
		if st, out := r.post(OpRenew, renewMsg("rn"+strconv.Itoa(i), name, "x", 1, "some-secret-or-other")); st != 200 || out["reason"] != "expired" {
			t.Fatalf("renew of a never-acquired name: %d %v", st, out)
		}
		if st, out := r.post(OpRelease, releaseMsg("rl"+strconv.Itoa(i), name, "x", 1, "some-secret-or-other")); st != 200 || out["reason"] != "expired" {
			t.Fatalf("release of a never-acquired name: %d %v", st, out)
		}
		if st, out := r.post(OpAcquire, acquireMsg("aq"+strconv.Itoa(i), "held", "b")); st != 200 || out["heldBy"] != "a" {
			t.Fatalf("denied acquisition: %d %v", st, out)
		}
		if st, _ := r.post(OpAcquire, acquireMsg("id", strings.Repeat("x", DefaultMaxIDBytes+1), "b")); st != 400 {
			t.Fatalf("an over-long resource: %d", st)
		}
	}
	if after := r.state(); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused calls left state behind:\n%+v\n%+v", before, after)
	}
}

// TestLiveLeaseLimit: a full coordinator refuses new leases with 503
// too_many_leases, never evicts a live one, takes back the room of released
// and expired ones, and still answers everything else.
func TestLiveLeaseLimit(t *testing.T) {
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	svc, err := NewService(ServiceConfig{Clock: clk, TTL: time.Second, MaxLeases: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, clk: clk, svc: svc, h: NewHandler(svc, HandlerOptions{})}
	fences := map[string]uint64{}
	for _, res := range []string{"r1", "r2", "r3"} {
		fences[res], _ = r.grant(OpAcquire, acquireMsg("q-"+res, res, "a"))
	}
	full := func(res string) {
		t.Helper()
		st, out := r.post(OpAcquire, acquireMsg("full-"+res, res, "b"))
		if st != 503 || errCodeOf(t, out) != CodeTooManyLeases {
			t.Fatalf("a fourth lease: %d %v", st, out)
		}
	}
	full("r4")
	full("r5")
	// Everything else still works: the holders renew, others are denied.
	r.grant(OpRenew, renewMsg("rn", "r1", "a", fences["r1"], secretOf("a")))
	if st, out := r.post(OpAcquire, acquireMsg("d", "r2", "b")); st != 200 || out["heldBy"] != "a" {
		t.Fatalf("denial when full: %d %v", st, out)
	}
	// A release makes room.
	if st, out := r.post(OpRelease, releaseMsg("rl", "r2", "a", fences["r2"], secretOf("a"))); st != 200 || out["ok"] != true {
		t.Fatalf("%d %v", st, out)
	}
	r.grant(OpAcquire, acquireMsg("q-r4", "r4", "b"))
	full("r5")
	// Expired leases make room: the full service sweeps before refusing.
	clk.Advance(1000) // r3 and r4 expired; r1 (renewed at 1000) too
	r.grant(OpAcquire, acquireMsg("q-r5", "r5", "b"))
	if n := svc.Records(); n > 3 {
		t.Fatalf("%d records with a limit of 3", n)
	}
}

// TestSweepDeletesExpiredRecords: once a lease is over its record goes, so
// memory and the store stay proportional to live leases; a renewed lease
// keeps its record; fences keep climbing.
func TestSweepDeletesExpiredRecords(t *testing.T) {
	store := NewMemoryStore()
	r := newRig(t, store)
	for i := range 50 {
		r.grant(OpAcquire, acquireMsg("q"+strconv.Itoa(i), "res"+strconv.Itoa(i), "a"))
	}
	r.clk.Advance(500)
	f, _ := r.grant(OpAcquire, acquireMsg("q-live", "live", "a"))
	if n, err := r.svc.Sweep(context.Background()); n != 0 || err != nil {
		t.Fatalf("swept %d live records (%v)", n, err)
	}
	r.clk.Advance(600) // the 50 expired; "live" has 400 ms left
	if n, err := r.svc.Sweep(context.Background()); n != 50 || err != nil {
		t.Fatalf("swept %d, want 50 (%v)", n, err)
	}
	if store.Len() != 1 || r.svc.Records() != 1 {
		t.Fatalf("%d records stored, %d counted", store.Len(), r.svc.Records())
	}
	if g, _ := r.grant(OpAcquire, acquireMsg("q-next", "res0", "b")); g != f+1 {
		t.Fatalf("fence %d after the sweep, want %d", g, f+1)
	}
}

// TestIDLimit: ids longer than the handler's limit are refused before
// anything is looked up.
func TestIDLimit(t *testing.T) {
	r := newRig(t, nil)
	r.h = NewHandler(r.svc, HandlerOptions{MaxIDBytes: 8})
	r.grant(OpAcquire, acquireMsg("12345678", "12345678", "12345678"))
	for _, m := range []Message{acquireMsg("123456789", "r", "h"), acquireMsg("q", "123456789", "h"), acquireMsg("q", "r", "123456789")} {
		if st, out := r.post(OpAcquire, m); st != 400 || errCodeOf(t, out) != CodeInvalidValue {
			t.Fatalf("%+v: %d %v", m.Request, st, out)
		}
	}
}

// TestFullSweepOnTheCallersStripe: a full service sweeps before refusing,
// also when the expired record shares the lock stripe of the resource
// being acquired (which the caller already holds).
func TestFullSweepOnTheCallersStripe(t *testing.T) {
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	svc, err := NewService(ServiceConfig{Clock: clk, TTL: time.Second, MaxLeases: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, clk: clk, svc: svc, h: NewHandler(svc, HandlerOptions{})}
	first := "res-0"
	second := ""
	for i := 1; second == ""; i++ {
		if n := "res-" + strconv.Itoa(i); svc.stripe(n) == svc.stripe(first) {
			second = n
		}
	}
	r.grant(OpAcquire, acquireMsg("q1", first, "a"))
	clk.Advance(1000)
	r.grant(OpAcquire, acquireMsg("q2", second, "b"))
	if svc.Records() != 1 {
		t.Fatalf("%d records", svc.Records())
	}
}

// TestSweepForgetsOldReleases: sweeping until Sweep returns zero forgets
// every release older than a TTL, even more than one call removes and with
// no expired record left to delete (the coordinator's sweep loop stops at
// zero).
func TestSweepForgetsOldReleases(t *testing.T) {
	store := NewMemoryStore()
	r := newRig(t, store)
	ctx := context.Background()
	const n = sweepBatch + 100
	for i := range n {
		id := strconv.Itoa(i)
		rep, err := r.svc.Call(ctx, acquireMsg("a"+id, "res"+id, "h"))
		if err != nil || !rep.OK {
			t.Fatal(rep, err)
		}
		if rep, err := r.svc.Call(ctx, releaseMsg("r"+id, "res"+id, "h", rep.Grant.Fence, secretOf("h"))); err != nil || !rep.OK {
			t.Fatal(rep, err)
		}
	}
	if store.Len() != 0 {
		t.Fatalf("%d records after releasing all", store.Len())
	}
	r.clk.Advance(2 * float64(ttl.Milliseconds()))
	total, calls := 0, 0
	for {
		k, err := r.svc.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
		total += k
		calls++
	}
	if total != n || calls < 2 {
		t.Fatalf("swept %d in %d calls, want %d releases in at least 2", total, calls, n)
	}
	if left, _ := store.Forgettable(ctx, math.MaxFloat64, 2*n); len(left) != 0 {
		t.Fatalf("%d releases still remembered", len(left))
	}
}
