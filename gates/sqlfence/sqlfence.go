// Package sqlfence is the fence gate inside a SQL database: the fence check,
// the raise of the floor and the caller's statements are one transaction in
// that database, so a stale holder's write can never commit, whatever process
// or machine it runs in.
//
// A Store keeps, per resource, the floor (the highest fence admitted, and who
// holds it) and the rejections log in two tables of the database it guards.
// Store.Commit is the method most callers want:
//
//	err := store.Commit(ctx, lease.Token(), func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = ? WHERE id = ?`, b, id)
//		return err
//	})
//
// The package works with any database/sql driver for the two dialects it
// knows: SQLite (tested with modernc.org/sqlite) and PostgreSQL (tested with
// github.com/jackc/pgx/v5/stdlib). It imports neither driver.
package sqlfence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
)

// Dialect is the SQL dialect of the database a Store guards.
type Dialect int

// The dialects a Store speaks.
const (
	SQLite Dialect = iota + 1
	Postgres
)

// String names the dialect.
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "SQLite"
	case Postgres:
		return "Postgres"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// Options configures a Store.
type Options struct {
	Dialect Dialect
	// Table is the prefix of the Store's two tables, <Table>_floor and
	// <Table>_rejection: a letter or underscore, then up to 40 letters,
	// digits or underscores. Default "lease_fence".
	Table string
	// Exclusive runs a resource's writes one at a time whatever their
	// fences: every transaction takes the floor row's lock for update. By
	// default (PostgreSQL) a write whose fence equals the floor takes the
	// row's lock in share mode, so writes of one generation run in
	// parallel, and only a raise (or a refusal, which counts itself) takes
	// it for update, waiting for them. SQLite runs one writer at a time
	// anyway: Exclusive changes nothing there.
	Exclusive bool
}

// MaxAttempts is how many times Commit and Admit run their transaction when
// the database reports a transient conflict (SQLite busy or locked,
// PostgreSQL serialization failure 40001 or deadlock 40P01), or a PostgreSQL
// connection breaks before the transaction's COMMIT was sent (the server
// rolls such a transaction back: after a restart of the server, the pool's
// old connections break one by one), before returning the error. Floor and
// Rejections retry a broken connection the same way.
const MaxAttempts = 8

// Store is a fence gate kept in a SQL database. It is safe for concurrent
// use, and any number of Stores, in any number of processes, may guard the
// same tables: the database serializes them.
type Store struct {
	db      *sql.DB
	dialect Dialect

	// The statements' texts (statements.go), as sent: PostgreSQL's with $n.
	qFloorTable, qRejectionTable, qHasColumn                                                   string
	qUpsert, qShare, qRaiseLock, qLogRejection, qFloor, qRejections, qRejectionsAfter, qStatus string
	qFloorsAfter, qRejectionTotal                                                              string

	// upsert is qUpsert prepared: database/sql prepares it once on each
	// connection and keeps it, so a commit does not parse it again (in
	// SQLite, parsing it took a third of a commit's CPU). share and
	// raiseLock are qShare and qRaiseLock prepared, nil when writes are
	// exclusive (Options.Exclusive, SQLite).
	upsert, share, raiseLock *sql.Stmt
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

func argError(arg, reason string) error {
	return &fence.ArgumentError{Pkg: "sqlfence", Arg: arg, Reason: reason}
}

// Open returns a Store over db, creating its tables if they are missing.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	switch {
	case ctx == nil:
		return nil, argError("ctx", "must not be nil")
	case db == nil:
		return nil, argError("db", "must not be nil")
	case opts.Dialect != SQLite && opts.Dialect != Postgres:
		return nil, argError("options.dialect", "must be sqlfence.SQLite or sqlfence.Postgres")
	}
	if opts.Table == "" {
		opts.Table = "lease_fence"
	}
	if !tableName.MatchString(opts.Table) {
		return nil, argError("options.table", "must be a letter or underscore followed by up to 40 letters, digits or underscores")
	}
	s := &Store{db: db, dialect: opts.Dialect}
	s.setStatements(opts)
	for _, q := range []string{s.qFloorTable, s.qRejectionTable} {
		err := s.retry(ctx, func() error { _, err := db.ExecContext(ctx, q); return err })
		if err != nil {
			if s.dialect == Postgres && isUniqueViolation(err) {
				// Two Opens raced to create the table; it exists now.
				continue
			}
			return nil, ended(ctx, wrap("creating tables", err))
		}
	}
	if err := s.upgrade(ctx, opts.Table+"_rejection"); err != nil {
		return nil, ended(ctx, wrap("upgrading tables", err))
	}
	if err := s.retry(ctx, func() error {
		var err error
		if s.upsert, err = db.PrepareContext(ctx, s.qUpsert); err != nil || s.qShare == "" {
			return err
		}
		if s.share, err = db.PrepareContext(ctx, s.qShare); err != nil {
			return err
		}
		s.raiseLock, err = db.PrepareContext(ctx, s.qRaiseLock)
		return err
	}); err != nil {
		return nil, ended(ctx, wrap("preparing statements", err))
	}
	return s, nil
}

