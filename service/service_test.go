package service

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// TestReplayedAcquireNeedsTheSecret: the request id of an acquisition (which
// is logged) is worth nothing without the secret its holder chose: a replay
// with another secret is refused with nothing usable in the answer, and
// changes nothing; with the secret it gets the same grant. The renewal and
// release paths check the secret too.
func TestReplayedAcquireNeedsTheSecret(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f, secret := r.grant(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	if !strings.Contains(r.logs.String(), "requestId=q1") {
		t.Fatalf("the request id is not in the log: %s", r.logs.String())
	}
	before := r.state()
	for _, other := range []string{"", "0123456789abcdef", secret + "!", strings.ToUpper(secret), secretOf("b")} {
		m := acquireMsg("q1", "deploy", "a")
		m.Secret = other
		if other == "" {
			// Without a secret at all the request does not even decode.
			body, _ := wire.EncodeMessage(m)
			st, out := r.do("POST", wire.OpAcquire.Path(), strings.Replace(string(body), `,"secret":""`, ``, 1))
			if st != 400 || errCodeOf(t, out) != wire.CodeMissingField {
				t.Fatalf("replay without a secret: %d %v", st, out)
			}
			continue
		}
		st, out := r.post(wire.OpAcquire, m)
		if st != 403 || errCodeOf(t, out) != wire.CodeWrongSecret {
			t.Fatalf("replay with secret %q: %d %v", other, st, out)
		}
		// Nothing renewable: the attacker's secret does not work either.
		r.wrongSecret("the attacker's secret", "q2", "q3", f, other)
	}
	if after := r.state(); !reflect.DeepEqual(before, after) {
		t.Fatalf("refused replays changed the state:\n%+v\n%+v", before, after)
	}
	// The holder's own retry gets its grant.
	st, out := r.post(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	if g, _ := grantOf(t, st, out); g != f {
		t.Fatalf("the holder's retry got fence %d", g)
	}
	// Once the lease is over, the same request id with the same secret is a
	// new acquisition (the spec's rule), and with another secret it is still
	// refused while the record stands.
	r.clk.Advance(1000)
	m := acquireMsg("q1", "deploy", "a")
	m.Secret = "yet-another-secret"
	if st, out := r.post(wire.OpAcquire, m); st != 403 {
		t.Fatalf("replay of an expired acquisition with another secret: %d %v", st, out)
	}
	if g, _ := r.grant(wire.OpAcquire, acquireMsg("q1", "deploy", "a")); g != f+1 {
		t.Fatalf("a retry after the lease ended got fence %d, want %d", g, f+1)
	}
	if strings.Contains(r.logs.String(), secret) {
		t.Fatal("a secret is in the log")
	}
	for k, v := range r.disk.contents() {
		if strings.Contains(k+v, secret) {
			t.Fatal("a secret is stored")
		}
	}
}

// TestReleaseIsIdempotent: a retried release whose first attempt ended the
// lease is answered ok whatever happened since (another holder acquired
// and released, or holds it now), only with the same request id and secret,
// and only for one TTL.
func TestReleaseIsIdempotent(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f, secret := r.grant(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	ok := func(m wire.Message) {
		t.Helper()
		if st, out := r.post(wire.OpRelease, m); st != 200 || out["ok"] != true || len(out) != 1 {
			t.Fatalf("release %s: %d %v", m.Request.RequestID, st, out)
		}
	}
	expired := func(m wire.Message) {
		t.Helper()
		if st, out := r.post(wire.OpRelease, m); st != 200 || out["reason"] != "expired" {
			t.Fatalf("release %s: %d %v", m.Request.RequestID, st, out)
		}
	}
	rel := releaseMsg("rel-1", "deploy", "a", f, secret)
	ok(rel)
	ok(rel)
	fb, sb := r.grant(wire.OpAcquire, acquireMsg("q2", "deploy", "b"))
	ok(rel) // b holds it now
	ok(releaseMsg("rel-2", "deploy", "b", fb, sb))
	r.grant(wire.OpAcquire, acquireMsg("q3", "deploy", "c"))
	ok(rel) // b came and went, c holds it
	// Another request id, or the same one with another secret, is not a
	// retry: the lease is over.
	expired(releaseMsg("rel-3", "deploy", "a", f, secret))
	forged := rel
	forged.Secret = "not-the-holders-secret"
	expired(forged)
	// After one TTL the release is forgotten, by the store too once swept;
	// the resource keeps only its last fence (c's).
	r.clk.Advance(1001)
	expired(rel)
	if n, err := r.svc.Sweep(context.Background()); err != nil || n != 3 {
		t.Fatalf("swept %d (%v), want c's expired lease and 2 releases", n, err)
	}
	if st := r.state(); len(st.Memory) != 1 || st.Memory["deploy"].LastFence != fb+1 || st.Stored["deploy"] != `{"lastFence":3}` ||
		st.Releases != 0 || st.Leases != 0 {
		t.Fatalf("the store still keeps %+v", st)
	}
}

// TestReleasesPerResourceAreBounded: a resource remembers its newest
// MaxReleases releases; the store as a whole at most ReleaseMemory; a
// release beyond is done but not remembered (its retry is answered
// expired, which a holder treats as over).
func TestReleasesPerResourceAreBounded(t *testing.T) {
	r := newRig(t, nil, LocalConfig{Limits: Limits{ReleaseMemory: MaxReleases + 4}})
	var rels []wire.Message
	for i := range MaxReleases + 2 {
		id := strconv.Itoa(i)
		f, s := r.grant(wire.OpAcquire, acquireMsg("q"+id, "deploy", "h"+id))
		rels = append(rels, releaseMsg("rel-"+id, "deploy", "h"+id, f, s))
		if st, out := r.post(wire.OpRelease, rels[i]); st != 200 || out["ok"] != true {
			t.Fatalf("%d %v", st, out)
		}
	}
	for i, m := range rels {
		_, out := r.post(wire.OpRelease, m)
		if remembered := out["ok"] == true; remembered != (i >= 2) {
			t.Fatalf("release %d: %v (remembered: the newest %d)", i, out, MaxReleases)
		}
	}
	for i := range 6 {
		res := "other-" + strconv.Itoa(i)
		f, s := r.grant(wire.OpAcquire, acquireMsg("o"+strconv.Itoa(i), res, "h"))
		r.post(wire.OpRelease, releaseMsg("orel-"+strconv.Itoa(i), res, "h", f, s))
	}
	if n := r.store.releases.Load(); n != MaxReleases+4 {
		t.Fatalf("%d releases remembered with a memory of %d", n, MaxReleases+4)
	}
	if _, out := r.post(wire.OpRelease, releaseMsg("orel-5", "other-5", "h", r.store.Issued(), secretOf("h"))); out["reason"] != "expired" {
		t.Fatalf("a release beyond the memory is remembered: %v", out)
	}
}

// TestRefusedCallsCreateNoState: renewals and releases of leases that were
// never granted, denied acquisitions and refused bodies leave nothing behind.
func TestRefusedCallsCreateNoState(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	r.grant(wire.OpAcquire, acquireMsg("q0", "held", "a"))
	before := r.state()
	writes := len(r.disk.writes)
	long := strings.Repeat("n", 200)
	for i := range 500 {
		name := long + strconv.Itoa(i)
		if st, out := r.post(wire.OpRenew, renewMsg("rn"+strconv.Itoa(i), name, "x", 1, "some-secret-or-other")); st != 200 || out["reason"] != "expired" {
			t.Fatalf("renew of a never-acquired name: %d %v", st, out)
		}
		if st, out := r.post(wire.OpRelease, releaseMsg("rl"+strconv.Itoa(i), name, "x", 1, "some-secret-or-other")); st != 200 || out["reason"] != "expired" {
			t.Fatalf("release of a never-acquired name: %d %v", st, out)
		}
		if st, out := r.post(wire.OpAcquire, acquireMsg("aq"+strconv.Itoa(i), "held", "b")); st != 200 || out["heldBy"] != "a" {
			t.Fatalf("denied acquisition: %d %v", st, out)
		}
		if st, _ := r.post(wire.OpAcquire, acquireMsg("id", strings.Repeat("x", wire.DefaultMaxIDBytes+1), "b")); st != 400 {
			t.Fatalf("an over-long resource: %d", st)
		}
	}
	if after := r.state(); !reflect.DeepEqual(before, after) || len(r.disk.writes) != writes {
		t.Fatalf("refused calls left state behind:\n%+v\n%+v", before, after)
	}
}

// TestLiveLeaseLimit: a full coordinator refuses new leases with 503
// too_many_leases, never evicts a live one, takes back the room of released
// and expired ones, and still answers everything else.
func TestLiveLeaseLimit(t *testing.T) {
	r := newRig(t, nil, LocalConfig{Limits: Limits{MaxLeases: 3}})
	fences := map[string]uint64{}
	for _, res := range []string{"r1", "r2", "r3"} {
		fences[res], _ = r.grant(wire.OpAcquire, acquireMsg("q-"+res, res, "a"))
	}
	full := func(res string) {
		t.Helper()
		st, out := r.post(wire.OpAcquire, acquireMsg("full-"+res, res, "b"))
		if st != 503 || errCodeOf(t, out) != wire.CodeTooManyLeases {
			t.Fatalf("a fourth lease: %d %v", st, out)
		}
	}
	full("r4")
	full("r5")
	// Everything else still works: the holders renew, others are denied.
	r.grant(wire.OpRenew, renewMsg("rn", "r1", "a", fences["r1"], secretOf("a")))
	if st, out := r.post(wire.OpAcquire, acquireMsg("d", "r2", "b")); st != 200 || out["heldBy"] != "a" {
		t.Fatalf("denial when full: %d %v", st, out)
	}
	// A release makes room.
	if st, out := r.post(wire.OpRelease, releaseMsg("rl", "r2", "a", fences["r2"], secretOf("a"))); st != 200 || out["ok"] != true {
		t.Fatalf("%d %v", st, out)
	}
	r.grant(wire.OpAcquire, acquireMsg("q-r4", "r4", "b"))
	full("r5")
	// Expired leases make room: the full store sweeps before refusing.
	r.clk.Advance(1000) // r3 and r4 expired; r1 (renewed at 1000) too
	r.grant(wire.OpAcquire, acquireMsg("q-r5", "r5", "b"))
	if n := r.store.Leases(); n > 3 {
		t.Fatalf("%d records with a limit of 3", n)
	}
}

// TestFullSweepOnTheCallersStripe: a full store sweeps before refusing,
// also when the expired record shares the lock stripe of the resource
// being acquired (which the caller already holds).
func TestFullSweepOnTheCallersStripe(t *testing.T) {
	r := newRig(t, nil, LocalConfig{Limits: Limits{MaxLeases: 1}})
	first, second := "res-0", ""
	for i := 1; second == ""; i++ {
		if n := "res-" + strconv.Itoa(i); r.store.stripeOf(n) == r.store.stripeOf(first) {
			second = n
		}
	}
	r.grant(wire.OpAcquire, acquireMsg("q1", first, "a"))
	r.clk.Advance(1000)
	r.grant(wire.OpAcquire, acquireMsg("q2", second, "b"))
	if r.store.Leases() != 1 {
		t.Fatalf("%d records", r.store.Leases())
	}
}

// TestSweepDeletesExpiredRecords: once a lease is over its record goes,
// leaving only its fence (lastFence), so memory and the store stay
// proportional to live leases and FenceMemory; a renewed lease keeps its
// record; fences keep climbing.
func TestSweepDeletesExpiredRecords(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	for i := range 50 {
		r.grant(wire.OpAcquire, acquireMsg("q"+strconv.Itoa(i), "res"+strconv.Itoa(i), "a"))
	}
	r.clk.Advance(500)
	f, _ := r.grant(wire.OpAcquire, acquireMsg("q-live", "live", "a"))
	if n, err := r.svc.Sweep(context.Background()); n != 0 || err != nil {
		t.Fatalf("swept %d live records (%v)", n, err)
	}
	r.clk.Advance(600) // the 50 expired; "live" has 400 ms left
	if n, err := r.svc.Sweep(context.Background()); n != 50 || err != nil {
		t.Fatalf("swept %d, want 50 (%v)", n, err)
	}
	if st := r.state(); len(st.Stored) != 52 || st.Leases != 1 || len(st.Memory) != 51 || st.Stored["res7"] != `{"lastFence":8}` {
		t.Fatalf("after the sweep: %+v", st)
	}
	if g, _ := r.grant(wire.OpAcquire, acquireMsg("q-next", "res0", "b")); g != f+1 {
		t.Fatalf("fence %d after the sweep, want %d", g, f+1)
	}
}

// TestWritesAndTheirSyncs: grants and renewals are synced before they are
// answered; releases and sweeps are written without waiting (a later synced
// write makes them durable); refusals write nothing.
func TestWritesAndTheirSyncs(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f, s := r.grant(wire.OpAcquire, acquireMsg("q1", "r", "a"))
	r.grant(wire.OpRenew, renewMsg("q2", "r", "a", f, s))
	r.post(wire.OpRelease, releaseMsg("q3", "r", "a", f, s))
	r.post(wire.OpRelease, releaseMsg("q3", "r", "a", f, s)) // a retry: nothing to write
	r.clk.Advance(2000)
	if _, err := r.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range r.disk.writes {
		got = append(got, strconv.FormatBool(w.sync)+":"+strconv.Itoa(len(w.b.Put))+"/"+strconv.Itoa(len(w.b.Delete)))
	}
	// The grant (with the fence mark: no reserve here), the renewal, the
	// release, the sweep (which keeps the last fence).
	if want := "true:1/0 true:1/0 false:1/0 false:1/0"; strings.Join(got, " ") != want {
		t.Fatalf("writes %v, want %s", got, want)
	}
	if r.disk.writes[0].b.Mark != 1 {
		t.Fatalf("the grant's write carries mark %d", r.disk.writes[0].b.Mark)
	}
}

// TestFenceReserve: with a reserve, the stored fence mark is raised ahead
// of the fences issued (once a fence comes within half the reserve of it)
// in a synced write of its own, before the grant is written; a restart
// resumes above the mark, so losing the last writes (a torn tail) never
// lowers the fences.
func TestFenceReserve(t *testing.T) {
	r := newRig(t, nil, LocalConfig{FenceReserve: 10})
	for i := range 12 {
		r.grant(wire.OpAcquire, acquireMsg("q"+strconv.Itoa(i), "r"+strconv.Itoa(i), "a"))
	}
	var marks []string
	for i, w := range r.disk.writes {
		if w.b.Mark != 0 {
			if !w.sync || len(w.b.Put) != 0 || i+1 >= len(r.disk.writes) {
				t.Fatalf("write %d: %+v", i, w)
			}
			next := r.disk.writes[i+1].b.Put[0].Fence
			marks = append(marks, strconv.FormatUint(w.b.Mark, 10)+"<"+strconv.FormatUint(next, 10))
		}
	}
	if got := strings.Join(marks, " "); got != "10<1 15<6 20<11" {
		t.Fatalf("mark writes %q", got)
	}
	// A restart where the last two grants were lost (a torn tail): the
	// next fence is above the mark, never one of the lost ones.
	lost := newMemPersist()
	for _, w := range r.disk.writes[:len(r.disk.writes)-2] {
		_ = lost.Write(context.Background(), w.b, w.sync)
	}
	r2 := newRig(t, lost, LocalConfig{FenceReserve: 10})
	if f, _ := r2.grant(wire.OpAcquire, acquireMsg("n", "new", "b")); f != 21 {
		t.Fatalf("after the restart fence %d, want 21", f)
	}
}

// TestMinFence: -min-fence makes every new fence at least N, above what
// the restored state knows of.
func TestMinFence(t *testing.T) {
	r := newRig(t, nil, LocalConfig{FenceReserve: 10})
	r.grant(wire.OpAcquire, acquireMsg("q", "r", "a"))
	r2 := newRig(t, r.disk, LocalConfig{FenceReserve: 10, MinFence: 5000})
	if f, _ := r2.grant(wire.OpAcquire, acquireMsg("q2", "s", "a")); f != 5000 {
		t.Fatalf("fence %d with -min-fence 5000", f)
	}
	r3 := newRig(t, r2.disk, LocalConfig{FenceReserve: 10, MinFence: 7})
	if f, _ := r3.grant(wire.OpAcquire, acquireMsg("q3", "t", "a")); f != 5010 {
		t.Fatalf("fence %d: -min-fence below the mark lowered it", f)
	}
}

// markSaver is a memPersist that is a MarkSaver: it records each mark saved
// and after which write, and fails when told to.
type markSaver struct {
	*memPersist
	saved []string // "mark@writes before it"
	fail  error
}

func (m *markSaver) SaveMark(ctx context.Context, mark uint64) error {
	if m.fail != nil {
		return m.fail
	}
	m.mu.Lock()
	m.saved = append(m.saved, strconv.FormatUint(mark, 10)+"@"+strconv.Itoa(len(m.writes)))
	m.mark = max(m.mark, mark)
	m.mu.Unlock()
	return nil
}

// TestMarkSavedBeforeTheFirstFence: Load raises the stored mark a reserve
// above the stored one (or above MinFence - 1) through the Persister's
// SaveMark before anything is issued, and later raises go through
// SaveMark too, so a log that loses the writes after a start (the first
// grants and, in a log, the mark written with them) cannot lower the
// fences. A mark the Persister could not save leaves the Local unloaded,
// and the next call loads it again; a stored mark above lease.MaxFence is
// refused.
func TestMarkSavedBeforeTheFirstFence(t *testing.T) {
	disk := &markSaver{memPersist: newMemPersist()}
	disk.mark = 1024
	disk.fail = errors.New("disk gone")
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	l, _ := NewLocal(LocalConfig{Clock: clk, TTL: ttl, Persist: disk, FenceReserve: 1024})
	_ = disk.memPersist.Write(context.Background(), Batch{Put: []Entry{{Resource: "kept", LastFence: 1000}}}, true)
	if err := l.Load(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Load with the mark unsaved: %v", err)
	}
	disk.fail = nil
	if err := l.Load(context.Background()); err != nil || l.Issued() != 1024 {
		t.Fatalf("Load again: %v, issued %d", err, l.Issued())
	}
	svc, _ := New(Config{TTL: ttl, Store: l, AfterFunc: clk.AfterFunc})
	var fences []uint64
	for i := range 600 {
		rep, err := svc.Call(context.Background(), acquireMsg("q"+strconv.Itoa(i), "r"+strconv.Itoa(i), "a"))
		if err != nil || !rep.OK {
			t.Fatal(rep, err)
		}
		fences = append(fences, rep.Grant.Fence)
	}
	// Saved at the start, before any write; then once fence 1537 came
	// within half the reserve of 2048, before its grant was written.
	if got := strings.Join(disk.saved, " "); fences[0] != 1025 || got != "2048@1 2560@513" {
		t.Fatalf("first fence %d, marks saved %q", fences[0], got)
	}
	for _, w := range disk.writes {
		if w.b.Mark != 0 {
			t.Fatalf("a mark written with Write: %+v", w)
		}
	}
	// With MinFence above the stored mark, the mark saved covers it too.
	disk2 := &markSaver{memPersist: newMemPersist()}
	disk2.mark = 10
	l2, _ := NewLocal(LocalConfig{Clock: clk, TTL: ttl, Persist: disk2, FenceReserve: 1024, MinFence: 5000})
	if err := l2.Load(context.Background()); err != nil || l2.Issued() != 4999 || strings.Join(disk2.saved, " ") != "6023@0" {
		t.Fatalf("with MinFence: %v, issued %d, saved %q", err, l2.Issued(), disk2.saved)
	}
	// A mark above lease.MaxFence (a damaged or edited state) is refused,
	// and nothing is written.
	disk3 := &markSaver{memPersist: newMemPersist()}
	disk3.mark = lease.MaxFence + 1
	l3, _ := NewLocal(LocalConfig{Clock: clk, TTL: ttl, Persist: disk3, FenceReserve: 1024})
	if err := l3.Load(context.Background()); !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), "above the highest fence") || len(disk3.saved) != 0 {
		t.Fatalf("a mark above MaxFence: %v, saved %q", err, disk3.saved)
	}
}

// TestConcurrentGrantsGetDistinctFences: grants of many resources at once
// each get their own fence (claimed from the one counter), and the stored
// mark covers all of them.
func TestConcurrentGrantsGetDistinctFences(t *testing.T) {
	r := newRig(t, nil, LocalConfig{FenceReserve: 7})
	var wg sync.WaitGroup
	fences := make([]uint64, 64)
	for i := range fences {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := r.svc.Call(context.Background(), acquireMsg("q"+strconv.Itoa(i), "r"+strconv.Itoa(i), "a"))
			if err != nil || !rep.OK {
				t.Error(rep, err)
				return
			}
			fences[i] = rep.Grant.Fence
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, f := range fences {
		if seen[f] || f == 0 || f > 64 {
			t.Fatalf("fences %v", fences)
		}
		seen[f] = true
	}
	if r.disk.mark < 64 {
		t.Fatalf("stored mark %d below the fences issued", r.disk.mark)
	}
}

// TestDamagedEntriesAreRefused: entries that contradict themselves or the
// fence mark, or hold an instant more than a TTL ahead of the clock, are
// refused at load with a message naming the damage; nothing is repaired.
func TestDamagedEntriesAreRefused(t *testing.T) {
	const good = `{"holderId":"h","requestId":"q","fence":5,"expiresAt":1500,"secretSha256":"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="}`
	rel := `{"requestId":"r","holderId":"h","fence":4,"at":900,"secretSha256":"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="}`
	for _, tc := range []struct{ name, value, want string }{
		{"not JSON", `{"holderId":`, "is damaged"},
		{"unknown member", strings.Replace(good, `"fence"`, `"ownerName":"x","fence"`, 1), "is damaged"},
		{"repeated member", strings.Replace(good, `"fence":5`, `"fence":5,"fence":6`, 1), "is damaged"},
		{"wrong type", strings.Replace(good, `"fence":5`, `"fence":"5"`, 1), "is damaged"},
		{"short hash", strings.Replace(good, `"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="`, `"AQID"`, 1), "is damaged"},
		{"invalid UTF-8", strings.Replace(good, `"h"`, "\"h\xff\"", 1), "is damaged"},
		{"fence above the mark", strings.Replace(good, `"fence":5`, `"fence":8`, 1), "above the fence mark 7"},
		{"no holder", strings.Replace(good, `"holderId":"h",`, ``, 1), "no holder"},
		{"no hash", strings.Replace(good, `,"secretSha256":"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="`, ``, 1), "no secret hash"},
		{"holder without fence", strings.Replace(good, `"fence":5,`, ``, 1), "holder but no fence"},
		{"owner without fence", `{"owner":"t","released":[` + rel + `]}`, "holder but no fence"},
		{"nothing", `{}`, "holds nothing"},
		{"release above the mark", `{"released":[` + strings.Replace(rel, `"fence":4`, `"fence":9`, 1) + `]}`, "damaged release"},
		{"release without id", `{"released":[` + strings.Replace(rel, `"requestId":"r",`, ``, 1) + `]}`, "damaged release"},
		{"too many releases", `{"released":[` + strings.Repeat(rel+",", MaxReleases) + rel + `]}`, "releases"},
		{"from the future", strings.Replace(good, `1500`, `1e300`, 1), "an instant from the future"},
		{"just over a TTL ahead", strings.Replace(good, `1500`, `2000.5`, 1), "an instant from the future"},
		{"release from the future", `{"released":[` + strings.Replace(rel, `"at":900`, `"at":2001`, 1) + `]}`, "an instant from the future"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := newMemPersist()
			disk.mark = 7
			disk.entries["r"] = []byte(tc.value)
			clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
			store, _ := NewLocal(LocalConfig{Clock: clk, TTL: ttl, Persist: disk})
			err := store.Load(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s loaded: %v", tc.value, err)
			}
		})
	}
	// The undamaged entries load.
	disk := newMemPersist()
	disk.mark = 7
	disk.entries["r"] = []byte(good)
	disk.entries["s"] = []byte(`{"released":[` + rel + `]}`)
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	store, _ := NewLocal(LocalConfig{Clock: clk, TTL: ttl, Persist: disk})
	if err := store.Load(context.Background()); err != nil || store.Leases() != 1 || store.Issued() != 7 {
		t.Fatalf("%v, %d leases, issued %d", err, store.Leases(), store.Issued())
	}
}

// TestIDLimit: ids longer than the handler's limit are refused before
// anything is looked up.
func TestIDLimit(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	r.h = httpapi.NewHandler(r.svc, httpapi.HandlerOptions{MaxIDBytes: 8})
	r.grant(wire.OpAcquire, acquireMsg("12345678", "12345678", "12345678"))
	for _, m := range []wire.Message{acquireMsg("123456789", "r", "h"), acquireMsg("q", "123456789", "h"), acquireMsg("q", "r", "123456789")} {
		if st, out := r.post(wire.OpAcquire, m); st != 400 || errCodeOf(t, out) != wire.CodeInvalidValue {
			t.Fatalf("%+v: %d %v", m.Request, st, out)
		}
	}
}

// TestSweepShrinksMemory: once a sweep leaves a stripe's map at a quarter
// of its peak, the map is copied into one of its size (a Go map never
// gives back the room it grew to).
func TestSweepShrinksMemory(t *testing.T) {
	r := newRig(t, nil, LocalConfig{Limits: Limits{FenceMemory: 1}})
	for i := range 4000 {
		r.grant(wire.OpAcquire, acquireMsg("q"+strconv.Itoa(i), "res"+strconv.Itoa(i), "a"))
	}
	if _, err := r.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(5000)
	for range 3 {
		if _, err := r.svc.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	peak := 0
	for i := range r.store.stripes {
		peak = max(peak, r.store.stripes[i].peak)
	}
	if st := r.state(); len(st.Memory) > 10 || peak > 10 {
		t.Fatalf("after the sweeps: %d entries, a stripe's map sized for %d", len(st.Memory), peak)
	}
}
