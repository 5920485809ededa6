//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// The lifecycle, with every call on another replica than the one before:
// the replicas share everything through the database.
func TestLifecycleAcrossReplicas(t *testing.T) {
	g := newRig(t, 3, pgstore.Options{})
	f1, exp1 := g.grant(0, acquireMsg("a-1", "doc", "A"))
	if f1 != 1 {
		t.Fatalf("first fence %d", f1)
	}
	// The retry of the same request, on another replica: the same grant.
	if f, exp := g.grant(1, acquireMsg("a-1", "doc", "A")); f != f1 || exp != exp1 {
		t.Fatalf("retry answered %d until %v, want %d until %v", f, exp, f1, exp1)
	}
	// Another holder is denied, with the holder and the time left.
	st, out := g.post(2, acquireMsg("b-1", "doc", "B"))
	if st != 200 || out["ok"] != false || out["heldBy"] != "A" || out["retryAfterMillis"].(float64) <= 0 {
		t.Fatalf("B's acquisition: %d %v", st, out)
	}
	// The holder itself is denied a second lease on what it holds.
	if _, out := g.post(1, acquireMsg("a-2", "doc", "A")); out["heldBy"] != "A" {
		t.Fatalf("A's second acquisition: %v", out)
	}
	// The request id of A's lease, sent by B: refused.
	if st, out := g.post(2, acquireMsg("a-1", "doc", "B")); errCode(t, st, out) != "request_id_reused" {
		t.Fatalf("reused id: %d %v", st, out)
	}
	// A forged renewal and release: refused.
	forged := renewMsg("r-x", "doc", "A", f1)
	forged.Secret = "not-the-secret-0123456789"
	if st, out := g.post(0, forged); errCode(t, st, out) != "wrong_secret" {
		t.Fatalf("forged renewal: %d %v", st, out)
	}
	if f, exp := g.grant(2, renewMsg("r-1", "doc", "A", f1)); f != f1 || exp < exp1 {
		t.Fatalf("renewal: %d until %v", f, exp)
	}
	g.ok(1, "release", releaseMsg("rel-1", "doc", "A", f1))
	// Its retry, on another replica, and after another holder came.
	f2, _ := g.grant(0, acquireMsg("b-2", "doc", "B"))
	if f2 <= f1 {
		t.Fatalf("B's fence %d not above A's %d", f2, f1)
	}
	g.ok(2, "release retry", releaseMsg("rel-1", "doc", "A", f1))
	// A renewal of the released lease: expired, never resurrected.
	if _, out := g.post(0, renewMsg("r-2", "doc", "A", f1)); out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("renewal of a released lease: %v", out)
	}
	// A renewal of a fence never issued: rejected.
	if st, out := g.post(1, renewMsg("r-3", "doc", "B", 1<<40)); errCode(t, st, out) != "rejected" {
		t.Fatalf("renewal of a fence never issued: %d %v", st, out)
	}
}

// Leases end by the database's clock: stepped past the TTL, the lease is
// expired on every replica, its renewal refused, and the next grant takes
// a higher fence.
func TestExpiryByTheDatabaseClock(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	f1, exp := g.grant(0, acquireMsg("a-1", "doc", "A"))
	if now := g.dbNow(); exp < now+ttlMs-60_000 || exp > now+ttlMs {
		t.Fatalf("expiry %v is not the database's clock %v plus the TTL", exp, now)
	}
	g.step(ttlMs + 1)
	if _, out := g.post(1, renewMsg("r-1", "doc", "A", f1)); out["reason"] != "expired" {
		t.Fatalf("renewal after the TTL: %v", out)
	}
	if st, out := g.post(0, releaseMsg("rel-1", "doc", "A", f1)); st != 200 || out["ok"] != false {
		t.Fatalf("release after the TTL: %d %v", st, out)
	}
	// The acquisition retried after the lease ended is a new acquisition.
	if f, _ := g.grant(1, acquireMsg("a-1", "doc", "A")); f <= f1 {
		t.Fatalf("fence %d after expiry, not above %d", f, f1)
	}
}

