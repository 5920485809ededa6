package lease_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// A coordinator restored from another's snapshot continues where it left
// off: the same leases and holders, fences above the issued one, renewals of
// the restored leases, and a retried acquisition of a restored live lease
// answered with its grant.
func TestSnapshotRestoreRoundTrip(t *testing.T) {
	a := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 10)
	g1 := mustGrant(t)(a.AcquireAt(at(0), acquireReq("a1", "a", "r1")))
	g2 := mustGrant(t)(a.AcquireAt(at(100), acquireReq("b1", "b", "r2")))
	mustGrant(t)(a.RenewAt(at(t500), renewReq("b2", "b", "r2", g2.Fence)))
	g3 := mustGrant(t)(a.AcquireAt(at(t500), acquireReq("c1", "c", "r3")))
	if ok, err := a.ReleaseAt(at(t500), g3.Token()); !ok || err != nil {
		t.Fatal(ok, err)
	}
	snap := a.Snapshot()
	want := lease.Snapshot{IssuedFence: 13, Leases: []lease.LeaseState{
		{Resource: "r1", HolderID: "a", RequestID: "a1", Fence: 11, ExpiresAt: at(t1000)},
		{Resource: "r2", HolderID: "b", RequestID: "b1", Fence: 12, ExpiresAt: at(1500)},
	}}
	if snap.IssuedFence != want.IssuedFence || !slices.Equal(snap.Leases, want.Leases) {
		t.Fatalf("snapshot %+v, want %+v", snap, want)
	}
	if st, ok := a.LeaseOf("r2"); !ok || st != want.Leases[1] {
		t.Fatalf("LeaseOf(r2) = %+v, %v", st, ok)
	}
	if _, ok := a.LeaseOf("r3"); ok {
		t.Fatal("LeaseOf a released resource")
	}
	// The snapshot is a copy.
	snap.Leases[0].HolderID = "mallory"
	if st, _ := a.LeaseOf("r1"); st.HolderID != "a" {
		t.Fatal("changing the snapshot changed the coordinator")
	}
	snap.Leases[0].HolderID = "a"

	clkB := manual(t, coordDomain, t900, 0)
	b := newCoordinator(t, clkB, time.Second, 0)
	must(t, b.Restore(snap))
	if got := b.Snapshot(); got.IssuedFence != 13 || !slices.Equal(got.Leases, want.Leases) {
		t.Fatalf("restored snapshot %+v", got)
	}
	if who, f, left, ok, err := b.Holder(at(t900), "r1"); who != "a" || f != 11 || left != 100*time.Millisecond || !ok || err != nil {
		t.Fatalf("Holder(r1) = %q %d %v %v %v", who, f, left, ok, err)
	}
	// A retry of the acquisition that made r1 is answered with its grant.
	if g := mustGrant(t)(b.AcquireAt(at(t900), acquireReq("a1", "a", "r1"))); g != g1 {
		t.Fatalf("retry after restore = %+v, want %+v", g, g1)
	}
	// The same id from another holder is still refused.
	_, err := b.AcquireAt(at(t900), acquireReq("a1", "z", "r1"))
	wantErrKind(t, err, "arg")
	// Another holder is denied; a renewal of a restored lease works.
	out, err := b.AcquireAt(at(t900), acquireReq("z1", "z", "r2"))
	if err != nil || out.OK || out.HeldBy != "b" {
		t.Fatalf("acquire of a restored live lease = %+v, %v", out, err)
	}
	mustGrant(t)(b.RenewAt(at(t900), renewReq("b3", "b", "r2", 12)))
	// New fences are above every fence the first coordinator issued.
	if g := mustGrant(t)(b.AcquireAt(at(t900), acquireReq("d1", "d", "r3"))); g.Fence != 14 {
		t.Fatalf("first new fence %d, want 14", g.Fence)
	}
	// Once r1's lease is over, its retry is a new acquisition.
	if g := mustGrant(t)(b.AcquireAt(at(t1000), acquireReq("a1", "a", "r1"))); g.Fence != 15 {
		t.Fatalf("retry after expiry got fence %d, want 15", g.Fence)
	}
}

