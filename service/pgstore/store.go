//go:build !js && !wasip1

// Package pgstore keeps the coordinator's state in PostgreSQL, so that any
// number of coordinator processes (replicas), on any number of machines,
// serve the same leases from one database. It is a service.Store: the
// Service's decision function runs inside one transaction that holds the
// resource's row locked, and the rules still run in core/lease.
//
// A decision on a row the store knows (it decided the resource's last
// call) is one round trip: the decision runs in Go on that row, and one
// statement, the server-side function lease_fence_decide, checks the row
// is unchanged and the decision still holds, writes it and commits (see
// fast.go). Any other decision is one transaction on one connection, in
// two round trips: the first locks the resource's row and reads the
// database server's clock, the fence counter and the counts; the decision
// runs in Go; the second writes the row and commits. Fences come from one sequence; the clock is
// the database server's, guarded per resource against going backwards; a
// retried request id is answered from the row, whichever replica receives
// it; expired rows are swept by any replica with FOR UPDATE SKIP LOCKED.
// With FenceTable set, a grant also raises the resource's floor in the
// sqlfence table of that name, in the grant's own transaction: the handover
// is atomic for resources guarded in the same database.
//
// Create makes the schema (once, like -init); Open refuses a database
// without it, or with another version. docs/service.md says what each
// failure does.
package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	"github.com/lease-fence/lease-fence/service"
)

// Defaults of Options.
const (
	DefaultTimeout  = 5 * time.Second
	DefaultMaxConns = 16
	// DefaultTimelineJump is how far the fences jump when the database is
	// found on a new timeline (Options.TimelineJump).
	DefaultTimelineJump = 1_000_000_000_000
)

// Options configures a Store.
type Options struct {
	// Domain names the coordinator's clock domain. Default "coordinator".
	Domain string
	// TTL is the lease length, the Service's. Required, positive; every
	// replica should run with the same.
	TTL time.Duration
	// Limits bound what the store keeps, for all replicas together; zero
	// fields mean their defaults.
	Limits service.Limits
	// FenceTable, if set, is the prefix of sqlfence tables in the same
	// database (sqlfence.Options.Table, such as "lease_fence"): every grant
	// raises the resource's floor there to the new fence in its own
	// transaction. Open creates the tables if they are missing.
	FenceTable string
	// Timeout bounds each call (Update, Sweep), and is the server's
	// lock_timeout and idle_in_transaction_session_timeout for the store's
	// sessions, so a transaction of a replica cut off from the database
	// holds its rows no longer than this. Zero means DefaultTimeout.
	Timeout time.Duration
	// TimelineJump is how far the fence counter jumps when a replica finds
	// the database on another timeline than the one recorded (a standby
	// was promoted, or a backup recovered to a point in time): fences the
	// old timeline issued and lost with it (asynchronous replication, an
	// older backup) are not issued again unless more than this many were
	// lost. Zero means DefaultTimelineJump.
	TimelineJump uint64
	// MinFence makes every fence issued from now on at least MinFence, by
	// moving the sequence on at Open if it is below (after restoring a
	// logical dump of the state, which brings back an older sequence; a
	// promotion or a point-in-time recovery moves it on by itself, see
	// TimelineJump).
	MinFence uint64
	// StartWait is how long Open tries a database it cannot reach, or
	// that stops answering while the state is checked (a server
	// restarting), before it gives up with an error saying the database
	// is unreachable. Zero means DefaultStartWait.
	StartWait time.Duration
	// Logger receives the store's warnings (a clock behind the state, a
	// new timeline). Nil logs nothing.
	Logger *slog.Logger
}

// Store is a service.Store in PostgreSQL. It is safe for concurrent use;
// any number of Stores, in any number of processes, may share one
// database.
type Store struct {
	pool       *pgxpool.Pool
	domain     string
	ttl        float64 // milliseconds
	timeout    time.Duration
	limits     service.Limits
	jump       uint64
	raise      string // sqlfence.PostgresRaise, or ""
	fenceTable string
	countKey   int64 // the advisory lock of the counts: lease_fence_totals's OID
	ownerKeys  int64 // lease_fence_owners's OID << 32: ownerKey's high bits
	log        *slog.Logger

	clockOffset atomic.Uint64 // float64 bits, milliseconds added to the database's clock (tests)

	sweepMu  sync.Mutex
	reclaims service.Reclaims // the sweeps made for a full store (""), or an owner at its limit

	timeline atomic.Int64 // the timeline this store last checked

	known known // the rows and state the one-round-trip path decides on (fast.go)
	// paths counts the decisions made in one round trip, in two (the row
	// read first), by the transaction that locks the row, and with others
	// of a batch (UpdateEach).
	paths [4]atomic.Int64

	id         string // in this Store's notifications, so it ignores its own
	connConfig *pgx.ConnConfig
	watch      watching
	onExpired  func(service.Entry) // ReportExpired

	// unreplicated holds the connections on which the server warned that
	// a commit stopped waiting for the synchronous standbys (an operator's
	// pg_cancel_backend, for instance): that commit is not answered as
	// done.
	unreplicated sync.Map // *pgconn.PgConn -> struct{}
}

