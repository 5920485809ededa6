//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// BenchmarkCycle compares, in this process (no HTTP), an acquire + release
// cycle of the Service over the store with the floor of any lock service in
// PostgreSQL: two transactions that each lock a row and update it, in two
// round trips, committed synchronously; 1 and 8 clients (goroutines, each
// on its own resource, at the GOMAXPROCS the process has: -cpu changes the
// Go runtime's cost, not the clients), on a durable server (fsync on) the
// benchmark starts. goCPU and pgCPU are this process's and the server's
// CPU time per cycle. With PGSTORE_STATEMENTS=1 it also prints, after each
// run, the statements that took the server's time (pg_stat_statements);
// with PGSTORE_STATEMENTS=all, the statements the functions run too.
func BenchmarkCycle(b *testing.B) {
	opts := pgtest.Options{Durable: true}
	statements := os.Getenv("PGSTORE_STATEMENTS") != ""
	if statements {
		opts.Settings = []string{"shared_preload_libraries=pg_stat_statements"}
		if os.Getenv("PGSTORE_STATEMENTS") == "all" {
			// The statements the functions run too, each on its own.
			opts.Settings = append(opts.Settings, "pg_stat_statements.track=all")
		}
	}
	srv, svc := benchService(b, opts)
	ctx := context.Background()
	pool := benchRows(b, srv)
	eachSide(b, srv, func(b *testing.B, side string, clients int) {
		if statements {
			defer printStatements(b, pool)
		}
		eachClient(b, pool, clients, func(i int, res string, conn *pgxpool.Conn, pb *testing.PB) {
			for n := 0; pb.Next(); n++ {
				if side == "bare" {
					for _, h := range []string{"h", ""} {
						if err := benchkit.BareTxn(ctx, conn.Conn(), i, h); err != nil {
							b.Error(err)
							return
						}
					}
					continue
				}
				req := lease.Request{Kind: lease.KindAcquire, RequestID: res + "-" + strconv.Itoa(n), Resource: res, HolderID: "h", SentAt: clock.At("h", 1)}
				secret := "secret-secret-secret"
				r, err := svc.Call(ctx, wire.Message{Op: wire.OpAcquire, Request: req, Secret: secret})
				if err != nil || !r.OK {
					b.Errorf("acquire: %v %+v", err, r)
					return
				}
				rel := lease.Request{RequestID: req.RequestID + "-r", Resource: res, HolderID: "h", Fence: r.Grant.Fence}
				if r, err := svc.Call(ctx, wire.Message{Op: wire.OpRelease, Request: rel, Secret: secret}); err != nil || !r.OK {
					b.Errorf("release: %v %+v", err, r)
					return
				}
			}
		})
	})
}

// BenchmarkRenewal is BenchmarkCycle for renewals: each client holds a
// lease on its own resource and renews it, against bare's one transaction
// (a row locked and updated in two round trips, committed synchronously)
// per renewal.
func BenchmarkRenewal(b *testing.B) {
	srv, svc := benchService(b, pgtest.Options{Durable: true})
	ctx := context.Background()
	pool := benchRows(b, srv)
	eachSide(b, srv, func(b *testing.B, side string, clients int) {
		eachClient(b, pool, clients, func(i int, res string, conn *pgxpool.Conn, pb *testing.PB) {
			secret := "secret-secret-secret"
			req := lease.Request{Kind: lease.KindAcquire, RequestID: res, Resource: res, HolderID: "h", SentAt: clock.At("h", 1)}
			r, err := svc.Call(ctx, wire.Message{Op: wire.OpAcquire, Request: req, Secret: secret})
			if err != nil || !r.OK {
				b.Errorf("acquire: %v %+v", err, r)
				return
			}
			for n := 0; pb.Next(); n++ {
				if side == "bare" {
					if err := benchkit.BareTxn(ctx, conn.Conn(), i, "h"); err != nil {
						b.Error(err)
						return
					}
					continue
				}
				q := lease.Request{Kind: lease.KindRenew, RequestID: res + "-" + strconv.Itoa(n), Resource: res, HolderID: "h", Fence: r.Grant.Fence,
					SentAt: clock.At("h", 1)}
				if r, err := svc.Call(ctx, wire.Message{Op: wire.OpRenew, Request: q, Secret: secret}); err != nil || !r.OK {
					b.Errorf("renew: %v %+v", err, r)
					return
				}
			}
		})
	})
}

// eachSide runs body as the sub-benchmarks of BenchmarkCycle and
// BenchmarkRenewal, the store's side and bare's in turn at 1 and 8
// clients, each reporting its CPU time and srv's per operation.
func eachSide(b *testing.B, srv *pgtest.Server, body func(b *testing.B, side string, clients int)) {
	for _, run := range []struct {
		side    string
		clients int
	}{{"store", 1}, {"bare", 1}, {"store", 8}, {"bare", 8}} {
		b.Run(run.side+"/clients="+strconv.Itoa(run.clients), func(b *testing.B) {
			defer reportCPU(b, srv)()
			body(b, run.side, run.clients)
		})
	}
}

// eachClient runs body in b.RunParallel for clients clients, each with
// its number (from 1), a resource of its own and a connection of pool's.
func eachClient(b *testing.B, pool *pgxpool.Pool, clients int, body func(i int, res string, conn *pgxpool.Conn, pb *testing.PB)) {
	var next atomic.Int64
	b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1))
		conn, err := pool.Acquire(context.Background())
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Release()
		body(i, fmt.Sprintf("bench-%s-%d", b.Name(), i), conn, pb)
	})
}

