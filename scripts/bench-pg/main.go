//go:build linux

// Command bench-pg measures the coordinator over PostgreSQL (make bench-pg,
// docs/service.md "Benchmarks"), against a PostgreSQL server it starts
// with fsync and synchronous commits on (test/rig/pgtest, Durable):
//
//   - cycles: acquire + release cycles per second with 1 and 8 clients, each
//     on its own resource, for
//     bare      two transactions per cycle straight to PostgreSQL with pgx,
//     each locking one row (SELECT ... FOR UPDATE) and updating it, in
//     two round trips (BEGIN + lock, then UPDATE + COMMIT), both
//     committed synchronously: what any PostgreSQL lock service must at
//     least do for a grant and a release;
//     pg-1      one coordinator (-store) driven by client.Client;
//     pg-1-sess the same, the clients' calls on call sessions
//     (client.Config.Sessions);
//     pg-3      three coordinators over the same database, the clients
//     spread over them;
//     pg-prev   one coordinator of another build (-previous: the build
//     before a change), over its own database, in the same run;
//     embedded  one coordinator on Pebble (-state), for comparison.
//     Every target runs for -duration in every round, all in turn, and the
//     figures are min / median / max over -rounds rounds, with each
//     round's ratio to bare, and the CPU per cycle of PostgreSQL's
//     processes and of the target's coordinators (which the machine's
//     load moves less than the time).
//   - failover: three coordinators, 8 clients cycling with all three URLs;
//     one coordinator is killed with SIGKILL (-kills times, restarted in
//     between) and, for each client that met the dead coordinator, the time
//     from the kill to its next answered call is taken: p50 and max.
//   - promotion: a primary and a synchronous streaming standby, three
//     coordinators over both (target_session_attrs=read-write), 8 clients;
//     the primary is killed (SIGKILL to every process) and the standby
//     promoted at once; the time from the kill to the first grant the
//     promoted standby made (-promotions times, a fresh pair each).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/internal/benchkit"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

var (
	coordinator = flag.String("coordinator", "out/bin/coordinator", "the built coordinator")
	previous    = flag.String("previous", "", "cycles: another build of the coordinator (the target pg-prev: one coordinator of it)")
)

func main() {
	parts := flag.String("parts", "cycles,failover,promotion", "what to measure")
	rounds := flag.Int("rounds", 5, "cycles: rounds")
	duration := flag.Duration("duration", 3*time.Second, "cycles: how long each target runs in each round")
	targets := flag.String("targets", "bare,pg-1,pg-3,embedded", "cycles: targets")
	concList := flag.String("conc", "1,8", "cycles: client counts")
	kills := flag.Int("kills", 10, "failover: how many times a coordinator is killed")
	promotions := flag.Int("promotions", 3, "promotion: how many primaries are killed")
	flag.Parse()
	if *previous != "" && !strings.Contains(*targets, "pg-prev") {
		*targets += ",pg-prev"
	}
	fmt.Printf("bench-pg: %s, load %s\n", time.Now().UTC().Format("2006-01-02 15:04"), benchkit.Load())
	for _, p := range strings.Split(*parts, ",") {
		var err error
		switch p {
		case "cycles":
			var concs []int
			if concs, err = benchkit.Ints(*concList, 1, 1<<20); err == nil {
				err = cycles(strings.Split(*targets, ","), concs, *rounds, *duration)
			}
		case "failover":
			err = failover(*kills)
		case "promotion":
			err = promotion(*promotions)
		default:
			err = errors.New("unknown part " + p)
		}
		if err != nil {
			benchkit.Fatal(fmt.Errorf("%s: %w", p, err))
		}
	}
	fmt.Printf("bench-pg: done, load %s\n", benchkit.Load())
}

// ---------------------------------------------------------------- processes

// start runs the coordinator with args and waits for its listening line.
func start(args ...string) (*benchkit.Server, error) { return startBuild(*coordinator, args...) }

