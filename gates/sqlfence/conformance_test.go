//go:build !js

package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/gatetest"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// conformGate adapts a Store to the conformance suite: the suite's values go
// into a table of the same database, inserted by the write inside the
// Store's transaction.
type conformGate struct {
	mu     sync.Mutex // db and s change when Restart reopens the file
	db     *sql.DB
	s      *sqlfence.Store
	d      sqlfence.Dialect
	driver string
	dsn    string
	brk    breakage
	excl   bool
	qIns   string
	qRead  string
}

// gates lists the conformGates open on each database (by DSN), for Restart.
var gates sync.Map // dsn -> *[]*conformGate

func (g *conformGate) handles() (*sql.DB, *sqlfence.Store) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.db, g.s
}

// breakage is a deliberate break of the Store, for the tests that show the
// suite catches it.
type breakage int

const (
	unbroken breakage = iota
	noRaise           // sqlfence.BreakRaise
	noWait            // sqlfence.BreakWait
)

func newConformGate(t testing.TB, dialect sqlfence.Dialect, driver, dsn string, brk breakage, exclusive bool) *conformGate {
	t.Helper()
	g := &conformGate{d: dialect, driver: driver, dsn: dsn, brk: brk, excl: exclusive,
		qIns:  `INSERT INTO gatetest_values (resource, value) VALUES (?, ?)`,
		qRead: `SELECT value FROM gatetest_values WHERE resource = ? ORDER BY id`}
	create := `CREATE TABLE IF NOT EXISTS gatetest_values (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, value TEXT NOT NULL)`
	if dialect == sqlfence.Postgres {
		create = `CREATE TABLE IF NOT EXISTS gatetest_values (id BIGSERIAL PRIMARY KEY, resource TEXT NOT NULL, value TEXT NOT NULL)`
		g.qIns = `INSERT INTO gatetest_values (resource, value) VALUES ($1, $2)`
		g.qRead = `SELECT value FROM gatetest_values WHERE resource = $1 ORDER BY id`
	}
	g.open(t, create)
	v, _ := gates.LoadOrStore(dsn, &[]*conformGate{})
	list := v.(*[]*conformGate)
	*list = append(*list, g)
	return g
}

// open opens the gate's database and its Store (again, after Restart
// closed them: the tables are there already).
func (g *conformGate) open(t testing.TB, create string) {
	t.Helper()
	db := openDB(t, g.driver, g.dsn)
	if create != "" {
		if _, err := db.Exec(create); err != nil && !(g.d == sqlfence.Postgres && isUnique(err)) {
			t.Fatal(err)
		}
	}
	s, err := sqlfence.Open(context.Background(), db, sqlfence.Options{Dialect: g.d, Exclusive: g.excl})
	if err != nil {
		t.Fatal(err)
	}
	switch g.brk {
	case noRaise:
		sqlfence.BreakRaise(s)
	case noWait:
		sqlfence.BreakWait(s)
	}
	g.mu.Lock()
	g.db, g.s = db, s
	g.mu.Unlock()
}

// reopenSQLite is the SQLite store's restart: every handle on the file is
// closed, and opened again (Open finds its tables and its rows in the file).
func reopenSQLite(t testing.TB, dsn string) {
	v, ok := gates.Load(dsn)
	if !ok {
		t.Fatalf("no gate on %s", dsn)
	}
	list := *v.(*[]*conformGate)
	for _, g := range list {
		db, _ := g.handles()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range list {
		g.open(t, "")
	}
}

func isUnique(err error) bool {
	var coded interface{ SQLState() string }
	return errors.As(err, &coded) && coded.SQLState() == "23505"
}

var errHalfWritten = errors.New("the write failed after its INSERT")

func (g *conformGate) Commit(ctx context.Context, tok fence.Token, w gatetest.Write) error {
	_, st := g.handles()
	if w.Nil {
		return st.Commit(ctx, tok, nil)
	}
	return st.Commit(ctx, tok, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, g.qIns, tok.Resource, w.Value); err != nil {
			return err
		}
		if w.Inside != nil {
			w.Inside()
		}
		if w.Fail {
			return errHalfWritten
		}
		return nil
	})
}

func (g *conformGate) Admit(ctx context.Context, tok fence.Token) error {
	_, st := g.handles()
	return st.Admit(ctx, tok)
}

func (g *conformGate) Floor(ctx context.Context, r string) (uint64, error) {
	_, st := g.handles()
	return st.Floor(ctx, r)
}

func (g *conformGate) Rejections(ctx context.Context, r string) ([]fence.Rejection, error) {
	_, st := g.handles()
	return st.Rejections(ctx, r)
}

