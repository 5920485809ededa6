//go:build !js && !wasip1

package pgstore

import "strconv"

// SchemaVersion is the version of the schema this package reads and writes,
// kept in lease_fence_meta. Open upgrades a state of version 1 to 7 (see
// upgrades in store.go) and refuses any other version.
//
// Version 2 stores the owner of each lease record (the token that acquired
// it) and counts the records of each owner (lease_fence_owners), so that a
// token's maxLeases holds across replicas. Version 3 keeps a row's releases
// in a binary layout (the column releases, bytea) instead of JSON (the
// column released): no JSON to write and parse at every decision, and rows
// less than half as wide. Version 4 keeps a lease record's value (an
// election's) and the last revoked lease of a resource for one TTL (so
// its holder's renewal is answered "revoked"). Version 5 adds the function
// lease_fence_decide (decide.sql), which checks and writes a decision in
// one statement; its tables are version 4's. Version 6 adds the function
// lease_fence_decide_each, which checks and writes the decisions of a batch
// of renewals in one statement and one commit, each on its own. Version 7
// replaces lease_fence_decide with one of the same arguments and answers
// that runs two statements where it ran seven (see decide.sql). Version 8
// replaces it with one that sums the counts only for a decision that adds
// to one, and answers -1 for them otherwise.
const SchemaVersion = 8

// The names of the store's objects. They are unqualified: the connection's
// search_path decides the schema they live in (and so several coordinators'
// states can share a database, each in its own schema).
const (
	tMeta   = "lease_fence_meta"
	tLeases = "lease_fence_leases"
	// tCounts was lease_fence_counts in version 1. Its new name is what
	// keeps a coordinator of version 1 that still runs after the upgrade
	// from writing: every decision of its reads the old name, and fails,
	// rather than write rows without their owner (which the counts by
	// owner would not follow).
	tCounts = "lease_fence_totals"
	tOwners = "lease_fence_owners"
	tFences = "lease_fence_fences" // the sequence
)

// countSlots is how many rows the counts of lease records, releases and
// last fences are spread over, so that concurrent transactions that change
// them seldom wait for one another: each updates the slot of its backend
// (its pid modulo countSlots; a pool's connections, started one after the
// other, get consecutive pids). Two transactions on the same slot wait for
// one another's commit, and nothing else. (A slot taken with FOR UPDATE
// SKIP LOCKED under a volatile expression, as before, cost a sequential
// scan of the slots and a tuple lock, a write of its own, per decision.)
const countSlots = 64

// schema creates version 8. maxFence is lease.MaxFence (2^53-1, the
// largest integer JavaScript holds exactly).
var schema = []string{
	// listening_until: until when (the database server's clock, Unix
	// milliseconds) some coordinator listens for the others' changes
	// (Store.Watch): before it, decisions send no notifications.
	`CREATE TABLE ` + tMeta + ` (
		singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
		schema_version  integer NOT NULL,
		timeline        bigint NOT NULL,
		created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
		listening_until double precision NOT NULL DEFAULT 0
	)`,
	`CREATE SEQUENCE ` + tFences + ` AS bigint MINVALUE 1 MAXVALUE 9007199254740991 START 1 CACHE 1 NO CYCLE`,
	// A row is one resource's service.Entry: its lease record (fence not 0),
	// the releases of its last TTL (releases, in the binary layout of
	// service.AppendReleasesBinary: '\x00' is none) and, without a lease
	// record, the fence of its last lease (last_fence), plus the
	// reading of the last decision that wrote it (decided_at, the clock's
	// guard), the earliest reading at which a sweep has something to
	// delete (sweep_at) and the name of the token that acquired the lease
	// record (owner; '' without tokens, and without a lease record). Times
	// are the coordinator's milliseconds: the database server's clock, Unix
	// milliseconds.
	`CREATE TABLE ` + tLeases + ` (
		resource      text PRIMARY KEY,
		holder_id     text NOT NULL DEFAULT '',
		request_id    text NOT NULL DEFAULT '',
		fence         bigint NOT NULL DEFAULT 0 CHECK (fence >= 0),
		expires_at    double precision NOT NULL DEFAULT 0,
		secret_sha256 bytea CHECK (octet_length(secret_sha256) = 32),
		releases      bytea NOT NULL DEFAULT '\x00',
		last_fence    bigint NOT NULL DEFAULT 0 CHECK (last_fence >= 0),
		decided_at    double precision NOT NULL,
		sweep_at      double precision NOT NULL,
		owner         text NOT NULL DEFAULT '',
		` + revokedColumns[0] + `,
		` + revokedColumns[1] + `,
		` + revokedColumns[2] + `,
		` + revokedColumns[3] + `
	) WITH (fillfactor = 70)`,
	// The counts of lease records, remembered releases and rows that keep
	// only a last fence, each the sum of its column.
	`CREATE TABLE ` + tCounts + ` (
		slot     integer PRIMARY KEY,
		leases   bigint NOT NULL,
		releases bigint NOT NULL,
		lasts    bigint NOT NULL
	) WITH (fillfactor = 50)`,
	`INSERT INTO ` + tCounts + ` SELECT g, 0, 0, 0 FROM generate_series(0, ` + strconv.Itoa(countSlots-1) + `) g`,
	ownersTable,
	byteOrderIndex,
	decideFunction,
	decideEachFunction,
}