// benchRows makes the bare side's rows on srv and returns a pool of
// connections to it, closed when the benchmark ends.
func benchRows(b *testing.B, srv *pgtest.Server) *pgxpool.Pool {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, srv.DSN("")+" pool_max_conns=16")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_rows (id int PRIMARY KEY, holder text NOT NULL, fence bigint NOT NULL);
		INSERT INTO bench_rows SELECT g, '', 0 FROM generate_series(0, 255) g`); err != nil {
		b.Fatal(err)
	}
	return pool
}

// reportCPU starts counting this process's and srv's CPU time; the
// function it returns reports them per operation (goCPU, pgCPU).
func reportCPU(b *testing.B, srv *pgtest.Server) func() {
	goCPU0, pgCPU0 := cpuOf(srv)
	return func() {
		goCPU1, pgCPU1 := cpuOf(srv)
		b.ReportMetric(float64(goCPU1-goCPU0)/float64(b.N)/1e3, "goCPU-us/op")
		b.ReportMetric(float64(pgCPU1-pgCPU0)/float64(b.N)/1e3, "pgCPU-us/op")
	}
}

// benchService starts a durable server (fsync on) and a Service over a
// store in it, TTL one minute; they are stopped when the benchmark ends.
func benchService(b *testing.B, opts pgtest.Options) (*pgtest.Server, *service.Service) {
	b.Helper()
	srv := pgtest.StartFor(b, opts)
	st, err := pgstore.Create(context.Background(), srv.DSN(""), pgstore.Options{TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	svc, err := service.New(service.Config{TTL: time.Minute, Store: st})
	if err != nil {
		b.Fatal(err)
	}
	return srv, svc
}

// cpuOf returns the CPU time (ns) of this process and of the server's
// processes.
func cpuOf(srv *pgtest.Server) (int64, int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self := ru.Utime.Nano() + ru.Stime.Nano()
	kids, _ := srv.Children()
	var pg int64
	for pid := range kids {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		pg += (u + st) * 1e7 // clock ticks of 10 ms
	}
	return self, pg
}

// BenchmarkTokenCycle is BenchmarkCycle's store side for calls of a token
// (wire.Caller): without a token; with a token without a maxLeases (its
// records are counted, no lock); with a maxLeases far above what it holds
// (the count read under the token's lock shared: one more round trip);
// and with one below max_connections (the lock exclusive: the token's
// grants one at a time). Each client holds at most one lease, so no call
// is refused. Run with -count to take the sides in turns.
func BenchmarkTokenCycle(b *testing.B) {
	srv, svc := benchService(b, pgtest.Options{Durable: true})
	ctx := context.Background()
	for _, side := range []struct {
		name   string
		caller wire.Caller
	}{
		{"none", wire.Caller{}},
		{"token", wire.Caller{Name: "t"}},
		{"far", wire.Caller{Name: "far", MaxLeases: 1_000_000}},
		{"near", wire.Caller{Name: "near", MaxLeases: 64}},
	} {
		b.Run(side.name, func(b *testing.B) {
			goCPU0, pgCPU0 := cpuOf(srv)
			defer func() {
				goCPU1, pgCPU1 := cpuOf(srv)
				b.ReportMetric(float64(goCPU1-goCPU0)/float64(b.N)/1e3, "goCPU-us/op")
				b.ReportMetric(float64(pgCPU1-pgCPU0)/float64(b.N)/1e3, "pgCPU-us/op")
			}()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				res := fmt.Sprintf("bench-%s-%d", b.Name(), next.Add(1))
				n := 0
				for pb.Next() {
					n++
					req := lease.Request{Kind: lease.KindAcquire, RequestID: res + "-" + strconv.Itoa(n), Resource: res, HolderID: "h", SentAt: clock.At("h", 1)}
					secret := "secret-secret-secret"
					r, err := svc.Call(ctx, wire.Message{Op: wire.OpAcquire, Request: req, Secret: secret, Caller: side.caller})
					if err != nil || !r.OK {
						b.Errorf("acquire: %v %+v", err, r)
						return
					}
					rel := lease.Request{RequestID: req.RequestID + "-r", Resource: res, HolderID: "h", Fence: r.Grant.Fence}
					if r, err := svc.Call(ctx, wire.Message{Op: wire.OpRelease, Request: rel, Secret: secret, Caller: side.caller}); err != nil || !r.OK {
						b.Errorf("release: %v %+v", err, r)
						return
					}
				}
			})
		})
	}
}

// printStatements prints the statements that took the most of the server's
// time since the last call, with their time per call and per cycle (a
// statement's time includes its waits), and starts counting again.
func printStatements(b *testing.B, pool *pgxpool.Pool) {
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		b.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT calls, total_exec_time * 1000 / calls, total_exec_time * 1000 / $1,
		left(regexp_replace(query, '\s+', ' ', 'g'), 100) FROM pg_stat_statements WHERE calls > 0 ORDER BY total_exec_time DESC LIMIT 12`, b.N)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("%s, %d cycles:\n", b.Name(), b.N)
	for rows.Next() {
		var calls int64
		var perCall, perCycle float64
		var q string
		if err := rows.Scan(&calls, &perCall, &perCycle, &q); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("%9d calls %8.1f us/call %8.1f us/cycle  %s\n", calls, perCall, perCycle, q)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		b.Fatal(err)
	}
}
