//go:build !js

package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/gatetest"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// conformGate adapts a Store to the conformance suite: the suite's values go
// into a table of the same database, inserted by the write inside the
// Store's transaction.
type conformGate struct {
	db    *sql.DB
	s     *sqlfence.Store
	d     sqlfence.Dialect
	qIns  string
	qRead string
}

func newConformGate(t testing.TB, dialect sqlfence.Dialect, driver, dsn string, broken bool) *conformGate {
	t.Helper()
	db := openDB(t, driver, dsn)
	g := &conformGate{db: db, d: dialect,
		qIns:  `INSERT INTO gatetest_values (resource, value) VALUES (?, ?)`,
		qRead: `SELECT value FROM gatetest_values WHERE resource = ? ORDER BY id`}
	create := `CREATE TABLE IF NOT EXISTS gatetest_values (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, value TEXT NOT NULL)`
	if dialect == sqlfence.Postgres {
		create = `CREATE TABLE IF NOT EXISTS gatetest_values (id BIGSERIAL PRIMARY KEY, resource TEXT NOT NULL, value TEXT NOT NULL)`
		g.qIns = `INSERT INTO gatetest_values (resource, value) VALUES ($1, $2)`
		g.qRead = `SELECT value FROM gatetest_values WHERE resource = $1 ORDER BY id`
	}
	if _, err := db.Exec(create); err != nil && !(dialect == sqlfence.Postgres && isUnique(err)) {
		t.Fatal(err)
	}
	s, err := sqlfence.Open(context.Background(), db, sqlfence.Options{Dialect: dialect})
	if err != nil {
		t.Fatal(err)
	}
	if broken {
		sqlfence.BreakRaise(s)
	}
	g.s = s
	return g
}

func isUnique(err error) bool {
	var coded interface{ SQLState() string }
	return errors.As(err, &coded) && coded.SQLState() == "23505"
}

var errHalfWritten = errors.New("the write failed after its INSERT")

func (g *conformGate) Commit(ctx context.Context, tok fence.Token, w gatetest.Write) error {
	if w.Nil {
		return g.s.Commit(ctx, tok, nil)
	}
	return g.s.Commit(ctx, tok, func(ctx context.Context, tx *sql.Tx) error {
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

func (g *conformGate) Admit(ctx context.Context, tok fence.Token) error { return g.s.Admit(ctx, tok) }
func (g *conformGate) Floor(ctx context.Context, r string) (uint64, error) {
	return g.s.Floor(ctx, r)
}
func (g *conformGate) Rejections(ctx context.Context, r string) ([]fence.Rejection, error) {
	return g.s.Rejections(ctx, r)
}

func (g *conformGate) Values(ctx context.Context, r string) ([]string, error) {
	rows, err := g.db.QueryContext(ctx, g.qRead, r)
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

func conformSQLite(broken bool) gatetest.Config {
	return gatetest.Config{
		New: func(t testing.TB, _ gatetest.Options) (gatetest.Gate, string) {
			dsn := sqliteDSN(filepath.Join(t.TempDir(), "fence.db"))
			return newConformGate(t, sqlfence.SQLite, "sqlite", dsn, broken), dsn
		},
		Attach: func(t testing.TB, dsn string) gatetest.Gate {
			return newConformGate(t, sqlfence.SQLite, "sqlite", dsn, broken)
		},
		FailedWrite: gatetest.RollsBack,
		Inside:      true,
	}
}

func conformPostgres(broken bool) gatetest.Config {
	return gatetest.Config{
		New: func(t testing.TB, _ gatetest.Options) (gatetest.Gate, string) {
			b := newPostgres(t)
			return newConformGate(t, sqlfence.Postgres, "pgx", b.dsn, broken), b.dsn
		},
		Attach: func(t testing.TB, dsn string) gatetest.Gate {
			return newConformGate(t, sqlfence.Postgres, "pgx", dsn, broken)
		},
		FailedWrite: gatetest.RollsBack,
		Inside:      true,
	}
}

// The Store passes the conformance suite on SQLite and on PostgreSQL,
// writers in other processes included. A failed write rolls back, the raise
// of the floor with it (RollsBack). The rejections table keeps every
// refusal (not capped).
func TestConformance(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) { gatetest.Run(t, conformSQLite(false)) })
	t.Run("Postgres", func(t *testing.T) { gatetest.Run(t, conformPostgres(false)) })
}

// The deliberate break: a Store whose raise of the floor does nothing
// fails the suite on both databases.
func TestConformanceBreakCaught(t *testing.T) {
	for name, cfg := range map[string]gatetest.Config{"SQLite": conformSQLite(true), "Postgres": conformPostgres(true)} {
		got := gatetest.Failures(t, cfg)
		for _, rule := range []string{"FloorRaisedBeforeWrite", "LowerFenceRefused", "AdmitRaisesWithoutWriting"} {
			if len(got[rule]) == 0 {
				t.Errorf("%s: rule %s did not catch a Store that does not raise its floor (failures: %v)", name, rule, got)
			}
		}
	}
}