// replaceDecide makes a state of version to-1 a state of version to within
// the upgrade's transaction: lease_fence_decide created, or replaced by
// this version's, which takes the same arguments and answers the same but
// for the counts of a decision that adds to none (-1: not read). It is the
// upgrade from version 4 (which created the function), 6 (which ran it in
// fewer statements) and 7 (which sums the counts only for a decision that
// adds to one). A coordinator of version 4 or later that still runs keeps
// deciding correctly alongside: version 4's does not call the function;
// later ones' calls run the new one, and take the counts it does not read
// as room, as the counts of an earlier answer were, while the function
// checks every decision that adds to a count against the counts it sums.
func replaceDecide(to int) []string {
	return []string{decideFunction, `UPDATE ` + tMeta + ` SET schema_version = ` + strconv.Itoa(to)}
}

// upgradeV5 makes a state of version 5 a state of version 6 within the
// upgrade's transaction: the batch's decision function. A coordinator of
// version 5 that still runs keeps deciding correctly (it does not use the
// function).
var upgradeV5 = []string{
	decideEachFunction,
	`UPDATE ` + tMeta + ` SET schema_version = 6`,
}

// byteOrderIndex orders the resources by their bytes, whatever the
// database's collation, for the keyset paging of a list (qList): resource
// never changes, so the index costs no update its own.
const byteOrderIndex = `CREATE INDEX IF NOT EXISTS lease_fence_leases_bytes ON ` + tLeases + ` ((resource COLLATE "C"))`

// ownersTable counts the lease records of each owner: an owner's count is
// the sum of its rows' leases. Its rows are made as they are first needed,
// up to countSlots an owner (one more only when every row of the owner is
// held by another transaction), so that concurrent grants and releases of
// one owner seldom wait for one another.
const ownersTable = `CREATE TABLE ` + tOwners + ` (
		owner  text NOT NULL,
		slot   integer NOT NULL,
		leases bigint NOT NULL,
		PRIMARY KEY (owner, slot)
	) WITH (fillfactor = 50)`

// revokedColumns are the columns version 4 added: the lease record's
// value (” without a lease record), and the last lease a revoke ended
// (revoked_fence 0: none), kept for one TTL from revoked_at.
var revokedColumns = [4]string{
	`value          text NOT NULL DEFAULT ''`,
	`revoked_holder text NOT NULL DEFAULT ''`,
	`revoked_fence  bigint NOT NULL DEFAULT 0 CHECK (revoked_fence >= 0)`,
	`revoked_at     double precision NOT NULL DEFAULT 0`,
}

// upgradeV3 makes a state of version 3 a state of version 4 within the
// upgrade's transaction: the new columns, whose defaults are what a row of
// version 3 means (no value, no revocation).
var upgradeV3 = []string{
	`ALTER TABLE ` + tLeases + ` ADD COLUMN ` + revokedColumns[0] + `, ADD COLUMN ` + revokedColumns[1] +
		`, ADD COLUMN ` + revokedColumns[2] + `, ADD COLUMN ` + revokedColumns[3],
	byteOrderIndex,
	`UPDATE ` + tMeta + ` SET schema_version = 4`,
}