// startBuild runs the coordinator binary bin with args.
func startBuild(bin string, args ...string) (*benchkit.Server, error) {
	return benchkit.Start(exec.Command(bin, append([]string{"-quiet"}, args...)...), "", nil, false)
}

func startPG() (*pgtest.Server, error) { return pgtest.Start(pgtest.Options{Durable: true}) }

// startOver starts n coordinators of bin over the PostgreSQL database at
// store (the first with -init), with args added.
func startOver(bin string, n int, store string, args ...string) (procs []*benchkit.Server, urls []string, err error) {
	for i := range n {
		a := append([]string{"-addr", "127.0.0.1:0", "-store", store}, args...)
		if i == 0 {
			a = append(a, "-init")
		}
		p, err := startBuild(bin, a...)
		if err != nil {
			return procs, urls, err
		}
		procs, urls = append(procs, p), append(urls, p.URL)
	}
	return procs, urls, nil
}

// newClient is a client.Client for holder over urls.
func newClient(holder string, urls []string, attempts int, hc *http.Client) (*client.Client, error) {
	return benchkit.NewClient(holder, 0, client.Config{BaseURLs: urls, Attempts: attempts, AttemptTimeout: 10 * time.Second, HTTPClient: hc})
}

func rotate(urls []string, i int) []string {
	return append(append([]string{}, urls[i%len(urls):]...), urls[:i%len(urls)]...)
}

// ---------------------------------------------------------------- cycles

// A target runs n clients for d and returns cycles per second.
type target interface {
	run(n int, d time.Duration) (float64, error)
	close()
}

var runSeq atomic.Int64

// coordinators drives client.Clients over the coordinators at urls.
type coordinators struct {
	procs    []*benchkit.Server
	urls     []string
	sessions bool // the clients' calls on call sessions (client.Config.Sessions)
}

func (c *coordinators) close() {
	for _, p := range c.procs {
		p.Stop()
	}
}

func (c *coordinators) run(n int, d time.Duration) (float64, error) {
	id := runSeq.Add(1)
	cs := make([]*client.Client, n)
	for i := range cs {
		var err error
		if cs[i], err = benchkit.NewClient(fmt.Sprintf("bench-%d", i), 0, client.Config{BaseURLs: rotate(c.urls, i), Attempts: 4,
			AttemptTimeout: 10 * time.Second, Sessions: c.sessions}); err != nil {
			return 0, err
		}
		defer cs[i].CloseIdleConnections()
	}
	done, el, err := benchkit.Loop(n, math.MaxInt, d, func(ctx context.Context, i int) error {
		l, err := cs[i].Acquire(ctx, fmt.Sprintf("r-%d-%d", id, i))
		if err == nil {
			err = cs[i].Release(ctx, l)
		}
		return err
	})
	return float64(done) / el.Seconds(), err
}

// bare is the floor: the same row lock and update straight in PostgreSQL.
type bare struct{ pool *pgxpool.Pool }

func (b *bare) close() { b.pool.Close() }

func (b *bare) run(n int, d time.Duration) (float64, error) {
	conns := make([]*pgxpool.Conn, n)
	for i := range conns {
		var err error
		if conns[i], err = b.pool.Acquire(context.Background()); err != nil {
			return 0, err
		}
		defer conns[i].Release()
	}
	done, el, err := benchkit.Loop(n, math.MaxInt, d, func(_ context.Context, i int) error {
		// A grant, then a release: each a transaction that locks the row,
		// reads it, updates it and commits synchronously.
		for _, holder := range []string{"h", ""} {
			if err := benchkit.BareTxn(context.Background(), conns[i].Conn(), i, holder); err != nil {
				return err
			}
		}
		return nil
	})
	return float64(done) / el.Seconds(), err
}