// Many acquisitions at once, on three replicas: distinct fences, and one
// holder per resource.
func TestConcurrentGrantsAcrossReplicas(t *testing.T) {
	g := newRig(t, 3, pgstore.Options{})
	const n = 48
	var mu sync.Mutex
	fences := map[uint64]string{}
	holders := map[string]string{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := "h" + strconv.Itoa(i)
			res := "r" + strconv.Itoa(i%6) // eight holders for each of six resources
			st, out := g.post(i%3, acquireMsg("id-"+holder, res, holder))
			if st != 200 {
				t.Errorf("%s: %d %v", holder, st, out)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if out["ok"] != true {
				return
			}
			f := uint64(out["grant"].(map[string]any)["fence"].(float64))
			if prev, dup := fences[f]; dup {
				t.Errorf("fence %d granted to %s and %s", f, prev, holder)
			}
			fences[f] = holder
			if prev, dup := holders[res]; dup {
				t.Errorf("%s granted to %s and %s", res, prev, holder)
			}
			holders[res] = holder
		}()
	}
	wg.Wait()
	if len(holders) != 6 {
		t.Fatalf("%d of 6 resources granted: %v", len(holders), holders)
	}
}

// The secret is stored only as its SHA-256: no column of any row holds its
// bytes.
func TestSecretsHashedAtRest(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	g.grant(0, acquireMsg("a-1", "doc", "A"))
	f, _ := g.grant(0, acquireMsg("b-1", "other", "B"))
	if st, out := g.post(0, releaseMsg("rel", "other", "B", f)); out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	var dump string
	pgtest.QueryRow(t, g.dsn, `SELECT string_agg(row_to_json(l)::text, ' ') FROM lease_fence_leases l`, &dump)
	for _, h := range []string{"A", "B"} {
		// Neither as text nor in the hex of a bytea (the releases).
		if strings.Contains(dump, secretOf(h)) || strings.Contains(dump, hex.EncodeToString([]byte(secretOf(h)))) {
			t.Fatalf("the secret of %s is in the table: %s", h, dump)
		}
		// Its hash is: A's lease record's, B's release's.
		if sum := sha256.Sum256([]byte(secretOf(h))); !strings.Contains(dump, hex.EncodeToString(sum[:])) {
			t.Fatalf("no hash of the secret of %s in the table either: %s", h, dump)
		}
	}
}

// -max-leases counts the lease records of every replica together: 40
// acquisitions of distinct resources on three replicas at once, 10 granted
// and 30 refused with too_many_leases; a release makes room.
func TestMaxLeasesAcrossReplicas(t *testing.T) {
	g := maxLeasesAtOnce(t, 10, 40)
	if n, err := g.r[0].store.Leases(context.Background()); err != nil || n != 10 {
		t.Fatalf("the store counts %d lease records (%v)", n, err)
	}
	// Who holds r0..r39? Release one of them and a new resource fits.
	var holder string
	var f int64
	pgtest.QueryRow(t, g.dsn, `SELECT holder_id, fence FROM lease_fence_leases WHERE fence <> 0 ORDER BY resource LIMIT 1`, &holder, &f)
	res := "r" + strings.TrimPrefix(holder, "h")
	if st, out := g.post(1, releaseMsg("rel", res, holder, uint64(f))); out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	g.grant(2, acquireMsg("late", "late", "L"))
	if st, out := g.post(0, acquireMsg("later", "later", "M")); errCode(t, st, out) != "too_many_leases" {
		t.Fatalf("the eleventh: %d %v", st, out)
	}
	// Expired records give their room back: a full store sweeps them.
	g.step(ttlMs + 1)
	g.grant(0, acquireMsg("after", "after", "N"))
	if n, _ := g.r[0].store.Leases(context.Background()); n != 1 {
		t.Fatalf("%d lease records after the sweep of a full store, want 1", n)
	}
}