// renamedColumns are the rejection table's columns that earlier versions
// named otherwise: old name, then new.
var renamedColumns = [][2]string{
	{"refused_holder", "refused_holder_id"},
	{"admitted_holder", "admitted_holder_id"},
}

// upgrade renames the columns of a rejection table made by an earlier
// version (renamedColumns). Several Opens may race: one that finds a column
// already renamed by another goes on.
func (s *Store) upgrade(ctx context.Context, rej string) error {
	q := s.qHasColumn
	has := func(col string) (bool, error) {
		var n int
		err := s.retry(ctx, func() error { return s.db.QueryRowContext(ctx, q, rej, col).Scan(&n) })
		return n > 0, err
	}
	for _, c := range renamedColumns {
		old, err := has(c[0])
		if err != nil {
			return err
		}
		if !old {
			continue
		}
		err = s.retry(ctx, func() error {
			_, err := s.db.ExecContext(ctx, statement("rename_column", s.dialect, "", rej, "{from}", c[0], "{to}", c[1]))
			return err
		})
		if err != nil {
			if renamed, herr := has(c[1]); herr == nil && renamed {
				continue
			}
			return err
		}
	}
	return nil
}

// PostgresRaise returns the PostgreSQL statement that raises a resource's
// floor inside the caller's own transaction, over the tables of prefix
// table (Options.Table; the default when empty), which Open must have
// created. With $1 the resource, $2 the new fence (a bigint) and $3 its
// holder, it creates the floor row if it is missing and locks it until the
// caller's transaction ends (waiting for a Commit that holds it), then:
//
//   - when $2 is above the floor, sets the floor to $2 and its holder to
//     $3, as Admit does for a newer token, and returns one row: the new
//     floor;
//   - otherwise changes nothing and returns no row. Admit would admit a
//     token at the floor and refuse one below it; a coordinator that meets
//     either with a fence it just issued must not grant it.
//
// This is how a coordinator whose state lives in the same database makes a
// handover atomic (service/pgstore's FenceTable): the grant raises the
// floor in the grant's own transaction, so from the instant the grant is
// committed every write with an older fence is refused and logged, even if
// the new holder never writes.
func PostgresRaise(table string) (string, error) {
	if table == "" {
		table = "lease_fence"
	}
	if !tableName.MatchString(table) {
		return "", argError("table", "must be a letter or underscore followed by up to 40 letters, digits or underscores")
	}
	return statement("raise", Postgres, table+"_floor", ""), nil
}