func cycles(names []string, concs []int, rounds int, d time.Duration) error {
	pg, err := startPG()
	if err != nil {
		return err
	}
	defer pg.Stop()
	dir, err := os.MkdirTemp("", "bench-pg-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	targets := map[string]target{}
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()
	url := pg.URL("")
	for _, name := range names {
		switch name {
		case "bare":
			pool, err := pgxpool.New(context.Background(), url+"&pool_max_conns=16")
			if err != nil {
				return err
			}
			if _, err := pool.Exec(context.Background(), `CREATE TABLE bench_rows (id int PRIMARY KEY, holder text NOT NULL, fence bigint NOT NULL);
				INSERT INTO bench_rows SELECT g, '', 0 FROM generate_series(0, 63) g`); err != nil {
				return err
			}
			targets[name] = &bare{pool: pool}
		case "pg-1", "pg-3", "pg-prev", "pg-1-sess":
			db := strings.ReplaceAll(name, "-", "_")
			if err := pgExec(url, "CREATE DATABASE "+db); err != nil {
				return err
			}
			bin, n := *coordinator, 1
			if name == "pg-3" {
				n = 3
			}
			if name == "pg-prev" {
				if *previous == "" {
					return errors.New("pg-prev: no -previous build")
				}
				bin = *previous
			}
			c := &coordinators{sessions: name == "pg-1-sess"}
			targets[name] = c
			if c.procs, c.urls, err = startOver(bin, n, strings.Replace(url, "/postgres?", "/"+db+"?", 1)); err != nil {
				return err
			}
		case "embedded":
			p, err := start("-addr", "127.0.0.1:0", "-init", "-state", filepath.Join(dir, "state"))
			if err != nil {
				return err
			}
			targets[name] = &coordinators{procs: []*benchkit.Server{p}, urls: []string{p.URL}}
		default:
			return errors.New("unknown target " + name)
		}
		if _, err := targets[name].run(1, 300*time.Millisecond); err != nil { // warm up
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	type key struct {
		name string
		n    int
	}
	figures := map[key][]float64{}
	ratios := map[key][]float64{}
	// CPU per cycle: PostgreSQL's processes (what load moves less than
	// time), the clients' (this process's: pgx for bare, client.Client for
	// a coordinator target) and, for a coordinator target, its processes.
	pgCPU, clientCPU, coordCPU := map[key][]float64{}, map[key][]float64{}, map[key][]float64{}
	fmt.Printf("== cycles/s (acquire + release), %d rounds of %v per target, all in turn ==\n", rounds, d)
	for r := range rounds {
		for _, n := range concs {
			got := map[string]float64{}
			// Each round starts with another target, so no target always
			// follows the same one.
			order := slices.Clone(names)
			k := r % len(order)
			order = append(order[k:], order[:k]...)
			for _, name := range order {
				pg0, c0, self0 := benchkit.PGCPU(pg), targetCPU(targets[name]), selfCPU()
				t0 := time.Now()
				v, err := targets[name].run(n, d)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				done := v * time.Since(t0).Seconds()
				got[name] = v
				figures[key{name, n}] = append(figures[key{name, n}], v)
				pgCPU[key{name, n}] = append(pgCPU[key{name, n}], float64((benchkit.PGCPU(pg)-pg0).Microseconds())/done)
				clientCPU[key{name, n}] = append(clientCPU[key{name, n}], float64((selfCPU()-self0).Microseconds())/done)
				if c, ok := targets[name].(*coordinators); ok {
					coordCPU[key{name, n}] = append(coordCPU[key{name, n}], float64((targetCPU(c)-c0).Microseconds())/done)
				}
			}
			line := fmt.Sprintf("round %d clients=%d:", r+1, n)
			for _, name := range names {
				line += fmt.Sprintf("  %s %.0f", name, got[name])
				if b, ok := got["bare"]; ok && name != "bare" {
					ratios[key{name, n}] = append(ratios[key{name, n}], b/got[name])
				}
			}
			fmt.Println(line)
		}
	}
	fmt.Println("target      clients  cycles/s min / median / max      cost vs bare (bare cycles/s ÷ target's) min / median / max")
	for _, n := range concs {
		for _, name := range names {
			f := figures[key{name, n}]
			line := fmt.Sprintf("%-10s  %7d  %s", name, n, benchkit.MMM(f, "%8.0f"))
			if rs := ratios[key{name, n}]; len(rs) > 0 {
				line += fmt.Sprintf("      %s", benchkit.MMM(rs, "%5.2fx"))
			}
			fmt.Println(line)
		}
	}
	fmt.Println("CPU µs per cycle (clock ticks of 10 ms over each run): PostgreSQL's processes, the clients (this process), the coordinators' processes; min / median / max")
	for _, n := range concs {
		for _, name := range names {
			line := fmt.Sprintf("%-10s  %7d  postgres %s   clients %s", name, n, benchkit.MMM(pgCPU[key{name, n}], "%6.0f"),
				benchkit.MMM(clientCPU[key{name, n}], "%6.0f"))
			if c := coordCPU[key{name, n}]; len(c) > 0 {
				line += fmt.Sprintf("   coordinators %s", benchkit.MMM(c, "%6.0f"))
			}
			fmt.Println(line)
		}
	}
	return nil
}

// targetCPU is the CPU time of a coordinator target's processes (0 for
// another target).
func targetCPU(t target) time.Duration {
	c, ok := t.(*coordinators)
	if !ok {
		return 0
	}
	var total time.Duration
	for _, p := range c.procs {
		if cpu, err := benchkit.PidCPU(p.Pid()); err == nil {
			total += cpu
		}
	}
	return total
}

// selfCPU is this process's CPU time: the clients of every target run in it.
func selfCPU() time.Duration {
	cpu, _ := benchkit.PidCPU(os.Getpid())
	return cpu
}

// pgExec runs the statements qs in turn on one connection to url.
func pgExec(url string, qs ...string) error {
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, q := range qs {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			return err
		}
	}
	return nil
}

// ---------------------------------------------------------------- failover

// recording is a transport that notes, per client, the first attempt that
// failed after a kill and the first answer after that.
type recording struct {
	next    http.RoundTripper
	mu      sync.Mutex
	since   time.Time // the last kill
	failed  bool      // an attempt failed since the kill
	backAt  time.Time // the first answer after a failed attempt
	waiting bool
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting {
		if err != nil || resp.StatusCode >= 500 {
			r.failed = true
		} else if r.failed && r.backAt.IsZero() {
			r.backAt = now
		}
	}
	return resp, err
}

func (r *recording) arm(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.since, r.failed, r.backAt, r.waiting = at, false, time.Time{}, true
}

// result returns the time from the kill to the first answer after a failed
// attempt, and whether the client met a failure at all.
func (r *recording) result() (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = false
	if !r.failed || r.backAt.IsZero() {
		return 0, r.failed
	}
	return r.backAt.Sub(r.since), true
}

func failover(kills int) error {
	pg, err := startPG()
	if err != nil {
		return err
	}
	defer pg.Stop()
	procs, addrs, err := startOver(*coordinator, 3, pg.URL(""))
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	if err != nil {
		return err
	}
	const clients = 8
	var recs []*recording
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var calls atomic.Int64
	errs := make(chan error, clients)
	for i := range clients {
		rec := &recording{next: http.DefaultTransport.(*http.Transport).Clone()}
		recs = append(recs, rec)
		wc, err := newClient(fmt.Sprint("f", i), rotate(addrs, i), 20, &http.Client{Transport: rec})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := fmt.Sprint("f-res-", i)
			for ctx.Err() == nil {
				l, err := wc.Acquire(ctx, res)
				if err == nil {
					calls.Add(1)
					err = wc.Release(ctx, l)
				}
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				calls.Add(1)
			}
		}()
	}
	waitCalls := func(n int64) {
		target := calls.Load() + n
		for calls.Load() < target {
			time.Sleep(time.Millisecond)
		}
	}
	var times []float64
	affected := 0
	for k := range kills {
		waitCalls(200)
		victim := k % 3
		at := time.Now()
		for _, r := range recs {
			r.arm(at)
		}
		procs[victim].Kill()
		waitCalls(400)
		for _, r := range recs {
			if d, met := r.result(); met {
				affected++
				if d > 0 {
					times = append(times, float64(d)/float64(time.Millisecond))
				}
			}
		}
		// The killed coordinator comes back on its address, so the clients
		// find it again; the next kill is of another one.
		host := strings.TrimPrefix(addrs[victim], "http://")
		p, err := start("-addr", host, "-store", pg.URL(""))
		if err != nil {
			return err
		}
		procs[victim] = p
	}
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	fmt.Printf("== failover: %d kills of one of three coordinators, 8 clients cycling ==\n", kills)
	if len(times) == 0 {
		return errors.New("no client met a killed coordinator")
	}
	lo, med, hi := benchkit.Spread(times)
	fmt.Printf("time from the kill to a client's next answer, for the %d client-kills that met the dead coordinator: p50 %.1f ms, max %.1f ms (min %.1f)\n",
		len(times), med, hi, lo)
	return nil
}

// ---------------------------------------------------------------- promotion

func promotion(n int) error {
	var took, promoting []float64
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for range n {
		total, promoted, err := promoteOnce()
		if err != nil {
			return err
		}
		took, promoting = append(took, ms(total)), append(promoting, ms(promoted))
	}
	fmt.Printf("== promotion: %d primaries killed, synchronous standby promoted at once (pg_ctl promote), 3 coordinators, 8 clients ==\n", n)
	for _, f := range []struct {
		what string
		v    []float64
	}{{"the primary's death to the first grant of the promoted standby", took},
		{"the primary's death to pg_ctl promote's return", promoting}} {
		lo, med, hi := benchkit.Spread(f.v)
		fmt.Printf("%-63s p50 %6.0f ms, max %6.0f ms (min %.0f; each %v)\n", f.what, med, hi, lo, f.v)
	}
	return nil
}

// promoteOnce returns the time from the primary's death to the first grant
// of the promoted standby, and to pg_ctl promote's return.
func promoteOnce() (time.Duration, time.Duration, error) {
	primary, err := startPG()
	if err != nil {
		return 0, 0, err
	}
	defer primary.Stop()
	standby, err := primary.StartStandby()
	if err != nil {
		return 0, 0, err
	}
	defer standby.Stop()
	// The standby notices a promotion while it waits for WAL only at its
	// next retry: wal_retrieve_retry_interval, 5 s by default, which
	// measured up to 5.6 s of promotion here; 200 ms is what an operator
	// who wants fast failovers sets (docs/service.md).
	if err := pgExec(standby.URL(""), `ALTER SYSTEM SET wal_retrieve_retry_interval = '200ms'`, `SELECT pg_reload_conf()`); err != nil {
		return 0, 0, err
	}
	if err := pgExec(primary.URL(""), `ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`); err != nil {
		return 0, 0, err
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port, standby.Port)
	procs, urls, err := startOver(*coordinator, 3, url, "-store-timeout", "2s")
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first atomic.Int64 // unix nanos of the first grant of the new timeline
	var calls atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wc, err := newClient(fmt.Sprint("p", i), rotate(urls, i), 100, nil)
		if err != nil {
			return 0, 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := fmt.Sprint("p-res-", i)
			for ctx.Err() == nil {
				l, err := wc.Acquire(ctx, res)
				if err != nil {
					continue
				}
				calls.Add(1)
				if l.Token().Fence >= pgstore.DefaultTimelineJump {
					first.CompareAndSwap(0, time.Now().UnixNano())
				}
				_ = wc.Release(ctx, l)
			}
		}()
	}
	for calls.Load() < 100 {
		time.Sleep(time.Millisecond)
	}
	death := time.Now()
	if err := primary.Kill(); err != nil {
		return 0, 0, err
	}
	if err := standby.Promote(); err != nil {
		return 0, 0, err
	}
	promoted := time.Since(death)
	for first.Load() == 0 {
		if time.Since(death) > time.Minute {
			return 0, 0, errors.New("no grant a minute after the promotion")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	return time.Unix(0, first.Load()).Sub(death), promoted, nil
}