// A sweep deletes expired records and releases a TTL old, on whichever
// replica runs it; replicas sweeping at once share the work.
func TestSweep(t *testing.T) {
	g := newRig(t, 3, pgstore.Options{Limits: service.Limits{FenceMemory: 100}})
	const n = 600
	for i := range n {
		g.grant(i%3, acquireMsg("id-"+strconv.Itoa(i), "r"+strconv.Itoa(i), "h"+strconv.Itoa(i)))
	}
	// A live lease survives every sweep.
	g.step(2 * ttlMs)
	live, _ := g.grant(0, acquireMsg("live", "live", "L"))
	var wg sync.WaitGroup
	deleted := make([]int, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d, err := g.r[i].store.Sweep(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if d == 0 {
					return
				}
				deleted[i] += d
			}
		}()
	}
	wg.Wait()
	// 600 expired records deleted; up to FenceMemory (100) of them keep
	// their fence (each of three sweeps at once may keep that many), and
	// sweeps forget the lowest down to nine tenths.
	var rows, leases, lasts, lowest int64
	counts := func() {
		t.Helper()
		pgtest.QueryRow(t, g.dsn, `SELECT (SELECT count(*) FROM lease_fence_leases), (SELECT sum(leases) FROM lease_fence_totals),
			(SELECT sum(lasts) FROM lease_fence_totals), (SELECT coalesce(min(last_fence), 0) FROM lease_fence_leases WHERE last_fence <> 0)`,
			&rows, &leases, &lasts, &lowest)
		var realLeases, realLasts int64
		pgtest.QueryRow(t, g.dsn, `SELECT count(*) FILTER (WHERE fence <> 0), count(*) FILTER (WHERE fence = 0 AND last_fence <> 0) FROM lease_fence_leases`,
			&realLeases, &realLasts)
		if realLeases != leases || realLasts != lasts {
			t.Fatalf("the counts say %d lease records and %d last fences, the rows %d and %d", leases, lasts, realLeases, realLasts)
		}
	}
	counts()
	if sum := int64(deleted[0] + deleted[1] + deleted[2]); rows != 91 || leases != 1 || lasts != 90 || sum < n+10 {
		t.Fatalf("after the sweeps (%v deleted): %d rows, %d lease records and %d last fences; want 91, 1, 90", deleted, rows, leases, lasts)
	}
	if f, _ := g.grant(1, renewMsg("r", "live", "L", live)); f != live {
		t.Fatalf("the live lease after the sweep: %d", f)
	}
	// A release keeps the lease's fence as the last fence: 91 now, past
	// nine tenths, so the next sweep forgets the lowest one.
	if _, out := g.post(2, releaseMsg("rel", "live", "L", live)); out["ok"] != true {
		t.Fatalf("release: %v", out)
	}
	before := lowest
	if d, err := g.r[0].store.Sweep(context.Background()); err != nil || d != 1 {
		t.Fatalf("forgetting one: %d %v", d, err)
	}
	counts()
	if rows != 90 || lasts != 90 || lowest <= before {
		t.Fatalf("after forgetting: %d rows, %d last fences, the lowest %d (was %d)", rows, lasts, lowest, before)
	}
	// The release is remembered for one TTL, then swept; the last fence
	// stays.
	g.step(3*ttlMs + 1)
	if d, err := g.r[0].store.Sweep(context.Background()); err != nil || d != 1 {
		t.Fatalf("an old release not swept: %d %v", d, err)
	}
	var released, last int64
	pgtest.QueryRow(t, g.dsn, `SELECT (SELECT sum(releases) FROM lease_fence_totals), (SELECT last_fence FROM lease_fence_leases WHERE resource = 'live')`, &released, &last)
	counts()
	if released != 0 || last != int64(live) || rows != 90 || lasts != 90 {
		t.Fatalf("after the release's sweep: %d releases counted, last fence %d of live, %d rows, %d last fences", released, last, rows, lasts)
	}
}

// The store refuses, with a message saying why, whatever is not exactly its
// state: no schema, a second -init, another version, missing objects.
func TestSchemaIsChecked(t *testing.T) {
	ctx := context.Background()
	opts := pgstore.Options{TTL: ttl}
	for _, c := range []struct {
		name  string
		setup string // run after Create, before Open
		want  string
	}{
		{"newer version", `UPDATE lease_fence_meta SET schema_version = 9`, "version 9, newer than this coordinator's (8)"},
		{"unknown version", `UPDATE lease_fence_meta SET schema_version = 0`, "version 0 is unknown"},
		{"no meta row", `DELETE FROM lease_fence_meta`, "lease_fence_meta is empty"},
		{"no sequence", `DROP SEQUENCE lease_fence_fences`, "incomplete or damaged"},
		{"a column missing", `ALTER TABLE lease_fence_leases DROP COLUMN sweep_at`, "incomplete or damaged"},
		{"a slot missing", `DELETE FROM lease_fence_totals WHERE slot = 7`, "holds 63 slots"},
		{"releases of another type", `ALTER TABLE lease_fence_leases ALTER COLUMN releases DROP DEFAULT, ALTER COLUMN releases TYPE text USING ''`, "not bytea"},
		{"no owner column", `ALTER TABLE lease_fence_leases DROP COLUMN owner`, "incomplete or damaged"},
		{"no counts by owner", `DROP TABLE lease_fence_owners`, "incomplete or damaged"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := newSchema(t)
			st, err := pgstore.Create(ctx, dsn, opts)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			pgtest.Exec(t, dsn, c.setup)
			if _, err := pgstore.Open(ctx, dsn, opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want an error saying %q", err, c.want)
			}
		})
	}
	dsn := newSchema(t)
	if _, err := pgstore.Open(ctx, dsn, opts); err == nil || !strings.Contains(err.Error(), "-init") {
		t.Fatalf("Open of an empty schema: %v", err)
	}
	st, err := pgstore.Create(ctx, dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := pgstore.Create(ctx, dsn, opts); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("a second Create: %v", err)
	}
	if _, err := pgstore.Open(ctx, "postgres://[", opts); err == nil {
		t.Fatal("a bad connection string was accepted")
	}
	if _, err := pgstore.Open(ctx, dsn, pgstore.Options{}); err == nil {
		t.Fatal("no TTL was accepted")
	}
}