// upsert is the statement that checks a token against its resource's floor
// and raises it, as one statement (arguments: resource, fence, holder). It
// inserts the floor row if it is missing, or else locks it until the
// transaction ends (SQLite: the insert takes the database's write lock,
// PostgreSQL: the row's, waiting for a Commit that holds it) and, from the
// row as it was: raises the floor to the fence if the fence is above it (or
// the row has no holder yet: a floor at 0), and counts a refusal if the
// fence is below it. It returns the row as it is then (and in PostgreSQL the
// transaction's id, for commit): a fence below the returned floor was
// refused, with the returned count as its sequence number; else admitted.
// With broken (the deliberate break of the tests) the floor is never
// raised: a new row's is 0, an existing one's stays.
func upsert(d Dialect, floor string, broken bool) string {
	inserted, raised := "?", "excluded.fence"
	if broken {
		inserted, raised = "0 * ?", "f.fence"
	}
	return statement("upsert", d, floor, "", "{inserted}", inserted, "{raised}", raised)
}

// share is the PostgreSQL statement of a write whose fence equals the floor
// (arguments: resource, fence). Only if the row's fence is the token's, it
// takes the resource's advisory lock in share mode (its key: the hashes of the
// floor table's name and of the resource; two resources, or another
// program's lock, with the same key only wait for each other more than they
// need to: the floor row's own lock decides), then locks
// the floor row in share mode until the transaction ends, and returns it.
// Share locks do not conflict with each other, so writes of one generation
// run in parallel. A raise takes the advisory lock for itself (raiseLock)
// before its upsert: it waits for the writes in flight, and a share request
// that comes after it queues behind it (PostgreSQL's lock manager serves a
// request that conflicts with a waiting one after it; its row locks do
// not). Once the raise committed, the share lock's row has a new fence and
// no row comes back: the write goes on to the upsert, and is refused. With
// broken (the deliberate break of the tests) a higher fence takes this
// path too: a raise that neither waits nor raises.
func share(floor string, broken bool) string {
	cmp := "="
	if broken {
		cmp = "<="
	}
	return statement("share", Postgres, floor, "", "{cmp}", cmp)
}

// raiseLock is the PostgreSQL statement a write that the share statement did
// not admit runs before its upsert (argument: resource): it takes the
// resource's advisory lock for itself, unless the transaction holds it in
// share mode already (the share statement took it, then found the floor
// raised: the write is refused, and asking for the lock again would
// deadlock with another such write).
func raiseLock(floor string) string {
	return statement("raise_lock", Postgres, floor, "")
}

// rebind turns ? placeholders into $1, $2, ... (PostgreSQL's).
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Commit runs write inside one database transaction together with the fence
// check and the raise of the floor, and commits them together:
//
//   - nil: the write committed; the floor is at least tok.Fence.
//   - *fence.StaleFenceError: tok.Fence was below the floor. write did not
//     run; the refusal (both holders, both fences, and a per-resource Seq) was
//     committed to the rejections table.
//   - any other error: nothing was written and nothing was logged: the
//     context ended (the error is then context.Cause(ctx)), write returned an error (returned as is, or wrapped),
//     the token was invalid, or the database failed. If the database fails in
//     a way that leaves the outcome unknown (a PostgreSQL connection lost
//     during COMMIT), Commit asks the database what became of the
//     transaction, and if even that fails it returns an *OutcomeUnknownError
//     rather than guess.
//
// If write fails, the whole transaction rolls back, the raise of the floor
// with it: the floor stays where it was. That is safe because the database
// then holds nothing of the failed write: the floor still names the newest
// fence whose writes are in the database, so admitting an older fence
// afterwards cannot overwrite anything newer. (The in-memory gate keeps its
// raised floor after a failed write because there the resource may already
// hold part of it.) Use Admit to raise the floor without writing.
//
// Transient conflicts and connections that broke before COMMIT (see
// MaxAttempts) are retried with a fresh transaction, so write may run more
// than once; it must act only through tx
// and must not commit or roll it back. Each transaction holds a lock on its
// resource's floor row until it ends: in PostgreSQL a share lock for a
// fence equal to the floor, so such writes run in parallel, and a lock for
// update for a raise or a refusal, which waits for them (Options.Exclusive:
// for update always); in SQLite the database's write lock, so writes run
// one at a time.
func (s *Store) Commit(ctx context.Context, tok fence.Token, write func(ctx context.Context, tx *sql.Tx) error) error {
	if write == nil {
		return argError("write", "must not be nil")
	}
	return s.run(ctx, tok, write)
}

