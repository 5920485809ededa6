//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
	"github.com/lease-fence/lease-fence/test/rig/serverproc"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// The tests in this file run coordinator processes over one PostgreSQL
// database (-store) and break things under load (drill_test.go has the
// harness): SIGKILL of coordinators, a crash of PostgreSQL, the loss of
// the primary with a standby promoted, a coordinator cut off from the
// database. `make drill-pg` runs the long forms (build tag drill: pgDrill
// is true, and TestFailoverAsynchronous is built).

// sharedPG is the PostgreSQL server that the tests needing a plain one
// share, each in a database of its own (pgDatabase): started by the first
// of them, stopped after the last (TestMain). Making and starting a server
// costs more CPU than most of those tests. The tests that restart, kill,
// replicate or cut off their server, or count its connections, start
// their own (startPG).
var sharedPG struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// pgDB is a database of its own on the shared server.
type pgDB struct {
	srv  *pgtest.Server
	name string
}

func (d pgDB) URL() string { return d.srv.URL(d.name) }

// pgDatabase makes a database on the shared server.
func pgDatabase(t *testing.T) pgDB {
	t.Helper()
	sharedPG.once.Do(func() { sharedPG.srv, sharedPG.err = pgtest.Start(pgtest.Options{}) })
	if sharedPG.err != nil {
		t.Fatal(sharedPG.err)
	}
	return pgDB{sharedPG.srv, sharedPG.srv.NewDatabase(t)}
}

// stopSharedPG stops the shared server, if a test started it.
func stopSharedPG() error {
	if sharedPG.srv == nil {
		return nil
	}
	return sharedPG.srv.Stop()
}

// TestPostgresFlags: -store's flags are checked before anything starts.
func TestPostgresFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-store", "/var/lib/x"}, "postgres://"},
		{[]string{"-store", "postgres://h/db", "-state", "x"}, "cannot be combined"},
		{[]string{"-store", "postgres://h/db", "-memory"}, "-memory keeps no state"},
		{[]string{"-store", "postgres://h/db", "-min-free-bytes", "5"}, "cannot be combined"},
		{[]string{"-store", "postgres://h/db", "-store-timeout", "0s"}, "-store-timeout must be positive"},
		{[]string{"-fence-table", "lease_fence", "-memory"}, "need -store"},
		{[]string{"-store-timeout", "1s", "-memory"}, "need -store"},
		{[]string{"-store", "postgres://127.0.0.1:1/db?connect_timeout=1", "-fence-table", "bad name"}, "FenceTable"},
	} {
		err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, c.args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	pg := pgDatabase(t)
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-store", pg.URL()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-init") {
		t.Errorf("a database without the state: %v", err)
	}
}

// TestReplicasKill9: three coordinators over one database, eight clients
// spread over them (each client knows all three and starts at its own),
// and each coordinator killed with SIGKILL and started again at seeded
// moments (once each; ten times each with -pg-drill) while the clients
// run. Every call is answered (a client moves to the next coordinator),
// no fence is repeated or lowered, every acknowledged lease is still its
// holder's afterwards, and the history is linearizable.
func TestReplicasKill9(t *testing.T) {
	kills := 1
	if pgDrill {
		kills = 10
	}
	pg := pgDatabase(t)
	d := newDrill(t, pg.URL(), 3)
	d.run(8, 1)
	rng := rand.New(rand.NewPCG(20, 9))
	for round := range 3 * kills {
		d.waitAnswered(int64(20 + rng.IntN(60)))
		d.kill9(round % 3)
	}
	d.waitAnswered(100)
	d.finish(fmt.Sprintf("pg-kill9-x%d", 3*kills), pg.URL(), true)
}

