//go:build !js

package sqlfence_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// threeStatements is how a commit checked and raised the floor before it
// became one upsert with RETURNING (gates/sqlfence at 9c24077): insert the
// floor row if missing, read it locking it, raise it if the fence is above
// it. Kept here only to measure the upsert against (admitted tokens only:
// the benchmark never presents a stale one).
func threeStatements(ctx context.Context, db *sql.DB, d sqlfence.Dialect, tok fence.Token, write func(context.Context, *sql.Tx) error) error {
	ensure := `INSERT INTO lease_fence_floor (resource, fence, holder, rejections) VALUES (?, 0, '', 0) ON CONFLICT (resource) DO NOTHING`
	lock := `SELECT fence, holder, rejections FROM lease_fence_floor WHERE resource = ?`
	raise := `UPDATE lease_fence_floor SET fence = ?, holder = ? WHERE resource = ?`
	if d == sqlfence.Postgres {
		ensure = `INSERT INTO lease_fence_floor (resource, fence, holder, rejections) VALUES ($1, 0, '', 0) ON CONFLICT (resource) DO NOTHING`
		lock = `SELECT fence, holder, rejections, pg_current_xact_id()::text FROM lease_fence_floor WHERE resource = $1 FOR UPDATE`
		raise = `UPDATE lease_fence_floor SET fence = $1, holder = $2 WHERE resource = $3`
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, ensure, tok.Resource); err != nil {
		return err
	}
	var floor, rejections int64
	var holder, xid string
	row := tx.QueryRowContext(ctx, lock, tok.Resource)
	if d == sqlfence.Postgres {
		err = row.Scan(&floor, &holder, &rejections, &xid)
	} else {
		err = row.Scan(&floor, &holder, &rejections)
	}
	if err != nil {
		return err
	}
	if f := int64(tok.Fence); f > floor || holder == "" {
		if _, err := tx.ExecContext(ctx, raise, f, tok.HolderID, tok.Resource); err != nil {
			return err
		}
	}
	if err := write(ctx, tx); err != nil {
		return err
	}
	return tx.Commit()
}

// BenchmarkFloorStatements measures, in one process, Store.Commit (the
// check and the raise as one upsert with RETURNING) against the three
// statements it replaced, around the same one-row INSERT, one writer, one
// resource; the two alternate in chunks of 20 commits so the noise of other
// processes falls on both. On SQLite (WAL; synchronous NORMAL, no fsync per
// commit, and FULL) and PostgreSQL (fsync off, and on with its own server),
// with the fence at the floor (a lease's usual write) and raising it by one
// on every commit. Metrics: each side's time per commit and
// three-statements/upsert (above 1: the upsert is faster).
func BenchmarkFloorStatements(b *testing.B) {
	durable := durablePG(b)
	dir := b.TempDir()
	backends := []struct {
		name string
		mk   func(b *testing.B) *backend
	}{
		{"SQLite-NORMAL", func(b *testing.B) *backend { return sqliteWith(filepath.Join(dir, benchName()+".db"), "NORMAL") }},
		{"SQLite-FULL", func(b *testing.B) *backend { return sqliteWith(filepath.Join(dir, benchName()+".db"), "FULL") }},
		{"Postgres-nofsync", func(b *testing.B) *backend { return newPostgres(b) }},
		{"Postgres-fsync", func(b *testing.B) *backend { return postgresOn(b, durable) }},
	}
	for _, be := range backends {
		for _, raising := range []bool{false, true} {
			name := be.name + map[bool]string{false: "/at-floor", true: "/raising"}[raising]
			b.Run(name, func(b *testing.B) {
				bk := be.mk(b)
				db, s := openWithWrites(b, bk)
				db.SetMaxOpenConns(1)
				ctx := context.Background()
				var f atomic.Uint64
				f.Store(1)
				next := func() fence.Token {
					t := fence.Token{Resource: "ledger", HolderID: "bench", Fence: f.Load()}
					if raising {
						t.Fence = f.Add(1)
					}
					return t
				}
				const chunk = 20
				var upsert, three time.Duration
				run := func(commit func(fence.Token) error) time.Duration {
					start := time.Now()
					for range chunk {
						if err := commit(next()); err != nil {
							b.Fatal(err)
						}
					}
					return time.Since(start)
				}
				storeSide := func(t fence.Token) error { return s.Commit(ctx, t, insertWrite(bk, t)) }
				threeSide := func(t fence.Token) error { return threeStatements(ctx, db, bk.dialect, t, insertWrite(bk, t)) }
				_ = run(storeSide) // the floor row exists, connections are warm
				b.ResetTimer()
				for i := 0; i < b.N; i += chunk {
					if (i/chunk)%2 == 0 {
						upsert += run(storeSide)
						three += run(threeSide)
					} else {
						three += run(threeSide)
						upsert += run(storeSide)
					}
				}
				n := float64((b.N + chunk - 1) / chunk * chunk)
				b.ReportMetric(float64(upsert.Nanoseconds())/n, "ns/upsert")
				b.ReportMetric(float64(three.Nanoseconds())/n, "ns/three-statements")
				b.ReportMetric(float64(three)/float64(upsert), "three/upsert")
			})
		}
	}
}

func sqliteWith(path, synchronous string) *backend {
	bk := &backend{name: "SQLite", dialect: sqlfence.SQLite, driver: "sqlite", path: path,
		dsn: "file:" + path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + synchronous + ")"}
	bk.open = func(t testing.TB) *sql.DB { return openDB(t, bk.driver, bk.dsn) }
	return bk
}

func postgresOn(b *testing.B, srv *pgtest.Server) *backend {
	bk := &backend{name: "Postgres", dialect: sqlfence.Postgres, driver: "pgx", dsn: srv.DSN(srv.NewDatabase(b))}
	bk.open = func(t testing.TB) *sql.DB { return openDB(t, bk.driver, bk.dsn) }
	return bk
}

// durablePG starts a PostgreSQL server of the benchmark's own, fsync on,
// stopped at its end.
func durablePG(b *testing.B) *pgtest.Server { return pgtest.StartFor(b, pgtest.Options{Durable: true}) }

var benchDBSeq atomic.Int32

// benchName names a fresh database file of the benchmark.
func benchName() string { return "fb" + strconv.Itoa(int(benchDBSeq.Add(1))) }