// A row that contradicts itself or the fence counter is refused (500
// internal), and nothing changes.
func TestDamagedRowsAreRefused(t *testing.T) {
	for _, c := range []struct{ name, damage string }{
		{"fence above the counter", `UPDATE lease_fence_leases SET fence = 1000`},
		{"no holder", `UPDATE lease_fence_leases SET holder_id = ''`},
		{"releases cut short", `UPDATE lease_fence_leases SET releases = '\x01'`},
		{"releases with bytes after their end", `UPDATE lease_fence_leases SET releases = '\x0000'`},
		{"releases as JSON", `UPDATE lease_fence_leases SET releases = convert_to('[]', 'UTF8')`},
		{"a hash of 31 bytes", `ALTER TABLE lease_fence_leases DROP CONSTRAINT lease_fence_leases_secret_sha256_check; UPDATE lease_fence_leases SET secret_sha256 = substr(secret_sha256, 2)`},
		{"nothing held", `UPDATE lease_fence_leases SET fence = 0, holder_id = '', request_id = '', secret_sha256 = NULL, expires_at = 0`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, 1, pgstore.Options{})
			g.grant(0, acquireMsg("a-1", "doc", "A"))
			pgtest.Exec(t, g.dsn, c.damage)
			var before string
			pgtest.QueryRow(t, g.dsn, `SELECT row_to_json(l)::text FROM lease_fence_leases l`, &before)
			for _, m := range []wire.Message{acquireMsg("b", "doc", "B"), renewMsg("r", "doc", "A", 1), releaseMsg("rel", "doc", "A", 1)} {
				if st, out := g.post(0, m); st != 500 || errCode(t, st, out) != "internal" {
					t.Fatalf("%s on a damaged row: %d %v", m.Op, st, out)
				}
			}
			var after string
			pgtest.QueryRow(t, g.dsn, `SELECT row_to_json(l)::text FROM lease_fence_leases l`, &after)
			if after != before {
				t.Fatalf("the damaged row changed:\n%s\n%s", before, after)
			}
		})
	}
}

// A new timeline (a promoted standby, a point-in-time recovery) makes the
// fences jump, once, however many replicas connect to it at once.
func TestNewTimelineMakesTheFencesJump(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	f1, _ := g.grant(0, acquireMsg("a", "r1", "A"))
	// Pretend the state was written on another timeline.
	pgtest.Exec(t, g.dsn, `UPDATE lease_fence_meta SET timeline = timeline + 7`)
	var wg sync.WaitGroup
	stores := make([]*replica, 4)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i] = g.open(pgstore.Options{TimelineJump: 1000}, false)
		}()
	}
	wg.Wait()
	g.r = append(g.r, stores...)
	f2, _ := g.grant(2, acquireMsg("b", "r2", "B"))
	if f2 < f1+1000 || f2 > f1+1000+1 {
		t.Fatalf("fence after the new timeline %d, want %d (one jump of 1000)", f2, f1+1001)
	}
	jumps := 0
	for _, r := range stores {
		jumps += strings.Count(r.logs.String(), "new timeline")
	}
	if jumps != 1 {
		t.Fatalf("%d replicas logged the jump, want 1", jumps)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	dsn := newSchema(t)
	for _, o := range []pgstore.Options{{}, {TTL: -1}, {TTL: ttl, Limits: service.Limits{MaxLeases: -1}}, {TTL: ttl, Limits: service.Limits{ReleaseMemory: -1}}} {
		if _, err := pgstore.Create(context.Background(), dsn, o); err == nil {
			t.Fatalf("%+v accepted", o)
		}
	}
	if _, err := pgstore.Create(context.Background(), dsn, pgstore.Options{TTL: ttl, FenceTable: "bad name"}); err == nil || !strings.Contains(err.Error(), "FenceTable") {
		t.Fatalf("a bad fence table: %v", err)
	}
	// Nothing was created by the refused calls.
	if _, err := pgstore.Open(context.Background(), dsn, pgstore.Options{TTL: ttl}); err == nil || !strings.Contains(err.Error(), "-init") {
		t.Fatalf("after refused Creates: %v", err)
	}
}