var _ service.Store = (*Store)(nil)

// config turns dsn and opts into a pool configuration with the store's
// session settings.
func config(dsn string, opts *Options) (*pgxpool.Config, error) {
	if opts.TTL <= 0 {
		return nil, errors.New("pgstore: Options.TTL must be positive, got " + opts.TTL.String())
	}
	var err error
	if opts.Limits, err = opts.Limits.WithDefaults(); err != nil || opts.MinFence > lease.MaxFence {
		return nil, errors.New("pgstore: Options.Limits must not be negative, and MinFence at most lease.MaxFence")
	}
	if opts.FenceTable != "" {
		if _, err := sqlfence.PostgresRaise(opts.FenceTable); err != nil {
			return nil, errors.New("pgstore: Options.FenceTable: " + err.Error())
		}
	}
	if opts.Domain == "" {
		opts.Domain = "coordinator"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.TimelineJump == 0 {
		opts.TimelineJump = DefaultTimelineJump
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("pgstore: the connection string: " + err.Error())
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	rp := cfg.ConnConfig.RuntimeParams
	if rp["application_name"] == "" {
		rp["application_name"] = "lease-fence coordinator"
	}
	ms := strconv.FormatInt(max(opts.Timeout.Milliseconds(), 1), 10)
	rp["lock_timeout"] = ms
	rp["idle_in_transaction_session_timeout"] = ms
	// The store's statements look rows up by key: plan each once per
	// connection, not at every execution (PostgreSQL's choice between
	// custom and generic plans otherwise keeps planning some of them).
	if rp["plan_cache_mode"] == "" {
		rp["plan_cache_mode"] = "force_generic_plan"
	}
	// No statement_timeout, and no cancel request ever: a call that runs
	// out of time closes its connection (see noCancel).
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	cfg.BeforeConnect = func(_ context.Context, c *pgx.ConnConfig) error {
		noCancel(c)
		return nil
	}
	return cfg, nil
}

// errNoCancel is what a connection of the store answers pgx's attempt to
// send a cancel request.
var errNoCancel = errors.New("pgstore: no cancel requests")

// noCancel makes c's connection unable to send a cancel request: once it is
// established, its dial function (which pgx uses for nothing else) refuses.
// pgx sends one when a call runs out of time or its connection fails; a
// COMMIT whose wait for a synchronous standby is cancelled is committed
// and visible at once, though the standby may not have it, and a failover
// would then lose what other calls were answered from. Without the cancel,
// the closed connection leaves that COMMIT waiting until the standby has
// it (and a statement waiting for a lock ends at lock_timeout).
func noCancel(c *pgx.ConnConfig) {
	var established atomic.Bool
	dial, after := c.DialFunc, c.AfterConnect
	c.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if established.Load() {
			return nil, errNoCancel
		}
		return dial(ctx, network, addr)
	}
	c.AfterConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
		established.Store(true)
		if after != nil {
			return after(ctx, pc)
		}
		return nil
	}
}

// connect opens one connection with cfg, unable to send cancel requests.
func connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	c := cfg.Copy()
	noCancel(c)
	conn, err := pgx.ConnectConfig(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connecting: %w", err)
	}
	return conn, nil
}

// refusedByServer reports whether err carries an answer of the server that
// is not about reaching it (a wrong password, a database that does not
// exist), as opposed to a connection that failed or a server that is
// starting, stopping or full (SQLSTATE class 08, 57P01-57P03, 53300).
func refusedByServer(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch {
	case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", pe.Code == "53300":
		return false
	}
	return true
}