// Admit raises the floor of tok's resource to tok.Fence without writing, in
// its own transaction, so a coordinator can push the new generation to the
// database at reassignment. A token below the floor is refused and logged
// like a stale Commit.
func (s *Store) Admit(ctx context.Context, tok fence.Token) error {
	return s.run(ctx, tok, nil)
}

func (s *Store) run(ctx context.Context, tok fence.Token, write func(context.Context, *sql.Tx) error) error {
	if s == nil || s.db == nil {
		return argError("store", "is nil or was not made by Open")
	}
	if ctx == nil {
		return argError("ctx", "must not be nil")
	}
	if err := tok.Validate(); err != nil {
		return err
	}
	var stale *fence.StaleFenceError
	err := s.retry(ctx, func() error {
		var err error
		stale, err = s.attempt(ctx, tok, write)
		return err
	})
	if err != nil {
		return ended(ctx, err)
	}
	if stale != nil {
		return stale
	}
	return nil
}

// ended returns context.Cause(ctx) for an error that ctx's end caused (the
// context's own error, or a transaction database/sql rolled back when ctx
// ended), so that a caller's cancel cause comes back as it was given; any
// other error as it is.
func ended(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if errors.Is(err, ctx.Err()) || errors.Is(err, sql.ErrTxDone) {
		return context.Cause(ctx)
	}
	return err
}