// The database's clock stepped back ten minutes: a resource whose row was
// written at a later reading is decided at that reading until the clock
// passes it again, so no lease gets shorter (its renewal keeps its expiry,
// a stranger is told the whole TTL is left); a resource without a row is
// decided at the stepped clock; fences come from the counter, not the
// clock, and keep rising.
func TestClockSteppedBack(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	f1, exp1 := g.grant(0, acquireMsg("a-1", "doc", "A"))
	const back = 600_000.0
	g.step(-back)
	f, exp := g.grant(1, renewMsg("r-1", "doc", "A", f1))
	if f != f1 || exp != exp1 {
		t.Fatalf("renewal after the step: fence %d until %v, want %d until %v (the lease's reading held)", f, exp, f1, exp1)
	}
	st, out := g.post(0, acquireMsg("b-1", "doc", "B"))
	if st != 200 || out["heldBy"] != "A" || out["retryAfterMillis"].(float64) != ttlMs {
		t.Fatalf("a stranger after the step: %d %v, want held by A for the whole TTL", st, out)
	}
	f2, exp2 := g.grant(1, acquireMsg("c-1", "other", "C"))
	if f2 <= f1 || exp2 > exp1-back+ttlMs {
		t.Fatalf("a free resource after the step: fence %d until %v; want a fence above %d, dated by the stepped clock (about %v)", f2, exp2, f1, exp1-back)
	}
	// The clock catches up: the lease ends at its expiry, by the clock.
	g.step(ttlMs + 1)
	if _, out := g.post(0, renewMsg("r-2", "doc", "A", f1)); out["reason"] != "expired" {
		t.Fatalf("the lease outlived its expiry once the clock caught up: %v", out)
	}
}

// A replica that opens while the database's clock reads earlier than
// stored decisions logs it.
func TestOpenWarnsOfAClockBehindTheState(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	g.grant(0, acquireMsg("a-1", "doc", "A"))
	pgtest.Exec(t, g.dsn, `UPDATE lease_fence_leases SET decided_at = decided_at + 600000, expires_at = expires_at + 600000`)
	r := g.open(pgstore.Options{}, false)
	if !strings.Contains(r.logs.String(), "reads earlier than decisions already stored") || !strings.Contains(r.logs.String(), "resources=1") {
		t.Fatalf("no warning: %q", r.logs.String())
	}
}

// Near the bound the count is exact, far from it the counts' lock is
// shared: 160 acquisitions at once on three replicas against a bound of
// 130 (max_connections 100) take both paths and grant exactly 130.
func TestMaxLeasesSharedAndExclusive(t *testing.T) {
	maxLeasesAtOnce(t, 130, 160)
}

// maxLeasesAtOnce sends n acquisitions of distinct resources at once over
// three replicas with MaxLeases bound, and checks that exactly bound were
// granted and the rest refused with too_many_leases.
func maxLeasesAtOnce(t *testing.T, bound, n int) *rig {
	t.Helper()
	g := newRig(t, 3, pgstore.Options{Limits: service.Limits{MaxLeases: bound}})
	got := g.atOnce(n, func(i int) wire.Message {
		h := "h" + strconv.Itoa(i)
		return acquireMsg("id-"+h, "r"+strconv.Itoa(i), h)
	})
	if want := map[string]int{"granted": bound, "503 too_many_leases": n - bound}; !maps.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	return g
}

// MinFence moves the sequence on, never back.
func TestMinFence(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	f1, _ := g.grant(0, acquireMsg("a", "r1", "A"))
	g.r = append(g.r, g.open(pgstore.Options{MinFence: 5000}, false))
	if f, _ := g.grant(1, acquireMsg("b", "r2", "B")); f != 5000 {
		t.Fatalf("fence after MinFence 5000: %d", f)
	}
	g.r = append(g.r, g.open(pgstore.Options{MinFence: 10}, false))
	if f, _ := g.grant(2, acquireMsg("c", "r3", "C")); f != 5001 {
		t.Fatalf("fence after a lower MinFence: %d (first was %d)", f, f1)
	}
}
