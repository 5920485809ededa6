-- lease-fence: the statements of the fence gate inside SQL databases, the
-- one source of their text. Go's gates/sqlfence embeds this file;
-- JavaScript's lease-fence/sql gets it from wasm/js/gate-texts.mjs, which
-- make build-wasm and npm pack generate from it (scripts/gate-texts.mjs).
-- Go and JavaScript writers on one database therefore send the same bytes.
--
-- Each statement follows a line "-- name: NAME" and runs to the next such
-- line; comment lines before it are not part of it. Both readers replace:
--   ?                 PostgreSQL: $1, $2, ... in order (SQLite keeps ?)
--   {floor}           the floor table, <table>_floor
--   {rejection}       the rejection table, <table>_rejection
--   {greatest}        GREATEST (PostgreSQL), max (SQLite)
--   {xid}             ", pg_current_xact_id()::text AS xid" (PostgreSQL) or nothing
--   {inserted}        ? (the tests' deliberate break: 0 * ?)
--   {raised}          excluded.fence (the break: f.fence)
--   {cmp}             = (the break: <=)
--   {from} {to}       a column's old and new names
-- The meaning of each is said where gates/sqlfence/sqlfence.go uses it.

-- name: floor_table
CREATE TABLE IF NOT EXISTS {floor} (
	resource   TEXT PRIMARY KEY,
	fence      BIGINT NOT NULL,
	holder     TEXT NOT NULL,
	rejections BIGINT NOT NULL
)

-- name: rejection_table
CREATE TABLE IF NOT EXISTS {rejection} (
	resource        TEXT NOT NULL,
	seq             BIGINT NOT NULL,
	refused_holder_id  TEXT NOT NULL,
	refused_fence      BIGINT NOT NULL,
	admitted_holder_id TEXT NOT NULL,
	admitted_fence     BIGINT NOT NULL,
	PRIMARY KEY (resource, seq)
)

-- name: upsert
INSERT INTO {floor} AS f (resource, fence, holder, rejections) VALUES (?, {inserted}, ?, 0)
	ON CONFLICT (resource) DO UPDATE SET
		fence = {greatest}(f.fence, {raised}),
		holder = CASE WHEN excluded.fence > f.fence OR f.holder = '' THEN excluded.holder ELSE f.holder END,
		rejections = f.rejections + CASE WHEN excluded.fence < f.fence THEN 1 ELSE 0 END
	RETURNING fence, holder, rejections{xid}

-- PostgreSQL only; hashtext($1) is the resource, the statement's first argument.
-- name: share
SELECT fence, holder, rejections, pg_current_xact_id()::text AS xid,
		pg_advisory_xact_lock_shared(hashtext('{floor}'), hashtext($1))::text AS locked
	FROM {floor} WHERE resource = ? AND fence {cmp} ? FOR SHARE

-- PostgreSQL only; its one argument is written $1.
-- name: raise_lock
SELECT count(pg_advisory_xact_lock(hashtext('{floor}'), hashtext($1))) FROM (SELECT 1) AS one
	WHERE NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
		AND classid = hashtext('{floor}')::oid AND objid = hashtext($1)::oid AND objsubid = 2)

-- name: log_rejection
INSERT INTO {rejection} (resource, seq, refused_holder_id, refused_fence, admitted_holder_id, admitted_fence) VALUES (?, ?, ?, ?, ?, ?)

-- name: floor
SELECT fence FROM {floor} WHERE resource = ?

-- name: rejections
SELECT seq, refused_holder_id, refused_fence, admitted_holder_id, admitted_fence FROM {rejection} WHERE resource = ? ORDER BY seq

-- name: rejections_after
SELECT seq, refused_holder_id, refused_fence, admitted_holder_id, admitted_fence FROM {rejection} WHERE resource = ? AND seq > ? ORDER BY seq LIMIT ?

-- PostgreSQL only.
-- name: status
SELECT pg_xact_status(?::xid8) AS status

-- name: has_column_sqlite
SELECT count(*) AS n FROM pragma_table_info(?) WHERE name = ?

-- name: has_column_postgres
SELECT count(*)::int AS n FROM pg_attribute WHERE attrelid = to_regclass(?) AND attname = ? AND NOT attisdropped

-- name: rename_column
ALTER TABLE {rejection} RENAME COLUMN {from} TO {to}

-- PostgreSQL only (PostgresRaise): $1 the resource, $2 the fence, $3 its holder.
-- name: raise
INSERT INTO {floor} AS f (resource, fence, holder, rejections) VALUES ($1, $2, $3, 0)
	ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence, holder = EXCLUDED.holder
	WHERE f.fence < EXCLUDED.fence
	RETURNING f.fence