// upgradeV1 makes a state of version 1 a state of version 2, in one
// transaction that holds the meta row: the owner column (no lease record
// of version 1 has one), the counts by owner, the counts' new name.
var upgradeV1 = []string{
	`ALTER TABLE ` + tLeases + ` ADD COLUMN owner text NOT NULL DEFAULT ''`,
	`ALTER TABLE lease_fence_counts RENAME TO ` + tCounts,
	ownersTable,
	`UPDATE ` + tMeta + ` SET schema_version = 2`,
}

// timelineSQL reads the database's current timeline: the first eight hex
// digits of the name of the WAL file being written. It is an error on a
// standby (no WAL is written there).
const timelineSQL = `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint`

func countSQL(leases, releases, lasts string) string {
	return `UPDATE ` + tCounts + ` SET leases = leases + ` + leases + `, releases = releases + ` + releases + `, lasts = lasts + ` + lasts + `
		WHERE slot = pg_backend_pid() % ` + strconv.Itoa(countSlots)
}

// realClockSQL is the database server's clock in Unix milliseconds.
const realClockSQL = `(extract(epoch FROM clock_timestamp()) * 1000)::float8`

// qListening says, on the LISTEN connection, that this coordinator listens
// for listenFor more: until then, decisions notify.
var qListening = `UPDATE ` + tMeta + ` SET listening_until = greatest(listening_until, ` + realClockSQL + ` + ` +
	strconv.FormatInt(listenFor.Milliseconds(), 10) + `)`

// clockSQL is the database server's clock in whole Unix milliseconds,
// read when the statement evaluates it; $N is added to it (zero but in
// the tests, which step the clock through it).
func clockSQL(offsetParam string) string {
	return `(floor(extract(epoch FROM clock_timestamp()) * 1000)::float8 + ` + offsetParam + `::float8)`
}

