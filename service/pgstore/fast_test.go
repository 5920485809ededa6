//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// A replica that decided last on a resource decides the next call on it in
// one round trip (lease_fence_decide); the first call on a resource it
// does not know locks the row first.
func TestOneRoundTripPerDecision(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	f, _ := g.grant(0, acquireMsg("a-1", "doc", "A"))
	for i := range 3 {
		g.ok(0, "renew", renewMsg("r-"+string(rune('0'+i)), "doc", "A", f))
	}
	if st, out := g.post(0, acquireMsg("b-1", "doc", "B")); st != 200 || out["heldBy"] != "A" {
		t.Fatalf("acquire of a held resource: %d %v", st, out)
	}
	g.ok(0, "release", releaseMsg("rel-1", "doc", "A", f))
	g.ok(0, "the release's retry", releaseMsg("rel-1", "doc", "A", f))
	if f2, _ := g.grant(0, acquireMsg("b-2", "doc", "B")); f2 <= f {
		t.Fatalf("fence %d after %d", f2, f)
	}
	one, two, locked := pgstore.Paths(g.r[0].store)
	if one != 7 || two != 0 || locked != 1 {
		t.Fatalf("decisions in one round trip %d (want 7), after a read %d (want 0), locking the row %d (want 1)", one, two, locked)
	}
}

// A replica's knowledge of a row goes out of date when another replica, a
// sweep or anyone else writes the row: its decision is then made again on
// the row as it is, never on what it knew.
func TestDecisionsOnAChangedRow(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	fa, _ := g.grant(0, acquireMsg("a-1", "doc", "A"))
	// Released through the other replica: replica 0 still knows A's lease.
	g.ok(1, "release", releaseMsg("rel-1", "doc", "A", fa))
	fb, _ := g.grant(0, acquireMsg("b-1", "doc", "B"))
	if fb <= fa {
		t.Fatalf("fence %d after %d", fb, fa)
	}
	// Changed behind every replica's back: B's lease expired.
	pgtest.Exec(t, g.dsn, `UPDATE lease_fence_leases SET expires_at = 1, decided_at = 0 WHERE resource = 'doc'`)
	if st, out := g.post(0, renewMsg("r-1", "doc", "B", fb)); st != 200 || out["reason"] != string(lease.Expired) {
		t.Fatalf("renewal of a lease expired meanwhile: %d %v", st, out)
	}
	// Deleted behind its back: the fence still goes up.
	pgtest.Exec(t, g.dsn, `DELETE FROM lease_fence_leases`)
	if fc, _ := g.grant(0, acquireMsg("c-1", "doc", "C")); fc <= fb {
		t.Fatalf("fence %d after %d", fc, fb)
	}
	// Another replica granted meanwhile (its counter moved past what this
	// one knows): the fence taken is the counter's, and the answer says it.
	if st, out := g.post(0, wire.Message{Op: wire.OpInspect, Request: lease.Request{Resource: "third"}}); st != 200 || out["held"] != false {
		t.Fatalf("inspect: %d %v", st, out)
	}
	f1, _ := g.grant(1, acquireMsg("d-1", "other", "D"))
	one, _, _ := pgstore.Paths(g.r[0].store)
	fe, _ := g.grant(0, acquireMsg("e-1", "third", "E"))
	if fe <= f1 {
		t.Fatalf("fence %d after %d", fe, f1)
	}
	if one2, _, _ := pgstore.Paths(g.r[0].store); one2 != one+1 {
		t.Fatalf("the grant after the counter moved was not made in one round trip (%d, %d)", one, one2)
	}
	var stored uint64
	pgtest.QueryRow(t, g.dsn, `SELECT fence FROM lease_fence_leases WHERE resource = 'third'`, &stored)
	if stored != fe {
		t.Fatalf("the row holds fence %d, the answer %d", stored, fe)
	}
}

