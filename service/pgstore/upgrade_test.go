//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/internal/sqltext"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// downgrade turns the state at dsn back into schema version 7 (the
// decision function as version 7 had it, testdata/decide-v7.sql), 6 (as
// version 6 had it, testdata/decide-v6.sql), 5 (without
// the batch's decision function), 4 (nor the decision function), 3 (nor values and revocations), or 2, whose rows
// keep their releases as JSON in the column released (go-json-experiment's
// encoding of []service.Release, as version 2 wrote them) and whose meta
// row has no listening_until, or version 1,
// which also had no owners and its counts under their first name. damage,
// if set, replaces the releases of every row that has some.
func downgrade(t *testing.T, dsn string, version int, damage string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT resource, releases FROM lease_fence_leases WHERE releases <> '\x00'`)
	if err != nil {
		t.Fatal(err)
	}
	asJSON := map[string]string{}
	for rows.Next() {
		var resource string
		var bin []byte
		if err := rows.Scan(&resource, &bin); err != nil {
			t.Fatal(err)
		}
		rels, err := service.DecodeReleasesBinary(resource, bin)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := jsonv2.Marshal(rels)
		asJSON[resource] = string(text)
		if damage != "" {
			asJSON[resource] = damage
		}
	}
	rows.Close()
	if damage != "" && len(asJSON) == 0 {
		t.Fatal("no row has releases to damage")
	}
	var qs []string
	for v := 7; v >= max(version, 6); v-- {
		text, err := os.ReadFile("testdata/decide-v" + strconv.Itoa(v) + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, pgstore.ExpandDecide(sqltext.Parse(string(text))["decide"]), `UPDATE lease_fence_meta SET schema_version = `+strconv.Itoa(v))
	}
	if version <= 5 {
		qs = append(qs, `DROP FUNCTION lease_fence_decide_each`, `UPDATE lease_fence_meta SET schema_version = 5`)
	}
	if version <= 4 {
		qs = append(qs, `DROP FUNCTION lease_fence_decide`, `UPDATE lease_fence_meta SET schema_version = 4`)
	}
	if version <= 3 {
		qs = append(qs, `ALTER TABLE lease_fence_leases DROP COLUMN value, DROP COLUMN revoked_holder, DROP COLUMN revoked_fence, DROP COLUMN revoked_at`,
			`UPDATE lease_fence_meta SET schema_version = 3`)
	}
	if version >= 3 {
		asJSON = nil
	} else {
		qs = append(qs, `ALTER TABLE lease_fence_leases ADD COLUMN released json NOT NULL DEFAULT '[]'`,
			`ALTER TABLE lease_fence_leases DROP COLUMN releases`,
			`ALTER TABLE lease_fence_meta DROP COLUMN listening_until`,
			`UPDATE lease_fence_meta SET schema_version = 2`)
	}
	if version == 1 {
		qs = append(qs, `DROP TABLE lease_fence_owners`, `ALTER TABLE lease_fence_leases DROP COLUMN owner`,
			`ALTER TABLE lease_fence_totals RENAME TO lease_fence_counts`, `UPDATE lease_fence_meta SET schema_version = 1`)
	}
	for _, q := range qs {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatal(q, err)
		}
	}
	for resource, text := range asJSON {
		if _, err := conn.Exec(context.Background(), `UPDATE lease_fence_leases SET released = $2::json WHERE resource = $1`, resource, text); err != nil {
			t.Fatal(err)
		}
	}
}

// A state of schema version 2 (releases as JSON) is upgraded when a
// coordinator of this version opens it: the releases are answered as
// before (a retried release ok, the last fence), and the live lease is
// still held; a statement of version 2 fails from then on. Releases that do
// not decode refuse the upgrade, and the state is left at version 2.
func TestUpgradeFromVersion2(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	f1, _ := g.grant(0, acquireMsg("a-1", "doc", "A"))
	g.ok(0, "release", releaseMsg("rel-1", "doc", "A", f1))
	f2, _ := g.grant(0, acquireMsg("b-1", "live", "B"))
	g.r[0].store.Close()
	downgrade(t, g.dsn, 2, "")

	g.r[0] = g.open(pgstore.Options{}, false)
	if logs := g.r[0].logs.String(); !strings.Contains(logs, "upgraded from version 2 to 8") || !strings.Contains(logs, "now fail every call") {
		t.Fatalf("no upgrade logged: %s", logs)
	}
	var version int64
	var typ string
	pgtest.QueryRow(t, g.dsn, `SELECT (SELECT schema_version FROM lease_fence_meta), (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = 'lease_fence_leases'::regclass AND attname = 'releases')`, &version, &typ)
	if version != 8 || typ != "bytea" {
		t.Fatalf("after the upgrade: version %d, released %s", version, typ)
	}
	conn := g.conn()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `SELECT released FROM lease_fence_leases`); err == nil {
		t.Fatal("a statement of version 2 still works")
	}
	g.ok(0, "the retried release after the upgrade", releaseMsg("rel-1", "doc", "A", f1))
	if st, out := g.post(0, wire.Message{Op: wire.OpInspect, Request: lease.Request{Resource: "doc"}}); st != 200 || out["held"] != false || out["lastFence"] != float64(f1) {
		t.Fatalf("inspect after the upgrade: %d %v", st, out)
	}
	g.ok(0, "the live lease's release after the upgrade", releaseMsg("rel-2", "live", "B", f2))
	if f3, _ := g.grant(0, acquireMsg("a-2", "doc", "A")); f3 <= f2 {
		t.Fatalf("fence %d after %d", f3, f2)
	}

	// Damaged releases: refused, nothing changed.
	d := newRig(t, 1, pgstore.Options{})
	f1, _ = d.grant(0, acquireMsg("a-1", "doc", "A"))
	d.post(0, releaseMsg("rel-1", "doc", "A", f1))
	d.r[0].store.Close()
	downgrade(t, d.dsn, 2, `[{"requestId": 1}]`)
	if _, err := pgstore.Open(context.Background(), d.dsn, pgstore.Options{TTL: ttl}); err == nil ||
		!strings.Contains(err.Error(), "nothing was changed") || !strings.Contains(err.Error(), `"doc"`) {
		t.Fatalf("Open of a version 1 state with damaged releases: %v", err)
	}
	var text string
	pgtest.QueryRow(t, d.dsn, `SELECT (SELECT schema_version FROM lease_fence_meta), (SELECT released::text FROM lease_fence_leases WHERE resource = 'doc')`, &version, &text)
	if version != 2 || text != `[{"requestId": 1}]` {
		t.Fatalf("after the refused upgrade: version %d, releases %s", version, text)
	}
}

// A state of schema version 4 (no decision function) with live leases in
// it is upgraded when a coordinator of this version opens it, and its
// leases are served as before, in one round trip each once the replica
// knows the row: the live lease
// renewed with its fence, a release's retry answered ok, a held resource
// refused, fences still going up.
func TestUpgradeFromVersion4(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	fl, _ := g.grant(0, acquireMsg("a-1", "live", "A"))
	fd, _ := g.grant(0, acquireMsg("b-1", "doc", "B"))
	g.ok(0, "release", releaseMsg("rel-1", "doc", "B", fd))
	g.r[0].store.Close()
	downgrade(t, g.dsn, 4, "")
	var fn *string
	var version int64
	pgtest.QueryRow(t, g.dsn, `SELECT to_regproc('lease_fence_decide')::text, (SELECT schema_version FROM lease_fence_meta)`, &fn, &version)
	if fn != nil || version != 4 {
		t.Fatalf("the downgraded state: function %v, version %d", fn, version)
	}

	g.r[0] = g.open(pgstore.Options{}, false)
	if logs := g.r[0].logs.String(); !strings.Contains(logs, "upgraded from version 4 to 8") || !strings.Contains(logs, "keep deciding correctly alongside") {
		t.Fatalf("no upgrade logged: %s", logs)
	}
	pgtest.QueryRow(t, g.dsn, `SELECT to_regproc('lease_fence_decide')::text, (SELECT schema_version FROM lease_fence_meta)`, &fn, &version)
	if fn == nil || version != 8 {
		t.Fatalf("after the upgrade: function %v, version %d", fn, version)
	}
	if f, _ := g.grant(0, renewMsg("a-2", "live", "A", fl)); f != fl {
		t.Fatalf("the live lease renewed with fence %d, not %d", f, fl)
	}
	g.ok(0, "the retried release after the upgrade", releaseMsg("rel-1", "doc", "B", fd))
	if st, out := g.post(0, acquireMsg("c-1", "live", "C")); st != 200 || out["heldBy"] != "A" {
		t.Fatalf("acquire of the live lease: %d %v", st, out)
	}
	g.ok(0, "the live lease's release", releaseMsg("rel-2", "live", "A", fl))
	if f, _ := g.grant(0, acquireMsg("c-2", "live", "C")); f <= fd {
		t.Fatalf("fence %d after %d", f, fd)
	}
	// The first decision on each of the two resources locks the row.
	if one, two, locked := pgstore.Paths(g.r[0].store); one+two != 3 || locked != 2 {
		t.Fatalf("after the upgrade: %d decisions in one round trip, %d after a read, %d locking the row", one, two, locked)
	}
}

// A state of schema version 5 (no batch decision function) is upgraded
// when a coordinator of this version opens it, and a batch of renewals
// of its live leases is then decided in one call once the replica knows
// the rows; a coordinator of version 5 still running keeps deciding (its
// function is unchanged).
func TestUpgradeFromVersion5(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	fa, _ := g.grant(0, acquireMsg("a-1", "a", "A"))
	fb, _ := g.grant(0, acquireMsg("b-1", "b", "A"))
	g.r[0].store.Close()
	downgrade(t, g.dsn, 5, "")
	var fn, each *string
	var version int64
	const q = `SELECT to_regproc('lease_fence_decide')::text, to_regproc('lease_fence_decide_each')::text, (SELECT schema_version FROM lease_fence_meta)`
	pgtest.QueryRow(t, g.dsn, q, &fn, &each, &version)
	if fn == nil || each != nil || version != 5 {
		t.Fatalf("the downgraded state: function %v, batch function %v, version %d", fn, each, version)
	}

	g.r[0] = g.open(pgstore.Options{}, false)
	if logs := g.r[0].logs.String(); !strings.Contains(logs, "upgraded from version 5 to 8") {
		t.Fatalf("no upgrade logged: %s", logs)
	}
	pgtest.QueryRow(t, g.dsn, q, &fn, &each, &version)
	if fn == nil || each == nil || version != 8 {
		t.Fatalf("after the upgrade: function %v, batch function %v, version %d", fn, each, version)
	}
	renewals := func(id string) []wire.Message {
		return []wire.Message{renewMsg(id+"-a", "a", "A", fa), renewMsg(id+"-b", "b", "A", fb)}
	}
	for _, id := range []string{"r1", "r2"} { // the first reads the rows, the second decides in one call
		for i, res := range g.postRenewals(0, renewals(id)) {
			if !res.OK || res.Grant == nil || res.Grant.Fence != []uint64{fa, fb}[i] {
				t.Fatalf("renewal %s of %d after the upgrade: %+v", id, i, res)
			}
		}
	}
	if n := pgstore.Batched(g.r[0].store); n != 2 {
		t.Fatalf("after the upgrade: %d renewals decided in a batch's call, want 2", n)
	}
}

// A state of schema version 6 (the decision function in seven statements)
// is upgraded when a coordinator of this version opens it: the function is
// replaced, with the same arguments and answers, and the live leases are
// served as before in one round trip each, alone and in a batch; a
// coordinator of version 6 still running keeps deciding (its calls run the
// new function). Before the upgrade, the state's function is version 6's.
func TestUpgradeFromVersion6(t *testing.T) {
	upgradeDecide(t, 6, "INTO o_issued FROM lease_fence_fences")
}

// A state of schema version 7 (the decision function that sums the counts
// at every decision) is upgraded as version 6 is.
func TestUpgradeFromVersion7(t *testing.T) {
	upgradeDecide(t, 7, "END IF;\n\to_leases := o_leases + p_dl;")
}

// upgradeDecide downgrades a state to version from, whose
// lease_fence_decide has the text mark and version 8's not, and checks its
// upgrade as TestUpgradeFromVersion6 says.
func upgradeDecide(t *testing.T, from int, mark string) {
	const mark8 = "counted boolean := p_dl > 0 OR p_dr > 0 OR p_dk > 0;"
	g := newRig(t, 1, pgstore.Options{})
	fl, _ := g.grant(0, acquireMsg("a-1", "live", "A"))
	fb, _ := g.grant(0, acquireMsg("b-1", "b", "A"))
	fd, _ := g.grant(0, acquireMsg("d-1", "doc", "D"))
	g.ok(0, "release", releaseMsg("rel-1", "doc", "D", fd))
	g.r[0].store.Close()
	downgrade(t, g.dsn, from, "")
	var src string
	var version int64
	const q = `SELECT (SELECT prosrc FROM pg_proc WHERE oid = to_regproc('lease_fence_decide')), (SELECT schema_version FROM lease_fence_meta)`
	pgtest.QueryRow(t, g.dsn, q, &src, &version)
	if version != int64(from) || !strings.Contains(src, mark) || strings.Contains(src, mark8) {
		t.Fatalf("the downgraded state: version %d, function %s", version, src)
	}

	g.r[0] = g.open(pgstore.Options{}, false)
	if logs := g.r[0].logs.String(); !strings.Contains(logs, "upgraded from version "+strconv.Itoa(from)+" to 8") {
		t.Fatalf("no upgrade logged: %s", logs)
	}
	pgtest.QueryRow(t, g.dsn, q, &src, &version)
	if version != 8 || strings.Contains(src, mark) || !strings.Contains(src, mark8) {
		t.Fatalf("after the upgrade: version %d, function %s", version, src)
	}
	for _, id := range []string{"r1", "r2"} { // the first reads the row, the second decides in one round trip
		if f, _ := g.grant(0, renewMsg(id, "live", "A", fl)); f != fl {
			t.Fatalf("the live lease renewed with fence %d, not %d", f, fl)
		}
	}
	g.ok(0, "the retried release after the upgrade", releaseMsg("rel-1", "doc", "D", fd))
	if st, out := g.post(0, acquireMsg("c-1", "live", "C")); st != 200 || out["heldBy"] != "A" {
		t.Fatalf("acquire of the live lease: %d %v", st, out)
	}
	for _, id := range []string{"s1", "s2"} {
		for i, res := range g.postRenewals(0, []wire.Message{renewMsg(id+"-l", "live", "A", fl), renewMsg(id+"-b", "b", "A", fb)}) {
			if !res.OK || res.Grant == nil || res.Grant.Fence != []uint64{fl, fb}[i] {
				t.Fatalf("renewal %s of %d after the upgrade: %+v", id, i, res)
			}
		}
	}
	g.ok(0, "the live lease's release", releaseMsg("rel-2", "live", "A", fl))
	if f, _ := g.grant(0, acquireMsg("c-2", "live", "C")); f <= fd {
		t.Fatalf("fence %d after %d", f, fd)
	}
	if one, _, _ := pgstore.Paths(g.r[0].store); one < 3 {
		t.Fatalf("after the upgrade: %d decisions in one round trip, want at least 3", one)
	}
	if n := pgstore.Batched(g.r[0].store); n < 2 {
		t.Fatalf("after the upgrade: %d renewals decided in a batch's call, want at least 2", n)
	}
}