var (
	// qEnsure makes the resource's row exist, so that qLock has a row to
	// lock even for a resource nobody holds: a placeholder that holds
	// nothing, never committed as it is (the decision updates it, or the
	// transaction rolls back). On a row that exists it does nothing and
	// writes nothing; behind another transaction's placeholder it waits.
	// A decision runs it only after a first transaction found no row.
	qEnsure = `INSERT INTO ` + tLeases + ` (resource, decided_at, sweep_at) VALUES ($1, 0, 0) ON CONFLICT (resource) DO NOTHING`
	// qLock locks and reads the resource's row and, when the row holds no
	// lease record (a decision that may add one), takes the counts' lock in
	// shared mode without waiting ($2 is its key): true if it got it; and
	// the row's version (its tuple's xmin).
	qLock = `SELECT holder_id, request_id, fence, expires_at, secret_sha256, releases, last_fence, decided_at, owner,
		value, revoked_holder, revoked_fence, revoked_at,
		CASE WHEN fence = 0 THEN pg_try_advisory_xact_lock_shared($2) END, xmin::text::bigint
		FROM ` + tLeases + ` WHERE resource = $1 FOR UPDATE`
	// qState reads, once the row is locked: whether some coordinator
	// listens for notifications (on the server's own clock, which tests do
	// not step), the clock, the fence counter
	// (and, when the resource's row holds no live lease, the next fence
	// ahead of the decision, so a grant needs no round trip of its own),
	// the counts and max_connections.
	qState = `SELECT m.listening_until > ` + realClockSQL + `, c.now, s.last_value, s.is_called,
		CASE WHEN EXISTS (SELECT 1 FROM ` + tLeases + ` l WHERE l.resource = $1 AND NOT (l.fence <> 0 AND l.expires_at > greatest(c.now, l.decided_at)))
			THEN nextval('` + tFences + `') END,
		k.leases, k.releases, k.lasts, current_setting('max_connections')::bigint
		FROM (SELECT ` + clockSQL("$2") + ` AS now) c, ` + tFences + ` s, ` + tMeta + ` m,
		(SELECT coalesce(sum(leases), 0)::bigint AS leases, coalesce(sum(releases), 0)::bigint AS releases,
			coalesce(sum(lasts), 0)::bigint AS lasts FROM ` + tCounts + `) k`
	qNextval = `SELECT nextval('` + tFences + `')`
	// qList reads the live lease records after $1 whose resource begins
	// with $2 (and, if $3 is not null, is below it: the end of the
	// prefix's range), in byte order, at most $4, at the clock ($5 the
	// offset): a keyset query on byteOrderIndex.
	qList = `SELECT l.resource, l.holder_id, l.fence, l.expires_at, l.value, c.now FROM (SELECT ` + clockSQL("$5") + ` AS now) c,
		LATERAL (SELECT resource, holder_id, fence, expires_at, value FROM ` + tLeases + `
			WHERE (resource COLLATE "C") > $1 AND (resource COLLATE "C") >= $2 AND ($3::text IS NULL OR (resource COLLATE "C") < $3)
				AND starts_with(resource, $2) AND fence <> 0 AND expires_at > greatest(c.now, decided_at)
			ORDER BY (resource COLLATE "C") LIMIT $4) l`
	qUpdate = `UPDATE ` + tLeases + ` SET holder_id = $2, request_id = $3, fence = $4, expires_at = $5, secret_sha256 = $6,
		releases = $7, decided_at = $8, sweep_at = $9, last_fence = $10, owner = $11, value = $12, revoked_holder = $13,
		revoked_fence = $14, revoked_at = $15 WHERE resource = $1`
	qDelete = `DELETE FROM ` + tLeases + ` WHERE resource = $1`
	// A decision's write (with the counts' change in the same statement
	// when there is one) that returns the row's new version (the tuple's
	// xmin), for the one-round-trip path (fast.go).
	qUpdateVersion      = qUpdate + ` RETURNING xmin::text::bigint`
	qUpdateCountVersion = `WITH w AS (` + qUpdate + ` RETURNING xmin::text::bigint AS v) ` + countSQL("$16", "$17", "$18") + ` RETURNING (SELECT v FROM w)`
	// qCount adds to the counts in the first slot no other transaction
	// holds, or, if every slot is held, waits for one at random.
	qCount       = countSQL("$1", "$2", "$3")
	qDeleteCount = `WITH w AS (` + qDelete + ` RETURNING 1) ` + countSQL("$2", "$3", "$4")
	// qForget deletes rows that keep nothing but a last fence, the lowest
	// first, until $1 are left (at most 256 at a time), skipping rows
	// another transaction holds, and counts them out; it returns how many.
	// It runs holding the advisory lock $2 (the counts' key + 1), so two
	// replicas do not both forget the same excess.
	qForget = `WITH f AS (SELECT resource FROM ` + tLeases + ` WHERE fence = 0 AND last_fence <> 0 AND releases = '\x00'::bytea
			ORDER BY last_fence LIMIT least(256, greatest(0, (SELECT sum(lasts) FROM ` + tCounts + `) - $1)) FOR UPDATE SKIP LOCKED),
		d AS (DELETE FROM ` + tLeases + ` l USING f WHERE l.resource = f.resource RETURNING 1)
		` + countSQL("0", "0", "-(SELECT count(*) FROM d)") + ` RETURNING (SELECT count(*) FROM d)`
	// qLasts reads how many rows keep only a last fence.
	qLasts = `SELECT coalesce(sum(lasts), 0)::bigint FROM ` + tCounts
	qAsync = `SET LOCAL synchronous_commit = off`
	// qSweep locks the rows a sweep has something to delete from, skipping
	// rows another transaction holds.
	qSweep = `SELECT l.resource, l.holder_id, l.request_id, l.fence, l.expires_at, l.secret_sha256, l.releases, l.last_fence, l.decided_at,
		l.owner, l.value, l.revoked_holder, l.revoked_fence, l.revoked_at, c.now
		FROM ` + tLeases + ` l, (SELECT ` + clockSQL("$1") + ` AS now) c
		WHERE l.sweep_at < c.now AND ($3 = '' OR l.owner = $3) ORDER BY l.sweep_at LIMIT $2 FOR UPDATE OF l SKIP LOCKED`
	// qOwnerCount adds $2 to the count of owner $1, in the first of its
	// rows no other transaction holds, or else in a row at random (made if
	// it is not there, waited for if it is held).
	qOwnerCount = `INSERT INTO ` + tOwners + ` AS o (owner, slot, leases) VALUES ($1,
		coalesce((SELECT slot FROM ` + tOwners + ` WHERE owner = $1 ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED), floor(random() * 64)::integer), $2)
		ON CONFLICT (owner, slot) DO UPDATE SET leases = o.leases + excluded.leases`
	// qOwned reads the count of owner $1.
	qOwned = `SELECT coalesce(sum(leases), 0)::bigint FROM ` + tOwners + ` WHERE owner = $1`
)
