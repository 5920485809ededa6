//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lease-fence/lease-fence/core/lease"
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

// lease_fence_decide writes a decision only while its premises hold at the
// server's reading, once the row is locked; otherwise it raises LF000 and
// writes nothing: the row another version, the reading before the
// decision's (p_now) or at its first instant of another outcome (p_until),
// a count at its bound, the counts' lock held. Each case is the accepted
// call with one argument changed.
func TestDecideFunctionChecksItsPremises(t *testing.T) {
	dsn := newSchema(t)
	st, err := pgstore.Create(context.Background(), dsn, pgstore.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	pgtest.Exec(t, dsn, `INSERT INTO lease_fence_leases (resource, decided_at, sweep_at) VALUES ('doc', 0, 0)`)
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