// Create makes the store's schema in the database dsn names (refused if it
// is there already) and opens it. dsn is a PostgreSQL connection string
// (postgres://... or key=value), as pgx reads it; several hosts and
// target_session_attrs=read-write are how replicas follow a failover.
func Create(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := config(dsn, &opts)
	if err != nil {
		return nil, err
	}
	conn, err := connect(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := checkWritable(ctx, conn); err != nil {
		return nil, err
	}
	var exists *string
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1)::text`, tMeta).Scan(&exists); err != nil {
		return nil, errors.New("pgstore: " + err.Error())
	}
	if exists != nil {
		return nil, errors.New("pgstore: the database already holds a lease-fence state (" + *exists + "); -init creates a new one only")
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, errors.New("pgstore: " + err.Error())
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	for _, q := range schema {
		if _, err := tx.Exec(ctx, q); err != nil {
			if code := sqlState(err); code == "42P07" || code == "23505" {
				return nil, errors.New("pgstore: the database already holds a lease-fence state (created just now by another process); -init creates a new one only")
			}
			return nil, errors.New("pgstore: creating the schema: " + err.Error())
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+tMeta+` (schema_version, timeline) VALUES ($1, (`+timelineSQL+`))`, SchemaVersion); err != nil {
		return nil, errors.New("pgstore: creating the schema: " + err.Error())
	}
	if err := tx.Commit(ctx); err != nil {
		if code := sqlState(err); code == "42P07" || code == "23505" {
			return nil, errors.New("pgstore: the database already holds a lease-fence state (created just now by another process); -init creates a new one only")
		}
		return nil, errors.New("pgstore: creating the schema: " + err.Error())
	}
	return openConfig(ctx, cfg, opts)
}

// Open opens the store's state in the database dsn names. It refuses, with
// a message saying why, a server that is a read-only standby, a database
// without the schema (Create makes it), and a schema of another version.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := config(dsn, &opts)
	if err != nil {
		return nil, err
	}
	return openConfig(ctx, cfg, opts)
}

func openConfig(ctx context.Context, cfg *pgxpool.Config, opts Options) (*Store, error) {
	s := &Store{
		domain: opts.Domain, ttl: clock.Millis(opts.TTL), timeout: opts.Timeout,
		limits: opts.Limits, jump: opts.TimelineJump,
		fenceTable: opts.FenceTable, log: opts.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	// Every new connection checks the timeline before it is used, so the
	// first decision made on a promoted standby comes after the jump.
	cfg.AfterConnect = s.checkTimeline
	cfg.ConnConfig.OnNotice = func(c *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "synchronous replication") || strings.Contains(n.Detail, "might not have been replicated") {
			s.unreplicated.Store(c, struct{}{})
		}
	}
	// A database that cannot be reached, or stops answering during the
	// checks (a server restarting), is tried again for StartWait, then
	// reported as unreachable: never as a damaged state.
	wait, pause, warned := cmp.Or(opts.StartWait, DefaultStartWait), 100*time.Millisecond, false
	deadline := time.Now().Add(wait)
	for {
		err := s.check(ctx, cfg, opts)
		var u *unreachable
		if err == nil || !errors.As(err, &u) {
			if err != nil {
				return nil, err
			}
			break
		}
		if ctx.Err() != nil || time.Now().Add(pause).After(deadline) {
			return nil, fmt.Errorf("pgstore: the database is unreachable (tried for %s): %s; the state was not found damaged: start again once the database answers", wait, u.err)
		}
		if !warned {
			warned = true
			s.log.Warn("the database is unreachable; trying again", "for", wait.String(), "err", u.err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errors.New("pgstore: " + err.Error())
	}
	s.pool, s.connConfig = pool, cfg.ConnConfig
	s.startWatching()
	if opts.FenceTable != "" {
		if s.raise, err = sqlfence.PostgresRaise(opts.FenceTable); err != nil {
			s.Close()
			return nil, errors.New("pgstore: Options.FenceTable: " + err.Error())
		}
		db := stdlib.OpenDBFromPool(pool)
		_, err := sqlfence.Open(ctx, db, sqlfence.Options{Dialect: sqlfence.Postgres, Table: opts.FenceTable})
		db.Close()
		if err != nil {
			s.Close()
			return nil, errors.New("pgstore: the fence table: " + err.Error())
		}
	}
	return s, nil
}

// Close stops the store's watches and closes its connections.
func (s *Store) Close() {
	s.stopWatching()
	s.pool.Close()
}

func checkWritable(ctx context.Context, conn *pgx.Conn) error {
	var standby bool
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby); err != nil {
		return errors.New("pgstore: " + err.Error())
	}
	if standby {
		return errors.New("pgstore: the server is a standby (read-only): point the connection string at the primary, or list every server with target_session_attrs=read-write")
	}
	return nil
}

// checkSchema refuses a database that is not exactly a lease-fence state of
// SchemaVersion.
func (s *Store) checkSchema(ctx context.Context, conn *pgx.Conn) error {
	if err := checkWritable(ctx, conn); err != nil {
		return err
	}
	var version int64
	err := conn.QueryRow(ctx, `SELECT schema_version FROM `+tMeta).Scan(&version)
	if err == nil && version >= 1 && version < SchemaVersion {
		if err = s.upgrade(ctx, conn); err != nil {
			return err
		}
		version = SchemaVersion
	}
	switch {
	case sqlState(err) == "42P01":
		return errors.New("pgstore: the database holds no lease-fence state (no table " + tMeta + " in its search_path); start once with -init to create it")
	case sqlState(err) == "42703":
		return errors.New("pgstore: " + tMeta + " is not a lease-fence state's (no schema_version column): " + err.Error())
	case errors.Is(err, pgx.ErrNoRows):
		return errors.New("pgstore: " + tMeta + " is empty: the state was not created by -init, or was damaged")
	case err != nil:
		return errors.New("pgstore: reading the schema version: " + err.Error())
	case version > SchemaVersion:
		return fmt.Errorf("pgstore: the state's schema is version %d, newer than this coordinator's (%d): run a coordinator that knows version %d", version, SchemaVersion, version)
	case version != SchemaVersion:
		return fmt.Errorf("pgstore: the state's schema version %d is unknown to this coordinator (it knows version %d)", version, SchemaVersion)
	}
	// Every object, with the columns this version reads.
	checks := []string{
		`SELECT singleton, schema_version, timeline, created_at, listening_until FROM ` + tMeta + ` LIMIT 0`,
		`SELECT resource, holder_id, request_id, fence, expires_at, secret_sha256, releases, last_fence, decided_at, sweep_at, owner,
			value, revoked_holder, revoked_fence, revoked_at FROM ` + tLeases + ` LIMIT 0`,
		`SELECT slot, leases, releases, lasts FROM ` + tCounts + ` LIMIT 0`,
		`SELECT owner, slot, leases FROM ` + tOwners + ` LIMIT 0`,
		`SELECT last_value, is_called FROM ` + tFences,
		`SELECT 'lease_fence_decide'::regproc`,
	}
	for _, q := range checks {
		rows, err := conn.Query(ctx, q)
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			return errors.New("pgstore: the state is incomplete or damaged: " + err.Error())
		}
	}
	var typ string
	if err := conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'releases'`, tLeases).Scan(&typ); err != nil || typ != "bytea" {
		return fmt.Errorf("pgstore: the state is damaged: %s.releases is %q, not bytea (%v)", tLeases, typ, err)
	}
	var slots, first, last int64
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(min(slot), -1), coalesce(max(slot), -1) FROM `+tCounts).Scan(&slots, &first, &last); err != nil {
		return errors.New("pgstore: the state is incomplete or damaged: " + err.Error())
	}
	if slots != countSlots || first != 0 || last != countSlots-1 {
		return fmt.Errorf("pgstore: the state is damaged: %s holds %d slots (%d to %d), not %d", tCounts, slots, first, last, countSlots)
	}
	var ownersOID int64
	if err := conn.QueryRow(ctx, `SELECT $1::regclass::oid::bigint, $2::regclass::oid::bigint`, tCounts, tOwners).Scan(&s.countKey, &ownersOID); err != nil {
		return errors.New("pgstore: " + err.Error())
	}
	s.ownerKeys = ownersOID << 32
	return nil
}

// check connects and checks the state (schema, timeline, clock) and moves
// the counter on to MinFence. An error found while the connection was lost
// (a failed connect, or a connection that closed or no longer answers
// after a failed check) is an *unreachable.
func (s *Store) check(ctx context.Context, cfg *pgxpool.Config, opts Options) error {
	conn, err := connect(ctx, cfg.ConnConfig)
	if err != nil {
		if refusedByServer(err) || ctx.Err() != nil {
			return err
		}
		return &unreachable{err: strings.TrimPrefix(err.Error(), "pgstore: ")}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = s.checkSchema(ctx, conn)
	if err == nil {
		err = s.checkTimeline(ctx, conn)
	}
	if err == nil {
		err = s.checkClock(ctx, conn)
	}
	if err == nil && opts.MinFence > 1 {
		err = s.raiseFences(ctx, conn, opts.MinFence)
	}
	if err != nil && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		if conn.IsClosed() || conn.Ping(pctx) != nil {
			// What the check made of the failure (a state "incomplete or
			// damaged") does not hold: only the connection's error does.
			msg := err.Error()
			for _, pre := range []string{"pgstore: ", "the state is incomplete or damaged: ", "the state is damaged: "} {
				msg = strings.TrimPrefix(msg, pre)
			}
			return &unreachable{err: "the connection was lost while the state was checked: " + msg}
		}
	}
	return err
}

// unreachable is a failure to reach the database, or a check cut off by
// the connection's loss (err says what failed).
type unreachable struct{ err string }

func (u *unreachable) Error() string { return "pgstore: the database is unreachable: " + u.err }

// DefaultStartWait is how long Open and Create try an unreachable
// database before they give up (Options.StartWait).
const DefaultStartWait = 30 * time.Second

// upgrade makes a state of version 1 to 7 one of SchemaVersion, in one
// transaction holding the meta row, unless another coordinator did it
// first, one version at a time (upgrades). Coordinators of an older
// version that still run fail their calls from then on (docs/service.md,
// "Upgrading the schema").
func (s *Store) upgrade(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return errors.New("pgstore: upgrading the schema: " + err.Error())
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	var version, from int64
	if err := tx.QueryRow(ctx, `SELECT schema_version FROM `+tMeta+` FOR UPDATE`).Scan(&version); err != nil {
		return errors.New("pgstore: upgrading the schema: " + err.Error())
	}
	for from = version; version >= 1 && version < SchemaVersion; version++ {
		if err := upgrades[version](ctx, tx); err != nil {
			return fmt.Errorf("pgstore: upgrading the schema from version %d to %d (nothing was changed): %w", from, SchemaVersion, err)
		}
	}
	if version == from {
		return nil // upgraded meanwhile
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: upgrading the schema from version %d to %d: %w", from, SchemaVersion, err)
	}
	s.log.Warn(fmt.Sprintf("the state's schema was upgraded from version %d to %d (version 2: the token that acquired each lease, counted by token; "+
		"version 3: releases in a binary layout; version 4: election values and revocations; version 5: the decision function; version 6: the decision function of a batch; version 7: the decision function in fewer statements; version 8: the decision function sums the counts only when it adds to one): %s", from, SchemaVersion, olderCoordinators(from)))
	return nil
}

// olderCoordinators says what becomes of coordinators of the version an
// upgrade started from that still run (docs/postgres.md): below version 4
// their decisions name a table or column the upgrade changed.
func olderCoordinators(from int64) string {
	if from < 4 {
		return "coordinators of older versions still running now fail every call until they are replaced"
	}
	return "coordinators of older versions still running keep deciding correctly alongside; replace them"
}

// upgrades[v] makes a state of version v one of version v+1 within the
// upgrade's transaction.
var upgrades = [SchemaVersion]func(context.Context, pgx.Tx) error{
	1: execAll(upgradeV1), 2: upgradeV2, 3: execAll(upgradeV3), 4: execAll(replaceDecide(5)), 5: execAll(upgradeV5), 6: execAll(replaceDecide(7)), 7: execAll(replaceDecide(8)),
}

// execAll runs the statements qs in turn.
func execAll(qs []string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		for _, q := range qs {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
}

// upgradeV2 makes a state of version 2 one of version 3 within tx: each
// row's releases, JSON in the column released, are read strictly and
// written in the binary layout to the new column releases, and the old
// column is dropped (a coordinator of version 2 still running then fails
// every decision, which reads it); the meta row gets listening_until.
// Releases that do not decode refuse the upgrade.
func upgradeV2(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `ALTER TABLE `+tLeases+` ADD COLUMN releases bytea NOT NULL DEFAULT '\x00'`); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT resource, released::text FROM `+tLeases+` WHERE released::text <> '[]'`)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for rows.Next() {
		var resource, text string
		if err := rows.Scan(&resource, &text); err != nil {
			rows.Close()
			return err
		}
		var rels []service.Release
		if err := json.Unmarshal([]byte(text), &rels, json.RejectUnknownMembers(true)); err != nil || len(rels) > service.MaxReleases {
			rows.Close()
			return fmt.Errorf("the releases of %q are damaged (%d of them): %v", resource, len(rels), err)
		}
		b.Queue(`UPDATE `+tLeases+` SET releases = $2 WHERE resource = $1`, resource, service.AppendReleasesBinary(nil, rels))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for _, q := range []string{
		`ALTER TABLE ` + tLeases + ` DROP COLUMN released`,
		`ALTER TABLE ` + tMeta + ` ADD COLUMN listening_until double precision NOT NULL DEFAULT 0`,
		`UPDATE ` + tMeta + ` SET schema_version = 3`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// ownerKey is the advisory lock of owner's count: the OID of the counts by
// owner in the high 32 bits (so it is none of the counts' own locks, which
// are OIDs), the owner's FNV-1a hash in the low.
func (s *Store) ownerKey(owner string) int64 {
	h := fnv.New32a()
	h.Write([]byte(owner))
	return s.ownerKeys | int64(h.Sum32())
}

// checkTimeline compares the database's timeline with the one recorded in
// the state. A new timeline means a standby was promoted or a backup was
// recovered to a point in time, either of which may have lost the last
// grants and the fences they took; then the fence counter jumps by
// TimelineJump, once, under the lock of the meta row, before this
// connection makes any decision.
func (s *Store) checkTimeline(ctx context.Context, conn *pgx.Conn) error {
	var current, recorded int64
	err := conn.QueryRow(ctx, `SELECT (`+timelineSQL+`), (SELECT timeline FROM `+tMeta+`)`).Scan(&current, &recorded)
	if err != nil {
		return errors.New("pgstore: reading the timeline: " + err.Error())
	}
	if current == recorded {
		s.timeline.Store(current)
		return nil
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return errors.New("pgstore: " + err.Error())
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	if err := tx.QueryRow(ctx, `SELECT timeline FROM `+tMeta+` FOR UPDATE`).Scan(&recorded); err != nil {
		return errors.New("pgstore: reading the timeline: " + err.Error())
	}
	if current != recorded {
		var before, after int64
		err := tx.QueryRow(ctx, `SELECT last_value, setval('`+tFences+`', least(last_value + $1, 9007199254740991)) FROM `+tFences, int64(s.jump)).Scan(&before, &after)
		if err != nil {
			return errors.New("pgstore: moving the fences past the old timeline's: " + err.Error())
		}
		if _, err := tx.Exec(ctx, `UPDATE `+tMeta+` SET timeline = $1`, current); err != nil {
			return errors.New("pgstore: " + err.Error())
		}
		if err := tx.Commit(ctx); err != nil {
			return errors.New("pgstore: " + err.Error())
		}
		s.log.Warn("the database is on a new timeline (a standby was promoted, or a backup recovered): fences jump past any the old timeline may have issued and lost",
			"timeline", current, "was", recorded, "fenceBefore", before, "fenceAfter", after)
	}
	s.timeline.Store(current)
	return nil
}

// raiseFences moves the sequence on so that the next fence is at least min.
func (s *Store) raiseFences(ctx context.Context, conn *pgx.Conn, min uint64) error {
	rows, err := conn.Query(ctx, `SELECT setval('`+tFences+`', $1, true) FROM `+tFences+`
		WHERE CASE WHEN is_called THEN last_value ELSE last_value - 1 END < $1`, int64(min-1))
	if err != nil {
		return errors.New("pgstore: moving the fences on: " + err.Error())
	}
	moved := rows.Next()
	rows.Close()
	if err := rows.Err(); err != nil {
		return errors.New("pgstore: moving the fences on: " + err.Error())
	}
	if moved {
		s.log.Info("every new fence is at least the minimum", "minFence", min)
	}
	return nil
}

// checkClock warns when the database's clock reads earlier than decisions
// already stored: it was stepped back, or the state comes from a server
// whose clock was ahead. Those resources are decided at their last reading
// until the clock passes it (docs/service.md, "The clock").
func (s *Store) checkClock(ctx context.Context, conn *pgx.Conn) error {
	var ahead float64
	var n int64
	err := conn.QueryRow(ctx, `SELECT coalesce(max(decided_at), 0) - `+clockSQL("$1")+`, count(*) FILTER (WHERE decided_at > `+clockSQL("$1")+`) FROM `+tLeases,
		s.offset()).Scan(&ahead, &n)
	if err != nil {
		return errors.New("pgstore: reading the clock: " + err.Error())
	}
	if n > 0 {
		s.log.Warn("the database's clock reads earlier than decisions already stored (stepped back, or a server with another clock): those resources are decided at their last reading until the clock passes it",
			"resources", n, "aheadMillis", ahead)
	}
	return nil
}

func (s *Store) offset() float64 { return math.Float64frombits(s.clockOffset.Load()) }

// sqlState returns the SQLSTATE of a PostgreSQL error, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