// A store that keeps one record per resource persists LeaseOf after every
// change and restores the records it has.
func TestLeaseOfRecordsRestore(t *testing.T) {
	a := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Minute, 0)
	g := mustGrant(t)(a.AcquireAt(at(0), acquireReq("x1", "x", "doc")))
	st, ok := a.LeaseOf("doc")
	if !ok {
		t.Fatal("no record")
	}
	b := newCoordinator(t, manual(t, coordDomain, 10, 0), time.Minute, 0)
	must(t, b.Restore(lease.Snapshot{IssuedFence: a.IssuedFence(), Leases: []lease.LeaseState{st}}))
	if got := mustGrant(t)(b.Acquire(acquireReq("x1", "x", "doc"))); got != g {
		t.Fatalf("retry = %+v, want %+v", got, g)
	}
	if ok, err := b.Release(g.Token()); !ok || err != nil {
		t.Fatal(ok, err)
	}
}

// The request id of a lease is reported while the replay cache holds its
// grant (1024 grants), and restored leases beyond the last 1024 by fence are
// not answered from the cache: the same as on the coordinator they came
// from.
func TestSnapshotFollowsTheReplayCache(t *testing.T) {
	a := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Hour, 0)
	for i := range 1025 {
		id := "g" + itoa(i)
		mustGrant(t)(a.AcquireAt(at(0), acquireReq(id, "h", id)))
	}
	snap := a.Snapshot()
	if len(snap.Leases) != 1025 || snap.Leases[0].RequestID != "" || snap.Leases[1].RequestID != "g1" || snap.Leases[1024].RequestID != "g1024" {
		t.Fatalf("request ids %q %q %q", snap.Leases[0].RequestID, snap.Leases[1].RequestID, snap.Leases[1024].RequestID)
	}
	if st, _ := a.LeaseOf("g0"); st.RequestID != "" {
		t.Fatalf("LeaseOf(g0).RequestID = %q after 1024 later grants", st.RequestID)
	}
	// A snapshot from a store that kept every request id: the restored cache
	// holds the 1024 with the highest fences.
	for i := range snap.Leases {
		snap.Leases[i].RequestID = snap.Leases[i].Resource
	}
	b := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Hour, 0)
	must(t, b.Restore(snap))
	if out, err := b.AcquireAt(at(1), acquireReq("g0", "h", "g0")); err != nil || out.OK || out.HeldBy != "h" {
		t.Fatalf("retry of the 1025th newest = %+v, %v; want denied", out, err)
	}
	if g := mustGrant(t)(b.AcquireAt(at(1), acquireReq("g1", "h", "g1"))); g.Fence != 2 {
		t.Fatalf("retry of the 1024th newest: fence %d", g.Fence)
	}
	if st, _ := b.LeaseOf("g0"); st.RequestID != "" {
		t.Fatalf("restored LeaseOf(g0).RequestID = %q", st.RequestID)
	}
}