// attempt is one transaction: check the token and raise (or count a
// refusal) in one statement that locks the floor row, then either log the
// refusal or write, and commit. In PostgreSQL, a fence equal to the floor
// is first tried with the share statement, which locks the row in share
// mode and changes nothing; when it returns no row (a raise, a refusal, a
// new resource) the upsert decides.
func (s *Store) attempt(ctx context.Context, tok fence.Token, write func(context.Context, *sql.Tx) error) (*fence.StaleFenceError, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, wrap("begin", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	// The upsert (or the share statement) is the transaction's first
	// statement: in SQLite it takes the database's write lock before
	// anything is read; in PostgreSQL it locks the resource's floor row.
	f := int64(tok.Fence)
	var floor, rejections int64
	var holder, xid string
	err = sql.ErrNoRows
	if s.share != nil {
		var locked string
		err = tx.StmtContext(ctx, s.share).QueryRowContext(ctx, tok.Resource, f).Scan(&floor, &holder, &rejections, &xid, &locked)
		if errors.Is(err, sql.ErrNoRows) {
			var n int64
			err = tx.StmtContext(ctx, s.raiseLock).QueryRowContext(ctx, tok.Resource).Scan(&n)
			if err == nil {
				err = sql.ErrNoRows
			}
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		row := tx.StmtContext(ctx, s.upsert).QueryRowContext(ctx, tok.Resource, f, tok.HolderID)
		if s.dialect == Postgres {
			err = row.Scan(&floor, &holder, &rejections, &xid)
		} else {
			err = row.Scan(&floor, &holder, &rejections)
		}
	}
	if err != nil {
		return nil, wrap("checking the floor", err)
	}
	if f < floor {
		r := fence.Rejection{
			Seq: uint64(rejections), Resource: tok.Resource,
			RefusedHolderID: tok.HolderID, RefusedFence: tok.Fence,
			AdmittedHolderID: holder, AdmittedFence: uint64(floor),
		}
		if _, err := tx.ExecContext(ctx, s.qLogRejection, tok.Resource, int64(r.Seq), r.RefusedHolderID, f, r.AdmittedHolderID, floor); err != nil {
			return nil, wrap("logging the refusal", err)
		}
		if err := s.commit(ctx, tx, xid); err != nil {
			committed = true // commit consumed tx either way
			return nil, err
		}
		committed = true
		return &fence.StaleFenceError{Rejection: r}, nil
	}
	if write != nil {
		if err := write(ctx, tx); err != nil {
			return nil, err
		}
	}
	committed = true
	return nil, s.commit(ctx, tx, xid)
}

// commit commits tx. A PostgreSQL COMMIT that fails without an answer from
// the server (the connection broke) may or may not have happened; then the
// server is asked for the transaction's status.
func (s *Store) commit(ctx context.Context, tx *sql.Tx, xid string) error {
	err := tx.Commit()
	if err == nil {
		return nil
	}
	if s.dialect != Postgres || (sqlState(err) != "" && !connectionEnded(sqlState(err))) || xid == "" {
		// SQLite's COMMIT is local: an error means it did not happen (the
		// driver rolls back whatever is left). A PostgreSQL error code
		// means the server answered, and a failed COMMIT rolls back;
		// except a FATAL that ends the connection (the server shutting
		// down, the backend terminated), which may come after the commit
		// happened, before its answer was sent.
		return wrap("commit", err)
	}
	for i := range MaxAttempts {
		var status sql.NullString
		qerr := s.db.QueryRowContext(context.WithoutCancel(ctx), s.qStatus, xid).Scan(&status)
		switch {
		case qerr != nil:
		case status.String == "committed":
			return nil
		case status.String == "aborted":
			return wrap("commit", err)
		}
		_ = pause(context.WithoutCancel(ctx), i)
	}
	return &OutcomeUnknownError{Err: err}
}

// OutcomeUnknownError is returned when a COMMIT failed in a way that leaves
// open whether it happened, and the database could not be asked afterwards.
// The write may or may not be in the database; read it back to find out.
type OutcomeUnknownError struct{ Err error }

func (e *OutcomeUnknownError) Error() string {
	return "sqlfence: the commit's outcome is unknown: " + e.Err.Error()
}

// Unwrap returns the commit's error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// retry runs fn until it returns something other than a transient conflict,
// at most MaxAttempts times, pausing a little longer (with jitter) each time.
func (s *Store) retry(ctx context.Context, fn func() error) error {
	var err error
	for i := range MaxAttempts {
		err = fn()
		if err == nil || !s.transient(err) {
			return err
		}
		if perr := pause(ctx, i); perr != nil {
			return err
		}
	}
	return err
}

// pause waits about 2^i ms (at most 64), or until ctx is done.
func pause(ctx context.Context, i int) error {
	d := time.Duration(1<<min(i, 6)) * time.Millisecond
	d = d/2 + rand.N(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// transient reports whether err is a conflict that a fresh transaction may
// not meet: SQLite busy/locked, PostgreSQL serialization failure or deadlock,
// or a PostgreSQL connection that broke while the transaction was open.
func (s *Store) transient(err error) bool {
	if s.dialect == Postgres {
		code := sqlState(err)
		if code == "40001" || code == "40P01" {
			return true
		}
		var dbe *DBError
		if errors.As(err, &dbe) && dbe.Op == "commit" {
			// After COMMIT was sent: commit settled it, and it is
			// reported as it is.
			return false
		}
		if code != "" {
			// The server ended the connection: the transaction was
			// rolled back.
			return connectionEnded(code)
		}
		return brokenConn(err)
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY")
}

// brokenConn reports whether err says the connection to the server broke
// without an answer (a reset, an end of stream, a connection the driver
// found bad), in a statement other than COMMIT: the server then rolls the
// transaction back, so nothing of it happened. (A COMMIT whose connection
// broke is settled by commit and never retried.)
func brokenConn(err error) bool {
	var unknown *OutcomeUnknownError
	if sqlState(err) != "" || errors.As(err, &unknown) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && !ne.Timeout()
}

// connectionEnded reports whether a PostgreSQL error code ends the
// connection without the server having finished the transaction: the
// server shutting down or restarting (57P01, 57P02, 57P03), an idle session
// ended (57P05), a connection exception (class 08).
func connectionEnded(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "57P05":
		return true
	}
	return strings.HasPrefix(code, "08")
}

// sqlState returns the SQLSTATE code of a PostgreSQL error (pgx's
// *pgconn.PgError and lib/pq's *pq.Error both have the method), or "".
func sqlState(err error) string {
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		return coded.SQLState()
	}
	return ""
}

func isUniqueViolation(err error) bool { return sqlState(err) == "23505" }

// wrap prefixes a database error with what Commit was doing; errors.Is/As
// still reach the driver's error.
func wrap(doing string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &DBError{Op: doing, Err: err}
}

// DBError is a database failure during one of the Store's own statements.
// Nothing was written and nothing was logged.
type DBError struct {
	Op  string
	Err error
}

func (e *DBError) Error() string { return "sqlfence: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the driver's error.
func (e *DBError) Unwrap() error { return e.Err }

// Floor returns the highest fence admitted for resource (0 if none has been).
func (s *Store) Floor(ctx context.Context, resource string) (uint64, error) {
	if err := s.checkQuery(ctx, resource); err != nil {
		return 0, err
	}
	var f int64
	err := s.retry(ctx, func() error { return s.db.QueryRowContext(ctx, s.qFloor, resource).Scan(&f) })
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, ended(ctx, wrap("reading the floor", err))
	}
	return uint64(f), nil
}

// Rejections returns every refusal logged for resource, oldest first. The
// table keeps them all (one row per refusal); prune it with your own DELETE
// if you need to, and read a long log a page at a time with
// RejectionsAfter.
func (s *Store) Rejections(ctx context.Context, resource string) ([]fence.Rejection, error) {
	if err := s.checkQuery(ctx, resource); err != nil {
		return nil, err
	}
	return s.readRejections(ctx, resource, s.qRejections, resource)
}

// MaxRejectionsPage is the largest limit RejectionsAfter takes.
const MaxRejectionsPage = fence.MaxRejectionsPage

// RejectionsAfter returns a page of resource's refusals: those whose Seq is
// above after, oldest first, at most limit (1 to MaxRejectionsPage) of them.
// Start with after 0 and pass the last Seq of each page to get the next;
// a page shorter than limit is the end of the log as it was then.
func (s *Store) RejectionsAfter(ctx context.Context, resource string, after uint64, limit int) ([]fence.Rejection, error) {
	if err := s.checkQuery(ctx, resource); err != nil {
		return nil, err
	}
	switch {
	case after > math.MaxInt64:
		return nil, argError("after", "must be at most "+strconv.FormatInt(math.MaxInt64, 10))
	case limit < 1 || limit > MaxRejectionsPage:
		return nil, argError("limit", "must be from 1 to "+strconv.Itoa(MaxRejectionsPage))
	}
	return s.readRejections(ctx, resource, s.qRejectionsAfter, resource, int64(after), limit)
}

func (s *Store) readRejections(ctx context.Context, resource, q string, args ...any) ([]fence.Rejection, error) {
	var out []fence.Rejection
	err := s.retry(ctx, func() error {
		out = out[:0]
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq, rf, af int64
			r := fence.Rejection{Resource: resource}
			if err := rows.Scan(&seq, &r.RefusedHolderID, &rf, &r.AdmittedHolderID, &af); err != nil {
				return err
			}
			r.Seq, r.RefusedFence, r.AdmittedFence = uint64(seq), uint64(rf), uint64(af)
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, ended(ctx, wrap("reading rejections", err))
	}
	return out, nil
}

func (s *Store) checkQuery(ctx context.Context, resource string) error {
	switch {
	case s == nil || s.db == nil:
		return argError("store", "is nil or was not made by Open")
	case ctx == nil:
		return argError("ctx", "must not be nil")
	case resource == "":
		return argError("resource", "must not be empty")
	case len(resource) > fence.MaxIDBytes:
		return argError("resource", "must be at most "+strconv.Itoa(fence.MaxIDBytes)+" bytes")
	}
	return nil
}