// TestPostgresRestartUnderLoad: PostgreSQL crashes (pg_ctl restart -m
// immediate: no checkpoint, every connection broken) under the load of
// eight clients on three coordinators (once; three times with -pg-drill):
// every call is answered once the database is back, and the same checks
// hold.
func TestPostgresRestartUnderLoad(t *testing.T) {
	restarts := 1
	if pgDrill {
		restarts = 3
	}
	pg := pgtest.StartFor(t, pgtest.Options{Durable: pgDrill})
	d := newDrill(t, pg.URL(""), 3)
	d.run(8, 2)
	for range restarts {
		d.waitAnswered(150)
		if err := pg.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	d.waitAnswered(150)
	d.finish(fmt.Sprintf("pg-restart-x%d", restarts), pg.URL(""), true)
}

// failover runs three coordinators and eight clients over a primary and a
// streaming standby (synchronous or not), named together in a multi-host
// connection string with target_session_attrs=read-write. Under load, the
// replication link stops forwarding (a proxy between standby and primary:
// the standby falls behind, as behind a slow or cut link), 40 more calls
// are answered (with a synchronous standby: until a commit waits for it),
// then the primary is killed (SIGKILL to every process), what the link
// held is dropped and the standby promoted. It reports what the run lost and when the first grant came
// after the primary's death.
type failoverReport struct {
	// leasesLost counts renewals refused and releases not done (with a TTL
	// of an hour, a grant or renewal the promoted standby did not have);
	// releasesLost, leases the promoted standby holds for a holder that
	// was told it released them.
	leasesLost, releasesLost, repeated, lowered int
	// wouldRepeat is how many fences acknowledged before the death were
	// above the standby's counter when it was promoted: the fences a
	// promotion without the timeline's jump could have issued again.
	wouldRepeat   int
	firstGrant    time.Duration // from the primary's death to the first grant answered after it
	ops, acquired int
}

func failover(t *testing.T, synchronous bool, seed uint64) failoverReport {
	primary := pgtest.StartFor(t, pgtest.Options{Durable: true})
	link := primary.ProxyFor(t)
	standby, err := primary.StartStandbyVia(link.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Stop() })
	names := "''"
	if synchronous {
		names = "'*'"
	}
	pgtest.Exec(t, primary.DSN(""), `ALTER SYSTEM SET synchronous_standby_names = `+names)
	pgtest.Exec(t, primary.DSN(""), `SELECT pg_reload_conf()`)
	want := "streaming/async"
	if synchronous {
		want = "streaming/sync"
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var st string
		pgtest.QueryRow(t, primary.DSN(""), `SELECT coalesce(string_agg(state || '/' || sync_state, ','), '') FROM pg_stat_replication`, &st)
		if st == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replication is %q, want %q", st, want)
		}
		time.Sleep(time.Millisecond)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port, standby.Port)
	d := newDrill(t, url, 3, "-store-timeout", "2s")
	d.run(8, seed)
	d.waitAnswered(200)

	link.Partition() // the standby falls behind
	if synchronous {
		// Commits wait for the standby now: kill the primary once one does.
		for deadline := time.Now().Add(30 * time.Second); ; {
			var waiting int
			pgtest.QueryRow(t, primary.DSN(""), `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`, &waiting)
			if waiting > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no commit waits for the paused standby")
			}
			time.Sleep(time.Millisecond)
		}
	} else {
		d.waitAnswered(40)
	}
	var acked uint64
	for _, k := range d.clients {
		for _, g := range k.grants {
			acked = max(acked, g.fence)
		}
	}
	death := time.Now()
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	link.Close() // what the link held is lost with the primary
	var standbyFence int64
	pgtest.QueryRow(t, standby.DSN(""), `SELECT last_value FROM lease_fence_fences`, &standbyFence)
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	d.waitAnswered(200)
	ops := d.finish(fmt.Sprintf("pg-failover-sync-%v", synchronous), standby.DSN(""), synchronous)

	var r failoverReport
	r.ops = len(ops)
	var all []grant
	firstAfter := time.Duration(-1)
	for _, k := range d.clients {
		// A renewal refused or a release not done: the lease (or its last
		// renewal) the holder was answered is not in the promoted standby.
		r.leasesLost += len(k.expired)
		for _, g := range k.grants {
			all = append(all, g)
			// A fence of the new timeline was granted by the promoted standby.
			if g.fence >= pgstore.DefaultTimelineJump && (firstAfter < 0 || g.end.Sub(death) < firstAfter) {
				firstAfter = g.end.Sub(death)
			}
			if !g.end.After(death) && g.fence > uint64(standbyFence) {
				r.wouldRepeat++
			}
		}
	}
	r.acquired = len(all)
	r.repeated, r.lowered = checkFences(all)
	r.firstGrant = firstAfter
	// Leases a holder released that the promoted standby still holds: the
	// database says held, the holder says not.
	conn, err := pgx.Connect(context.Background(), standby.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT resource, holder_id FROM lease_fence_leases WHERE fence <> 0`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var res, holder string
		if err := rows.Scan(&res, &holder); err != nil {
			t.Fatal(err)
		}
		for _, k := range d.clients {
			if k.id == holder && k.held[res] == nil {
				r.releasesLost++
			}
		}
	}
	rows.Close()
	first := "none"
	if r.firstGrant >= 0 {
		first = r.firstGrant.Round(time.Millisecond).String()
	}
	t.Logf("synchronous=%v: first grant %s after the primary's death; acquisitions %d; acknowledged leases lost %d, releases lost %d, fences repeated %d, lowered %d; fences acknowledged above the standby's counter at promotion (%d, highest acknowledged %d): %d",
		synchronous, first, r.acquired, r.leasesLost, r.releasesLost, r.repeated, r.lowered, standbyFence, acked, r.wouldRepeat)
	return r
}

// TestFailoverSynchronous: with synchronous_standby_names set, the loss
// of the primary loses nothing that was answered: 0 fences repeated, 0
// acknowledged leases or releases lost, and the history is linearizable.
func TestFailoverSynchronous(t *testing.T) {
	r := failover(t, true, 3)
	if r.leasesLost+r.releasesLost+r.repeated+r.lowered != 0 {
		t.Fatalf("%+v", r)
	}
}

// TestPartitionedReplica: one coordinator reaches the database through a
// proxy that stops forwarding (the connections stay open, nothing gets
// through), another reaches it directly. The cut-off coordinator answers
// every call 503 within its -store-timeout and never grants from what it
// knew before: the lease it granted is released and granted again through
// the other coordinator meanwhile. Cut in one direction only (requests
// arrive, answers do not), its transaction holds the resource's row on the
// server until idle_in_transaction_session_timeout ends it, and the other
// coordinator then decides. Healed, it answers from the database again.
// While cut off, its /readyz answers 503 with the reason (the other's 200),
// and its log says once that the store refuses changes, with the cause,
// and once, at the first change after the heal, that it takes them again.
func TestPartitionedReplica(t *testing.T) {
	pg := pgtest.StartFor(t, pgtest.Options{})
	px := pg.ProxyFor(t)
	const timeout = time.Second
	// The cut coordinator reaches the database through px, which this
	// process serves: a stall of this process past the 1 s store timeout
	// while the coordinator starts (-init, its first reads) ends it before
	// it listens. It is started again then, up to 5 times.
	var cut *child
	var cutLog *syncio.Buffer
	for try := 1; cut == nil; try++ {
		cutLog = &syncio.Buffer{}
		cmd := childCmd(t, os.Getenv(bareEnv), "", "-store", "postgres://postgres@"+px.Addr()+"/postgres?sslmode=disable", "-init", "-ttl", drillTTL,
			"-store-timeout", timeout.String())
		cmd.Stderr = cutLog
		srv, err := serverproc.Start(cmd, false)
		if err == nil {
			cut = &child{cmd: cmd, url: srv.URL}
			t.Cleanup(cut.kill)
			break
		}
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if try == 5 {
			t.Fatalf("the cut coordinator did not start in 5 tries: %v\n%s", err, cutLog)
		}
		t.Logf("the cut coordinator's start %d failed (%v):\n%s", try, err, cutLog)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the cut coordinator's log:\n%s", cutLog)
		}
	}()
	direct := startKilledChild(t, os.Stderr, "-store", pg.URL(""), "-ttl", drillTTL, "-store-timeout", "5s")
	hc := &http.Client{Timeout: time.Minute}
	call := func(c *child, m wire.Message) (int, wire.Reply, time.Duration) {
		start := time.Now()
		st, r := post(t, hc, c.url, m)
		return st, r, time.Since(start)
	}
	// Before the cut a call can still outlast the 1 s store timeout on a
	// loaded machine (503); the acquisition is replayed with the same
	// request id and secret, which answers its grant if it was made.
	var st int
	var r wire.Reply
	for deadline := time.Now().Add(time.Minute); ; {
		st, r, _ = call(cut, killMsg(wire.OpAcquire, "a1", "r1", "A", 0))
		if st != 503 || time.Now().After(deadline) {
			break
		}
	}
	if st != 200 || !r.OK {
		t.Fatalf("before the cut: %d %+v", st, r)
	}
	f1 := r.Grant.Fence
	if st, body := getReady(t, hc, cut.url); st != 200 {
		t.Fatalf("/readyz before the cut: %d %s", st, body)
	}

	// What the cut coordinator logs from the cut on (before it, a call
	// that outlasted the store timeout on a loaded machine may have logged
	// a refusal and its end).
	const cutMark = "--- the test cuts the coordinator off here\n"
	_, _ = cutLog.Write([]byte(cutMark))
	px.Partition()
	if st, body := getReady(t, hc, cut.url); st != 503 || !strings.Contains(body, `"ready":false`) || !strings.Contains(body, "reason") {
		t.Fatalf("/readyz of the cut coordinator: %d %s", st, body)
	}
	if st, body := getReady(t, hc, direct.url); st != 200 {
		t.Fatalf("/readyz of the other coordinator: %d %s", st, body)
	}
	// The calls the cut coordinator answered 503, and how long each took.
	var mu sync.Mutex
	var tooks []time.Duration
	unavailable := func(m wire.Message) {
		t.Helper()
		st, r, took := call(cut, m)
		if st != 503 {
			t.Fatalf("%s %s through the cut coordinator: %d %+v", m.Op, m.Request.Resource, st, r)
		}
		mu.Lock()
		tooks = append(tooks, took)
		mu.Unlock()
		t.Logf("%s %s: 503 after %v", m.Op, m.Request.Resource, took.Round(time.Millisecond))
	}
	unavailable(killMsg(wire.OpRenew, "a2", "r1", "A", f1))
	unavailable(killMsg(wire.OpAcquire, "b1", "r2", "B", 0))
	if st, r, _ := call(direct, killMsg(wire.OpRelease, "a3", "r1", "A", f1)); st != 200 || !r.OK {
		t.Fatalf("release through the other coordinator: %d %+v", st, r)
	}
	st, r, _ = call(direct, killMsg(wire.OpAcquire, "b2", "r1", "B", 0))
	if st != 200 || !r.OK || r.Grant.Fence <= f1 {
		t.Fatalf("B's acquisition through the other coordinator: %d %+v", st, r)
	}
	fb := r.Grant.Fence
	unavailable(killMsg(wire.OpRenew, "a4", "r1", "A", f1))
	unavailable(killMsg(wire.OpAcquire, "c1", "r1", "C", 0))

	px.Heal()
	answered := func(m wire.Message) wire.Reply {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			st, r, _ := call(cut, m)
			if st == 200 {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the heal, %s %s: %d %+v", m.Op, m.Request.Resource, st, r)
			}
		}
	}
	if r := answered(killMsg(wire.OpRenew, "a5", "r1", "A", f1)); r.OK {
		t.Fatalf("A renewed through the healed coordinator: %+v", r)
	}
	if r := answered(killMsg(wire.OpAcquire, "c2", "r1", "C", 0)); r.HeldBy != "B" {
		t.Fatalf("C's acquisition after the heal: %+v", r)
	}
	if r := answered(killMsg(wire.OpAcquire, "h1", "r-healed", "H", 0)); !r.OK {
		t.Fatalf("an acquisition of a free resource after the heal: %+v", r)
	}
	var sinceCut string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		_, sinceCut, _ = strings.Cut(cutLog.String(), cutMark)
		if _, rest, ok := strings.Cut(sinceCut, "store writable again"); ok && strings.Contains(rest, "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log never said the store took changes again after the cut:\n%s", cutLog)
		}
	}
	if n := strings.Count(sinceCut, "the store refuses changes"); n != 1 || !strings.Contains(sinceCut, "cause=") {
		t.Fatalf("from the cut on, the failure was logged %d times (want once, with its cause):\n%s", n, cutLog)
	}
	if st, body := getReady(t, hc, cut.url); st != 200 {
		t.Fatalf("/readyz after the heal: %d %s", st, body)
	}

	// Requests arrive, answers do not: the cut coordinator's transaction
	// locks r3's row on the server; then nothing more gets through, not
	// even the closing of its connection. (r3 is acquired and released
	// first, so its row exists to be locked.) The request must reach the
	// server on a connection the cut coordinator already has: a new one
	// (its pool replaces one idle for a second after a ping, which would
	// get no answer) never gets past its start-up; then the round is
	// tried again.
	st, r, _ = call(direct, killMsg(wire.OpAcquire, "x1", "r3", "X", 0))
	if st != 200 || !r.OK {
		t.Fatalf("%d %+v", st, r)
	}
	if st, r, _ := call(direct, killMsg(wire.OpRelease, "x2", "r3", "X", r.Grant.Fence)); st != 200 || !r.OK {
		t.Fatalf("%d %+v", st, r)
	}
	var dDone chan struct{}
	for try := 1; ; try++ {
		answered(killMsg(wire.OpAcquire, "probe-"+strconv.Itoa(try), "probe", "P", 0)) // a fresh connection in the pool
		px.PartitionReplies()
		dDone = make(chan struct{})
		go func() {
			defer close(dDone)
			unavailable(killMsg(wire.OpAcquire, "d1", "r3", "D", 0))
		}()
		held := false
		for !held {
			var n int
			pgtest.QueryRow(t, pg.DSN(""), `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
				WHERE l.locktype = 'transactionid' AND a.state = 'idle in transaction' AND a.application_name = 'lease-fence coordinator'`, &n)
			held = n > 0
			select {
			case <-dDone:
			default:
				time.Sleep(time.Millisecond)
				continue
			}
			break
		}
		if held {
			break
		}
		px.Heal()
		if try == 5 {
			t.Fatal("the cut coordinator's transaction never held a lock in 5 tries")
		}
	}
	px.Partition()
	st, r, took := call(direct, killMsg(wire.OpAcquire, "e1", "r3", "E", 0))
	<-dDone
	// -store-timeout bounded every 503, not the default
	// (pgstore.DefaultTimeout, 5 s) nor a hang (which the client's minute
	// ends with an error): the quickest within it and 3 s. Each call's own
	// time is this process's, which can stall through a call or two on a
	// loaded machine; a coordinator that ignored the flag is slow in all
	// five or more, the store's timeout being one for every call.
	if q := slices.Min(tooks); q > timeout+3*time.Second {
		t.Fatalf("every 503 of the cut coordinator came %v or more after its call (%v), beyond its %v store timeout", q, tooks, timeout)
	}
	if st != 200 || !r.OK || r.Grant.Fence <= fb {
		t.Fatalf("E's acquisition while the cut coordinator's transaction held the row: %d %+v", st, r)
	}
	t.Logf("the other coordinator decided after %v (the held transaction ends at idle_in_transaction_session_timeout, %v)", took.Round(time.Millisecond), timeout)
	px.Heal()
	if r := answered(killMsg(wire.OpAcquire, "d1", "r3", "D", 0)); r.HeldBy != "E" {
		t.Fatalf("D's retry after the heal: %+v", r)
	}
}
