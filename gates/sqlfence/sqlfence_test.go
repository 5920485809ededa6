//go:build !js

package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/gatetest"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
	"github.com/lease-fence/lease-fence/test/rig/rigproc"
)

// pg is the PostgreSQL server every test in this package shares; each test
// gets its own database on it.
var pg *pgtest.Server

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	if gatetest.Worker() {
		// A writer process of the conformance suite attaches to the
		// parent's database; it needs no server of its own.
		os.Exit(m.Run())
	}
	rigproc.Main(m, &pg, func() (*pgtest.Server, error) { return pgtest.Start(pgtest.Options{}) })
}

// backend is one database the tests run against.
type backend struct {
	name    string
	dialect sqlfence.Dialect
	// open returns a new *sql.DB on the same database each time it is
	// called (several handles, as several processes would have).
	open func(t testing.TB) *sql.DB
	// dsn is what a child process passes to sql.Open(driver, dsn).
	driver, dsn string
	path        string // the SQLite file
	exclusive   bool   // open's Store has Options.Exclusive
}

func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
}

func newSQLite(t testing.TB) *backend {
	path := filepath.Join(t.TempDir(), "fence.db")
	b := &backend{name: "SQLite", dialect: sqlfence.SQLite, driver: "sqlite", dsn: sqliteDSN(path), path: path}
	b.open = func(t testing.TB) *sql.DB { return openDB(t, b.driver, b.dsn) }
	return b
}

func newPostgres(t testing.TB) *backend {
	b := &backend{name: "Postgres", dialect: sqlfence.Postgres, driver: "pgx", dsn: pg.DSN(pg.NewDatabase(t))}
	b.open = func(t testing.TB) *sql.DB { return openDB(t, b.driver, b.dsn) }
	return b
}