func (g *conformGate) RejectionsAfter(ctx context.Context, r string, after uint64, limit int) ([]fence.Rejection, error) {
	_, st := g.handles()
	return st.RejectionsAfter(ctx, r, after, limit)
}

func (g *conformGate) Values(ctx context.Context, r string) ([]string, error) {
	db, _ := g.handles()
	rows, err := db.QueryContext(ctx, g.qRead, r)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func conformSQLite(brk breakage) gatetest.Config {
	return gatetest.Config{
		New: func(t testing.TB, _ gatetest.Options) (gatetest.Gate, string) {
			dsn := sqliteDSN(filepath.Join(t.TempDir(), "fence.db"))
			return newConformGate(t, sqlfence.SQLite, "sqlite", dsn, brk, false), dsn
		},
		Attach: func(t testing.TB, dsn string) gatetest.Gate {
			return newConformGate(t, sqlfence.SQLite, "sqlite", dsn, brk, false)
		},
		FailedWrite: gatetest.RollsBack,
		Paged:       true,
		Inside:      true,
		// SQLite runs one writer at a time (not Shared), and its busy
		// handler retries waiting writers in no order.
		Unordered: true,
		Restart:   reopenSQLite,
	}
}

// conformPostgres is the suite's configuration for a Store on PostgreSQL;
// exclusive opens it with Options.Exclusive.
func conformPostgres(brk breakage, exclusive bool) gatetest.Config {
	return gatetest.Config{
		New: func(t testing.TB, _ gatetest.Options) (gatetest.Gate, string) {
			b := newPostgres(t)
			return newConformGate(t, sqlfence.Postgres, "pgx", b.dsn, brk, exclusive), b.dsn
		},
		Attach: func(t testing.TB, dsn string) gatetest.Gate {
			return newConformGate(t, sqlfence.Postgres, "pgx", dsn, brk, exclusive)
		},
		FailedWrite: gatetest.RollsBack,
		Paged:       true,
		Inside:      true,
		Shared:      !exclusive,
		// Exclusive: writers waiting for the floor row's lock may be woken
		// in any order. Shared: a write with the floor's fence that
		// arrives after a raise queues behind it on the advisory lock.
		Unordered: exclusive,
		Restart: func(t testing.TB, _ string) {
			if err := pg.Restart(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// The Store passes the conformance suite on SQLite and on PostgreSQL,
// writers in other processes included. A failed write rolls back, the raise
// of the floor with it (RollsBack). The rejections table keeps every
// refusal (not capped). Restart: SQLite's file is closed by every handle and
// opened again; the PostgreSQL server is stopped as a crash would stop it
// (pg_ctl stop -m immediate) and started again, and the handles made before
// reconnect through database/sql's pool.
//
// On PostgreSQL writes with the floor's fence run in parallel (Shared);
// PostgresExclusive (Options.Exclusive) runs them one at a time, in this
// process (the multi-process rules run on the default Store above).
func TestConformance(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) { gatetest.Run(t, conformSQLite(unbroken)) })
	t.Run("Postgres", func(t *testing.T) { gatetest.Run(t, conformPostgres(unbroken, false)) })
	t.Run("PostgresExclusive", func(t *testing.T) {
		c := conformPostgres(unbroken, true)
		c.Attach, c.Restart = nil, nil
		gatetest.Run(t, c)
	})
}

// The deliberate break: a Store whose raise of the floor does nothing
// fails the suite on both databases.
func TestConformanceBreakCaught(t *testing.T) {
	for name, cfg := range map[string]gatetest.Config{"SQLite": conformSQLite(noRaise), "Postgres": conformPostgres(noRaise, false)} {
		got := gatetest.Failures(t, cfg)
		for _, rule := range []string{"FloorRaisedBeforeWrite", "LowerFenceRefused", "AdmitRaisesWithoutWriting"} {
			if len(got[rule]) == 0 {
				t.Errorf("%s: rule %s did not catch a Store that does not raise its floor (failures: %v)", name, rule, got)
			}
		}
	}
}

// The deliberate break of shared admission: a Store that admits a higher
// fence through the share statement (a raise that does not wait for the
// writes in flight) fails RaiseWaitsForEqualWrites.
func TestConformanceNoWaitCaught(t *testing.T) {
	got := gatetest.Failures(t, conformPostgres(noWait, false))
	if len(got["RaiseWaitsForEqualWrites"]) == 0 {
		t.Errorf("RaiseWaitsForEqualWrites did not catch a raise that does not wait (failures: %v)", got)
	}
}
