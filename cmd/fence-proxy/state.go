//go:build !js && !wasip1

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// The state file is an SQLite database holding sqlfence's two tables (the
// floors and the refusals), marked as fence-proxy's with SQLite's own
// header fields: application_id and user_version. A file without the mark
// is not opened, whatever else it holds.
const (
	stateAppID   = 0x4c465058 // "LFPX"
	stateVersion = 1
	sqliteMagic  = "SQLite format 3\x00"
)

// state is the open state file: the SQLite database, the gate on it, and
// the file held locked for as long as the proxy runs.
type state struct {
	db    *sql.DB
	store *sqlfence.Store
	lock  *os.File
}

// Close closes the database, then the locked file. The order matters:
// closing any descriptor of an SQLite file drops the POSIX locks the
// process holds on it, SQLite's own included.
func (s *state) Close() error {
	err := s.db.Close()
	if cerr := s.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// dsn opens path read-write (create: also creating it) with a busy timeout
// and synchronous=FULL: in WAL mode (which the file is put in once it is
// known to be ours; the mode is kept in the file) each commit is fsynced
// before Admit returns.
func dsn(path string, create bool) string {
	mode := "rw"
	if create {
		mode = "rwc"
	}
	u := url.URL{Scheme: "file", OmitHost: true, Path: path}
	q := url.Values{}
	q.Set("mode", mode)
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_txlock", "immediate")
	u.RawQuery = q.Encode()
	return u.String()
}

// createState makes a new state file at path; it refuses one that exists.
func createState(ctx context.Context, path string) (_ *state, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("state file %s already exists: drop -init to use it (removing it forgets every floor and refusal it holds)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("creating state file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(path)
			_ = os.Remove(path + "-wal")
			_ = os.Remove(path + "-shm")
		}
	}()
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &state{db: db, lock: f}
	fail := func(err error) (*state, error) {
		s.Close()
		return nil, fmt.Errorf("creating state file %s: %w", path, err)
	}
	if err := walMode(ctx, db); err != nil {
		return fail(err)
	}
	if s.store, err = sqlfence.Open(ctx, db, sqlfence.Options{Dialect: sqlfence.SQLite}); err != nil {
		return fail(err)
	}
	// The mark goes last: a file that has it has the tables.
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", stateAppID)); err != nil {
		return fail(err)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", stateVersion)); err != nil {
		return fail(err)
	}
	return s, nil
}

// openState opens the state file at path, refusing (with a message that
// says what to do) one that is missing, in use by another fence-proxy, not
// an SQLite database, not fence-proxy's, of another format version, or
// damaged.
func openState(ctx context.Context, path string) (*state, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("state file %s does not exist: create it once with -init (a proxy that started without its floors would admit writes they refuse)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening state file: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	refuse := func(why string) (*state, error) {
		f.Close()
		return nil, fmt.Errorf("state file %s %s; refusing to start", path, why)
	}
	head := make([]byte, len(sqliteMagic))
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && (err == io.EOF || err == nil):
		return refuse("is empty (an -init that did not finish?): remove it and run with -init")
	case err != nil && err != io.ErrUnexpectedEOF:
		return refuse("cannot be read: " + err.Error())
	case string(head[:n]) != sqliteMagic:
		return refuse("is not a fence-proxy state file (not an SQLite database)")
	}
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return refuse("cannot be opened: " + err.Error())
	}
	s := &state{db: db, lock: f}
	bad := func(why string) (*state, error) {
		s.Close()
		return nil, fmt.Errorf("state file %s %s; refusing to start", path, why)
	}
	var appID, version int64
	if err := db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return bad("is damaged: " + err.Error())
	}
	if appID != stateAppID {
		return bad(fmt.Sprintf("is an SQLite database but not a fence-proxy state file (application_id %#x, not %#x)", appID, stateAppID))
	}
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return bad("is damaged: " + err.Error())
	}
	if version != stateVersion {
		return bad(fmt.Sprintf("has format version %d; this fence-proxy reads version %d", version, stateVersion))
	}
	var problems []string
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return bad("is damaged: " + err.Error())
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return bad("is damaged: " + err.Error())
		}
		if p != "ok" {
			problems = append(problems, p)
		}
	}
	if err := rows.Err(); err != nil {
		return bad("is damaged: " + err.Error())
	}
	rows.Close()
	if len(problems) > 0 {
		return bad("is damaged (SQLite's quick_check: " + strings.Join(problems, "; ") + ")")
	}
	for _, table := range []string{"lease_fence_floor", "lease_fence_rejection"} {
		var name string
		err := db.QueryRowContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&name)
		if errors.Is(err, sql.ErrNoRows) {
			return bad("is damaged: its table " + table + " is missing")
		}
		if err != nil {
			return bad("is damaged: " + err.Error())
		}
	}
	if err := walMode(ctx, db); err != nil {
		return bad("cannot be used: " + err.Error())
	}
	if s.store, err = sqlfence.Open(ctx, db, sqlfence.Options{Dialect: sqlfence.SQLite}); err != nil {
		return bad("cannot be used: " + err.Error())
	}
	return s, nil
}

// walMode puts the database in write-ahead-log mode: a commit appends to
// the log (one fsync with synchronous=FULL) instead of rewriting pages.
func walMode(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return fmt.Errorf("setting WAL mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("setting WAL mode: SQLite kept %q", mode)
	}
	return nil
}