func openDB(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// forEach runs f once on a fresh SQLite file and once on a fresh PostgreSQL
// database.
func forEach(t *testing.T, f func(t *testing.T, b *backend)) {
	for _, mk := range []func(testing.TB) *backend{newSQLite, newPostgres} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// createWrites makes the table the tests' writes go to. Its id increases in
// commit order for one resource: the floor row's lock is held from the
// first statement of a Commit's transaction to its end.
func createWrites(t testing.TB, b *backend, db *sql.DB) {
	t.Helper()
	q := `CREATE TABLE IF NOT EXISTS writes (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, holder TEXT NOT NULL, fence BIGINT NOT NULL)`
	if b.dialect == sqlfence.Postgres {
		q = `CREATE TABLE IF NOT EXISTS writes (id BIGSERIAL PRIMARY KEY, resource TEXT NOT NULL, holder TEXT NOT NULL, fence BIGINT NOT NULL)`
	}
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// mustWrite commits tk's row of the writes table through s, and fails the
// test if it does not land.
func mustWrite(t testing.TB, b *backend, s *sqlfence.Store, tk fence.Token) {
	t.Helper()
	if err := s.Commit(context.Background(), tk, insertWrite(b, tk)); err != nil {
		t.Fatal(err)
	}
}

func insertWrite(b *backend, tk fence.Token) func(context.Context, *sql.Tx) error {
	q := `INSERT INTO writes (resource, holder, fence) VALUES (?, ?, ?)`
	if b.dialect == sqlfence.Postgres {
		q = `INSERT INTO writes (resource, holder, fence) VALUES ($1, $2, $3)`
	}
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, tk.Resource, tk.HolderID, int64(tk.Fence))
		return err
	}
}

type written struct {
	holder string
	fence  uint64
}

func readWrites(t testing.TB, db *sql.DB, resource string) []written {
	t.Helper()
	rows, err := db.Query(`SELECT holder, fence FROM writes WHERE resource = '`+resource+`' ORDER BY id`, nil...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []written
	for rows.Next() {
		var w written
		var f int64
		if err := rows.Scan(&w.holder, &f); err != nil {
			t.Fatal(err)
		}
		w.fence = uint64(f)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func open(t testing.TB, b *backend, db *sql.DB) *sqlfence.Store {
	t.Helper()
	s, err := sqlfence.Open(context.Background(), db, sqlfence.Options{Dialect: b.dialect, Exclusive: b.exclusive})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// openWithWrites opens b's database with the writes table and a Store on it.
func openWithWrites(t testing.TB, b *backend) (*sql.DB, *sqlfence.Store) {
	t.Helper()
	db := b.open(t)
	createWrites(t, b, db)
	return db, open(t, b, db)
}

func tok(holder string, f uint64) fence.Token {
	return fence.Token{Resource: "ledger", HolderID: holder, Fence: f}
}

var errWrite = errors.New("constraint failed in the caller's statement")

// The fence rules, inside the database: the newer generation is admitted,
// the older refused with both holders, both fences and a per-resource
// sequence number committed to the rejections table; a failed write rolls
// the raise of the floor back with it.
func TestCommitInTheDatabase(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		db, s := openWithWrites(t, b)
		ctx := context.Background()
		steps := []struct {
			name    string
			tok     fence.Token
			admit   bool
			fail    error
			want    string // "", "stale", "write"
			floor   uint64
			written int
		}{
			{name: "A1", tok: tok("a", 1), floor: 1, written: 1},
			{name: "A1Again", tok: tok("a", 1), floor: 1, written: 2},
			{name: "B2", tok: tok("b", 2), floor: 2, written: 3},
			{name: "A1Stale", tok: tok("a", 1), want: "stale", floor: 2, written: 3},
			{name: "C4WriteFails", tok: tok("c", 4), fail: errWrite, want: "write", floor: 2, written: 3},
			{name: "A1StillStale", tok: tok("a", 1), want: "stale", floor: 2, written: 3},
			{name: "AdmitD5", tok: tok("d", 5), admit: true, floor: 5, written: 3},
			{name: "B2StaleAfterAdmit", tok: tok("b", 2), want: "stale", floor: 5, written: 3},
			{name: "AdmitStaleC4", tok: tok("c", 4), admit: true, want: "stale", floor: 5, written: 3},
			{name: "D5Writes", tok: tok("d", 5), floor: 5, written: 4},
		}
		for _, st := range steps {
			var err error
			ran := false
			if st.admit {
				err = s.Admit(ctx, st.tok)
			} else {
				w := insertWrite(b, st.tok)
				err = s.Commit(ctx, st.tok, func(ctx context.Context, tx *sql.Tx) error {
					ran = true
					if err := w(ctx, tx); err != nil {
						return err
					}
					return st.fail
				})
			}
			var se *fence.StaleFenceError
			switch st.want {
			case "":
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
			case "stale":
				if !errors.As(err, &se) || ran {
					t.Fatalf("%s: err = %v, ran = %v", st.name, err, ran)
				}
			case "write":
				if !errors.Is(err, st.fail) {
					t.Fatalf("%s: err = %v", st.name, err)
				}
			}
			if f, err := s.Floor(ctx, "ledger"); err != nil || f != st.floor {
				t.Fatalf("%s: floor = %d, %v; want %d", st.name, f, err, st.floor)
			}
			if n := len(readWrites(t, db, "ledger")); n != st.written {
				t.Fatalf("%s: %d rows written, want %d", st.name, n, st.written)
			}
		}
		want := []fence.Rejection{
			{Seq: 1, Resource: "ledger", RefusedHolderID: "a", RefusedFence: 1, AdmittedHolderID: "b", AdmittedFence: 2},
			{Seq: 2, Resource: "ledger", RefusedHolderID: "a", RefusedFence: 1, AdmittedHolderID: "b", AdmittedFence: 2},
			{Seq: 3, Resource: "ledger", RefusedHolderID: "b", RefusedFence: 2, AdmittedHolderID: "d", AdmittedFence: 5},
			{Seq: 4, Resource: "ledger", RefusedHolderID: "c", RefusedFence: 4, AdmittedHolderID: "d", AdmittedFence: 5},
		}
		got, err := s.Rejections(ctx, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("rejections\n got %+v\nwant %+v", got, want)
		}
		// The error is the logged row.
		var se *fence.StaleFenceError
		if err := s.Commit(ctx, tok("a", 1), insertWrite(b, tok("a", 1))); !errors.As(err, &se) || se.Seq != 5 || se.AdmittedHolderID != "d" {
			t.Fatalf("err = %v", err)
		}
		// Another resource has its own floor and its own sequence.
		other := fence.Token{Resource: "other", HolderID: "z", Fence: 1}
		if err := s.Commit(ctx, other, insertWrite(b, other)); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Rejections(ctx, "other"); len(r) != 0 {
			t.Fatalf("other resource has rejections %v", r)
		}
		if f, _ := s.Floor(ctx, "nobody-wrote-here"); f != 0 {
			t.Fatalf("floor of an unknown resource = %d", f)
		}
		// A second Store over the same tables sees the same state.
		s2 := open(t, b, b.open(t))
		if f, _ := s2.Floor(ctx, "ledger"); f != 5 {
			t.Fatalf("second store sees floor %d", f)
		}
	})
}

// Bad input is refused before anything touches the database, and a
// cancelled context writes and logs nothing.
func TestBadInputAndCancellation(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		db, s := openWithWrites(t, b)
		ctx := context.Background()
		mustWrite(t, b, s, tok("b", 3))
		isArg := func(err error) bool {
			var ae *fence.ArgumentError
			return errors.As(err, &ae) && strings.HasPrefix(err.Error(), "sqlfence: ") || errors.As(err, &ae) && strings.HasPrefix(err.Error(), "fence: ")
		}
		nop := func(context.Context, *sql.Tx) error { return nil }
		for name, err := range map[string]error{
			"EmptyHolder":   s.Commit(ctx, fence.Token{Resource: "ledger", Fence: 9}, nop),
			"ZeroFence":     s.Commit(ctx, tok("a", 0), nop),
			"AboveMaxFence": s.Commit(ctx, tok("a", fence.MaxFence+1), nop),
			"AdmitAboveMax": s.Admit(ctx, tok("a", 1<<63)),
			"LongHolder":    s.Commit(ctx, tok(strings.Repeat("h", 1025), 9), nop),
			"NilWrite":      s.Commit(ctx, tok("a", 9), nil),
			"NilContext":    s.Commit(nil, tok("a", 9), nop), //lint:ignore SA1012 a nil context on purpose
			"NilStore":      (*sqlfence.Store)(nil).Commit(ctx, tok("a", 9), nop),
		} {
			if !isArg(err) {
				t.Errorf("%s: err = %v, want an argument error", name, err)
			}
		}
		if _, err := s.Floor(ctx, ""); !isArg(err) {
			t.Errorf("Floor(\"\") = %v", err)
		}
		for name, o := range map[string]sqlfence.Options{
			"NoDialect":     {},
			"BadDialect":    {Dialect: 9},
			"InjectedTable": {Dialect: b.dialect, Table: "x; DROP TABLE writes"},
			"LongTable":     {Dialect: b.dialect, Table: strings.Repeat("t", 42)},
		} {
			if _, err := sqlfence.Open(ctx, db, o); !isArg(err) {
				t.Errorf("Open %s: %v", name, err)
			}
		}
		if _, err := sqlfence.Open(ctx, nil, sqlfence.Options{Dialect: b.dialect}); !isArg(err) {
			t.Errorf("Open(nil db): %v", err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		ran := false
		err := s.Commit(cancelled, tok("c", 7), func(context.Context, *sql.Tx) error { ran = true; return nil })
		if !errors.Is(err, context.Canceled) || ran {
			t.Fatalf("cancelled commit: %v ran=%v", err, ran)
		}
		if err := s.Commit(cancelled, tok("a", 1), nop); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled stale commit: %v", err)
		}
		// A context cancelled inside write: the transaction rolls back.
		inner, cancel2 := context.WithCancel(ctx)
		err = s.Commit(inner, tok("c", 7), func(ctx context.Context, tx *sql.Tx) error {
			if err := insertWrite(b, tok("c", 7))(ctx, tx); err != nil {
				return err
			}
			cancel2()
			return nil
		})
		if err == nil {
			t.Fatal("a commit whose context was cancelled before COMMIT reported success")
		}
		if f, _ := s.Floor(ctx, "ledger"); f != 3 {
			t.Fatalf("floor = %d after refused and cancelled commits", f)
		}
		if r, _ := s.Rejections(ctx, "ledger"); len(r) != 0 {
			t.Fatalf("logged %v", r)
		}
		if w := readWrites(t, db, "ledger"); len(w) != 1 {
			t.Fatalf("writes = %v", w)
		}
		// A custom table prefix keeps its own state.
		s3, err := sqlfence.Open(ctx, db, sqlfence.Options{Dialect: b.dialect, Table: "other_fence"})
		if err != nil {
			t.Fatal(err)
		}
		if f, _ := s3.Floor(ctx, "ledger"); f != 0 {
			t.Fatalf("separate tables share a floor: %d", f)
		}
	})
}