// Restore checks everything before changing anything: a bad snapshot is an
// error, the coordinator stays fresh (a good snapshot still restores), and a
// snapshot refused for its shape does not read a stepping clock.
func TestRestoreRefusesBadSnapshots(t *testing.T) {
	ok := func() lease.LeaseState {
		return lease.LeaseState{Resource: "r", HolderID: "h", RequestID: "q", Fence: 3, ExpiresAt: at(t1000)}
	}
	with := func(mut func(*lease.LeaseState)) lease.Snapshot {
		l := ok()
		mut(&l)
		return lease.Snapshot{IssuedFence: 5, Leases: []lease.LeaseState{l}}
	}
	two := func(mut func(*lease.LeaseState)) lease.Snapshot {
		l := ok()
		l.Resource, l.RequestID, l.Fence = "s", "q2", 4
		mut(&l)
		return lease.Snapshot{IssuedFence: 5, Leases: []lease.LeaseState{ok(), l}}
	}
	cases := []struct {
		name  string
		snap  lease.Snapshot
		kind  string
		reads bool // refused only after reading the clock
	}{
		{"IssuedAboveMaxFence", lease.Snapshot{IssuedFence: lease.MaxFence + 1}, "arg", false},
		{"FenceZero", with(func(l *lease.LeaseState) { l.Fence = 0 }), "arg", false},
		{"FenceAboveIssued", with(func(l *lease.LeaseState) { l.Fence = 6 }), "arg", false},
		{"FenceAboveMaxFence", lease.Snapshot{IssuedFence: math.MaxUint64, Leases: []lease.LeaseState{{Resource: "r", HolderID: "h", Fence: math.MaxUint64, ExpiresAt: at(0)}}}, "arg", false},
		{"EmptyResource", with(func(l *lease.LeaseState) { l.Resource = "" }), "arg", false},
		{"EmptyHolder", with(func(l *lease.LeaseState) { l.HolderID = "" }), "arg", false},
		{"NaNExpiry", with(func(l *lease.LeaseState) { l.ExpiresAt.Millis = math.NaN() }), "arg", false},
		{"InfExpiry", with(func(l *lease.LeaseState) { l.ExpiresAt.Millis = math.Inf(1) }), "arg", false},
		{"NoDomain", with(func(l *lease.LeaseState) { l.ExpiresAt.Domain = "" }), "arg", false},
		{"ForeignDomain", with(func(l *lease.LeaseState) { l.ExpiresAt.Domain = "agent-h" }), "domain", false},
		{"DuplicateResource", two(func(l *lease.LeaseState) { l.Resource = "r" }), "arg", false},
		{"DuplicateFence", two(func(l *lease.LeaseState) { l.Fence = 3 }), "arg", false},
		{"DuplicateRequestID", two(func(l *lease.LeaseState) { l.RequestID = "q" }), "arg", false},
		// The clock reads 500 and the TTL is 1s: 1500 is the latest expiry.
		{"FromTheFuture", two(func(l *lease.LeaseState) { l.ExpiresAt = at(1500.001) }), "arg", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := manual(t, coordDomain, t500, 1)
			c := newCoordinator(t, clk, time.Second, 2)
			err := c.Restore(tc.snap)
			wantErrKind(t, err, tc.kind)
			if read := clk.Peek().Millis != t500; read != tc.reads {
				t.Fatalf("clock read: %v, want %v", read, tc.reads)
			}
			if tc.name == "FromTheFuture" && !strings.Contains(err.Error(), "future") {
				t.Fatalf("message %q", err)
			}
			if s := c.Snapshot(); s.IssuedFence != 2 || len(s.Leases) != 0 {
				t.Fatalf("a refused restore changed the state: %+v", s)
			}
			good := lease.Snapshot{IssuedFence: 5, Leases: []lease.LeaseState{ok()}}
			good.Leases[0].ExpiresAt = at(1500) // exactly now+TTL at the next reading, 501
			must(t, c.Restore(good))
		})
	}
}

// Restore works only on a coordinator that has issued nothing, holds
// nothing and was not restored before; the IssuedFence it continues from is
// the higher of the snapshot's and its StartFence.
func TestRestoreOnlyIntoAFreshCoordinator(t *testing.T) {
	used := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	g := mustGrant(t)(used.AcquireAt(at(0), acquireReq("a1", "a", "r")))
	if ok, err := used.ReleaseAt(at(0), g.Token()); !ok || err != nil {
		t.Fatal(ok, err)
	}
	wantErrKind(t, used.Restore(lease.Snapshot{IssuedFence: 9}), "arg")
	if used.IssuedFence() != 1 {
		t.Fatal("refused restore changed IssuedFence")
	}
	twice := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 0)
	must(t, twice.Restore(lease.Snapshot{IssuedFence: 9}))
	wantErrKind(t, twice.Restore(lease.Snapshot{IssuedFence: 12}), "arg")
	if twice.IssuedFence() != 9 {
		t.Fatalf("IssuedFence %d", twice.IssuedFence())
	}
	higher := newCoordinator(t, manual(t, coordDomain, 0, 0), time.Second, 20)
	must(t, higher.Restore(lease.Snapshot{IssuedFence: 9}))
	if g := mustGrant(t)(higher.AcquireAt(at(0), acquireReq("a1", "a", "r"))); g.Fence != 21 {
		t.Fatalf("fence %d, want 21", g.Fence)
	}
	// An expired lease in a snapshot holds nothing.
	exp := newCoordinator(t, manual(t, coordDomain, t2000, 0), time.Second, 0)
	must(t, exp.Restore(lease.Snapshot{IssuedFence: 1, Leases: []lease.LeaseState{{Resource: "r", HolderID: "a", RequestID: "a1", Fence: 1, ExpiresAt: at(t1000)}}}))
	if g := mustGrant(t)(exp.Acquire(acquireReq("a1", "a", "r"))); g.Fence != 2 {
		t.Fatalf("retry of an expired restored lease: fence %d", g.Fence)
	}
	if ok, _ := exp.Release(fence.Token{Resource: "r", HolderID: "a", Fence: 1}); ok {
		t.Fatal("released an expired restored lease")
	}
}
