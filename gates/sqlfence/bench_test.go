//go:build !js

package sqlfence_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

var benchRounds = flag.Int("rounds", 3, "BenchmarkCommits: rounds of every configuration")

// BenchmarkCommits measures commits per second of one small write (an INSERT
// of one row) with 1 and 8 concurrent writers, on SQLite (a file in WAL
// mode, synchronous=FULL) and on PostgreSQL (its own server, fsync on),
// through Store.Commit ("fenced"; on PostgreSQL also with Options.Exclusive,
// "exclusive") and as the same transaction without the Store ("unfenced").
// All fenced writers present the same token for one resource (8 writers of
// one holder), so every commit is admitted: the figure is the price of the
// check, not of refusals. The rounds (-args -rounds N) interleave the
// configurations, so each fenced figure has its unfenced twin measured next
// to it.
func BenchmarkCommits(b *testing.B) {
	srv := durablePG(b)
	dir := b.TempDir()
	dbs := map[string]*backend{}
	modes := map[string][]string{"SQLite": {"fenced", "unfenced"}, "Postgres": {"fenced", "exclusive", "unfenced"}}
	for _, name := range []string{"SQLite", "Postgres"} {
		for _, w := range []int{1, 8} {
			for _, mode := range modes[name] {
				key := fmt.Sprintf("%s/writers=%d/%s", name, w, mode)
				be := &backend{name: name, exclusive: mode == "exclusive"}
				if name == "SQLite" {
					be.dialect, be.driver = sqlfence.SQLite, "sqlite"
					be.dsn = "file:" + filepath.Join(dir, strconv.Itoa(len(dbs))+".db") + "?_pragma=busy_timeout(60000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
				} else {
					be.dialect, be.driver, be.dsn = sqlfence.Postgres, "pgx", srv.DSN(srv.NewDatabase(b))
				}
				be.open = func(t testing.TB) *sql.DB { return openDB(t, be.driver, be.dsn) }
				dbs[key] = be
			}
		}
	}
	for round := range *benchRounds {
		for _, name := range []string{"SQLite", "Postgres"} {
			for _, w := range []int{1, 8} {
				ms := modes[name]
				for i := range ms {
					// The sides take turns at going first.
					mode := ms[(i+round)%len(ms)]
					key := fmt.Sprintf("%s/writers=%d/%s", name, w, mode)
					b.Run(key, func(b *testing.B) {
						benchCommits(b, dbs[key], w, mode != "unfenced")
					})
				}
			}
		}
	}
}

func benchCommits(b *testing.B, be *backend, writers int, fenced bool) {
	db := be.open(b)
	db.SetMaxOpenConns(writers + 2)
	db.SetMaxIdleConns(writers + 2)
	createWrites(b, be, db)
	s := open(b, be, db)
	tk := fence.Token{Resource: "ledger", HolderID: "bench", Fence: 1}
	write := insertWrite(be, tk)
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				var err error
				if fenced {
					err = s.Commit(ctx, tk, write)
				} else {
					err = plainCommit(ctx, db, write)
				}
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
}

// plainCommit is the same write without fencing: one transaction with the
// caller's statement, retried on the same transient conflicts.
func plainCommit(ctx context.Context, db *sql.DB, write func(context.Context, *sql.Tx) error) error {
	var err error
	for range sqlfence.MaxAttempts {
		var tx *sql.Tx
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			continue
		}
		if err = write(ctx, tx); err != nil {
			_ = tx.Rollback()
			continue
		}
		if err = tx.Commit(); err == nil {
			return nil
		}
	}
	return err
}