// docRow makes a state of this version in a schema of its own with the
// empty row of resource "doc", and returns the schema's DSN.
func docRow(t *testing.T) string {
	dsn := newSchema(t)
	st, err := pgstore.Create(context.Background(), dsn, pgstore.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	pgtest.Exec(t, dsn, `INSERT INTO lease_fence_leases (resource, decided_at, sweep_at) VALUES ('doc', 0, 0)`)
	return dsn
}

// lease_fence_decide writes a decision only while its premises hold at the
// server's reading, once the row is locked; otherwise it raises LF000 and
// writes nothing: the row another version, the reading before the
// decision's (p_now) or at its first instant of another outcome (p_until),
// a count at its bound, the counts' lock held. Each case is the accepted
// call with one argument changed.
func TestDecideFunctionChecksItsPremises(t *testing.T) {
	dsn := docRow(t)
	const countKey = 4242
	// A grant to A, fence from the sequence, one more lease record.
	args := func(version int64) []any {
		return []any{"doc", version, 0.0, 0.0, 1e300, 1, true, "A", "a-1", int64(1), 1e300, make([]byte, 32), []byte{0}, int64(0), 1e300,
			"", "", "", int64(0), 0.0, int64(1), int64(0), int64(0), []string{}, []int64{}, int64(1_000_000), int64(1_000_000), int64(1_000_000), int64(countKey),
			false, false, []int32{}, []float64{}}
	}
	conn := g0conn(t, dsn)
	row := func() (version, fence int64, leases int64) {
		pgtest.QueryRow(t, dsn, `SELECT xmin::text::bigint, fence, (SELECT sum(leases) FROM lease_fence_totals)::bigint FROM lease_fence_leases WHERE resource = 'doc'`, &version, &fence, &leases)
		return
	}
	v0, _, _ := row()
	for _, c := range []struct {
		name string
		i    int // the argument changed
		to   any
	}{
		{"another version", 1, int64(1)},
		{"the reading before the decision's", 2, 1e300},
		{"the reading at the decision's end", 4, 1.0},
		{"the lease records at their bound", 25, int64(0)},
	} {
		a := args(v0)
		a[c.i] = c.to
		_, err := conn.Exec(context.Background(), pgstore.QDecide, a...)
		if code := pgErrCode(err); code != "LF000" {
			t.Fatalf("%s: %v, want SQLSTATE LF000", c.name, err)
		}
		if v, f, n := row(); v != v0 || f != 0 || n != 0 {
			t.Fatalf("%s: the row or the counts changed (version %d, fence %d, leases %d)", c.name, v, f, n)
		}
	}
	// The counts' lock held exclusively by another transaction.
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `SELECT pg_advisory_xact_lock($1)`, int64(countKey)); err != nil {
		t.Fatal(err)
	}
	other := g0conn(t, dsn)
	if _, err := other.Exec(context.Background(), pgstore.QDecide, args(v0)...); pgErrCode(err) != "LF000" {
		t.Fatalf("the counts' lock held: %v, want SQLSTATE LF000", err)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The accepted call.
	var version, fence int64
	if err := conn.QueryRow(context.Background(), pgstore.QDecide, args(v0)...).Scan(pgtype.CompositeFields{&version, &fence, new(float64), new(float64), new(int64),
		new(int64), new(int64), new(int64), new(bool)}); err != nil {
		t.Fatal(err)
	}
	if v, f, n := row(); v != version || v == v0 || f != fence || f < 1 || n != 1 {
		t.Fatalf("the accepted call: row version %d (answered %d, before %d), fence %d (answered %d), leases %d", v, version, v0, f, fence, n)
	}
}

// g0conn is a connection to dsn, closed when the test ends.
func g0conn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// pgErrCode is err's SQLSTATE, or "".
func pgErrCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// lease_fence_decide sums the counts only for a decision that adds to one,
// and checks that one against them; a decision that adds to none (a
// renewal, a release that forgets its lease's fence) is written whatever
// the counts and answers -1 for them (not read). Each call is the one
// before it with the arguments named changed.
func TestDecideFunctionSumsOnlyWhenACountGrows(t *testing.T) {
	dsn := docRow(t)
	conn := g0conn(t, dsn)
	// The arguments by position (decide.sql): a grant to A, one more lease
	// record, the bounds far.
	a := []any{"doc", int64(0), 0.0, 0.0, 1e300, 1, true, "A", "a-1", int64(1), 1e300, make([]byte, 32), []byte{0}, int64(0), 1e300,
		"", "", "", int64(0), 0.0, int64(1), int64(0), int64(0), []string{}, []int64{}, int64(1_000_000), int64(1_000_000), int64(1_000_000), int64(4242),
		false, false, []int32{}, []float64{}}
	const (
		pVersion, pGrant, pHolder, pFence, pSecret, pLast  = 1, 6, 7, 9, 11, 13
		pDL, pDR, pDK, pMaxLeases, pMaxReleases, pMaxLasts = 20, 21, 22, 25, 26, 27
	)
	sums := func() (version int64, c [3]int64) {
		pgtest.QueryRow(t, dsn, `SELECT xmin::text::bigint, (SELECT sum(leases) FROM lease_fence_totals)::bigint, (SELECT sum(releases) FROM lease_fence_totals)::bigint,
			(SELECT sum(lasts) FROM lease_fence_totals)::bigint FROM lease_fence_leases WHERE resource = 'doc'`, &version, &c[0], &c[1], &c[2])
		return
	}
	var fence int64
	for _, c := range []struct {
		name   string
		set    map[int]any
		stale  bool     // LF000 expected
		counts [3]int64 // answered (-1: not read)
		// set: the arguments changed (by position in decide.sql); -1 for
		// p_fence or p_last is the fence granted.
	}{
		{"the grant", nil, false, [3]int64{1, 0, 0}},
		{"a renewal, every count at its bound", map[int]any{pGrant: false, pFence: int64(-1), pDL: int64(0), pMaxLeases: int64(0), pMaxReleases: int64(0), pMaxLasts: int64(0)}, false, [3]int64{-1, -1, -1}},
		{"a release that keeps the fence, the last fences at their bound", map[int]any{pHolder: "", pFence: int64(0), pSecret: nil, pLast: int64(-1), pDL: int64(-1), pDK: int64(1)}, true, [3]int64{}},
		{"the same, a release remembered, the releases at their bound", map[int]any{pMaxLasts: int64(1_000_000), pDR: int64(1)}, true, [3]int64{}},
		{"the same, with room", map[int]any{pMaxReleases: int64(1_000_000)}, false, [3]int64{0, 1, 1}},
		{"a grant at the lease records' bound", map[int]any{pGrant: true, pHolder: "B", pSecret: make([]byte, 32), pLast: int64(0), pDL: int64(1), pDR: int64(0), pDK: int64(-1),
			pMaxLeases: int64(0)}, true, [3]int64{}},
		{"a release that forgets the fence, every count at its bound", map[int]any{pGrant: false, pHolder: "", pSecret: nil, pDL: int64(0), pDK: int64(-1),
			pMaxReleases: int64(0), pMaxLasts: int64(0)}, false, [3]int64{-1, -1, -1}},
	} {
		v0, before := sums()
		a[pVersion] = v0
		for i, x := range c.set {
			a[i] = x
		}
		for _, i := range []int{pFence, pLast} {
			if a[i] == int64(-1) { // the fence granted
				a[i] = fence
			}
		}
		var (
			version, f int64
			got        [3]int64
		)
		err := conn.QueryRow(context.Background(), pgstore.QDecide, a...).Scan(pgtype.CompositeFields{&version, &f, new(float64), new(float64), new(int64),
			&got[0], &got[1], &got[2], new(bool)})
		v, after := sums()
		if c.stale {
			if pgErrCode(err) != "LF000" || v != v0 || after != before {
				t.Fatalf("%s: %v, want SQLSTATE LF000 and nothing written (version %d, was %d; counts %v, were %v)", c.name, err, v, v0, after, before)
			}
			continue
		}
		if err != nil || v != version || v == v0 || got != c.counts {
			t.Fatalf("%s: %v, version %d (the row's %d, was %d), counts answered %v, want %v", c.name, err, version, v, v0, got, c.counts)
		}
		if f != 0 {
			fence = f
		}
	}
	if _, c := sums(); c != [3]int64{0, 1, 0} {
		t.Fatalf("the counts in the end: %v, want [0 1 0]", c)
	}
}

// A replica's one-round-trip decisions start from the counts of an earlier
// answer, which a renewal's answer does not read: the replica keeps the
// last counts read, and a decision that adds to a count is checked against
// the counts summed once the row is locked. Here replica 0 last read the
// counts with one lease record; replica 1 then fills the store to
// MaxLeases; replica 0's renewals leave it with the counts it read, and its
// grant, made on them, is refused exactly as the store is full.
func TestStaleCountsAtTheBound(t *testing.T) {
	var maxConns int
	pgtest.QueryRow(t, pg.DSN(""), `SELECT current_setting('max_connections')::int`, &maxConns)
	bound := maxConns + 4
	g := newRig(t, 2, pgstore.Options{Limits: service.Limits{MaxLeases: bound}})
	fk, _ := g.grant(0, acquireMsg("k-1", "kept", "K"))
	fa, _ := g.grant(0, acquireMsg("a-1", "a", "A"))
	g.ok(0, "release", releaseMsg("rel-a", "a", "A", fa)) // one round trip, its counts read
	for i := 1; i < bound; i++ {
		g.grant(1, acquireMsg("f-"+strconv.Itoa(i), "full-"+strconv.Itoa(i), "F"))
	}
	one, _, locked := pgstore.Paths(g.r[0].store)
	for _, id := range []string{"r-1", "r-2"} {
		g.ok(0, "renew", renewMsg(id, "kept", "K", fk))
	}
	if c, counted := pgstore.KnownCounts(g.r[0].store); !counted || c != (service.Counts{Leases: 1, Releases: 1, Lasts: 1}) {
		t.Fatalf("replica 0's counts after its renewals: %+v (counted %v), want those its release read", c, counted)
	}
	if st, out := g.post(0, acquireMsg("b-1", "a", "B")); errCode(t, st, out) != "too_many_leases" {
		t.Fatalf("the grant past MaxLeases: %d %v", st, out)
	}
	if n, err := g.r[0].store.Leases(context.Background()); err != nil || n != bound {
		t.Fatalf("the store counts %d lease records (%v), want %d", n, err, bound)
	}
	if one2, _, locked2 := pgstore.Paths(g.r[0].store); one2 != one+2 || locked2 != locked+1 {
		t.Fatalf("replica 0 decided %d calls in one round trip (want the 2 renewals) and %d locking the row (want the refusal)", one2-one, locked2-locked)
	}
}
