//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// syncPair starts a primary and a synchronous standby, and returns a
// function that stops the standby's WAL receiver (SIGSTOP) or lets it go
// on (SIGCONT): while stopped, every commit on the primary waits.
func syncPair(t *testing.T) (primary, standby *pgtest.Server, hold func(bool)) {
	t.Helper()
	p := pgtest.StartFor(t, pgtest.Options{})
	sb, err := p.StartStandby()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Stop() })
	pgtest.Exec(t, p.DSN(""), `ALTER SYSTEM SET synchronous_standby_names = '*'`)
	pgtest.Exec(t, p.DSN(""), `SELECT pg_reload_conf()`)
	receiver := 0
	for deadline := time.Now().Add(30 * time.Second); receiver == 0; {
		kids, err := sb.Children()
		if err != nil {
			t.Fatal(err)
		}
		for pid, title := range kids {
			if strings.Contains(title, "walreceiver") {
				receiver = pid
			}
		}
		if receiver == 0 && time.Now().After(deadline) {
			t.Fatalf("no streaming walreceiver: %v", kids)
		}
		time.Sleep(time.Millisecond)
	}
	var sync string
	for deadline := time.Now().Add(30 * time.Second); sync != "streaming/sync"; {
		pgtest.QueryRow(t, p.DSN(""), `SELECT coalesce(string_agg(state || '/' || sync_state, ','), '') FROM pg_stat_replication`, &sync)
		if time.Now().After(deadline) {
			t.Fatalf("the standby is %q, not streaming/sync", sync)
		}
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() { _ = syscall.Kill(receiver, syscall.SIGCONT) })
	return p, sb, func(stop bool) {
		sig := syscall.SIGCONT
		if stop {
			sig = syscall.SIGSTOP
		}
		if err := syscall.Kill(receiver, sig); err != nil {
			t.Fatal(err)
		}
	}
}

// waitSyncRep waits until a backend of the primary waits for the
// synchronous standby, and returns its pid.
func waitSyncRep(t *testing.T, dsn string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		err = conn.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' LIMIT 1`).Scan(&pid)
		conn.Close(context.Background())
		if err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			var act string
			pgtest.QueryRow(t, dsn, `SELECT string_agg(pid || ' ' || coalesce(wait_event_type, '-') || ' ' || coalesce(wait_event, '-') || ' ' || state || ' ' || left(query, 60), E'\n') FROM pg_stat_activity`, &act)
			t.Fatal("no commit waits for the synchronous standby:\n" + act)
		}
		time.Sleep(time.Millisecond)
	}
}

// A grant whose COMMIT waits for the synchronous standby when its call
// runs out of time is not answered as granted (503: may or may not), and
// its retry on another replica waits for the row until the standby has the
// commit, then gets the same grant. A COMMIT whose wait is cancelled on the
// server (pg_cancel_backend), which PostgreSQL answers as committed with a
// warning, is not answered as granted either.
func TestCommitWaitingForTheStandby(t *testing.T) {
	p, sb, hold := syncPair(t)
	dsn := newSchemaOn(t, p)
	ctx := context.Background()
	st, err := pgstore.Create(ctx, dsn, pgstore.Options{TTL: ttl, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	g := &rig{t: t, dsn: dsn}
	// Replica 0's call runs out of time while its COMMIT waits; 2 s is
	// ample for the rest on a loaded machine, and its connection is made
	// by a first grant, so that the time goes to the COMMIT's wait.
	g.r = append(g.r, g.open(pgstore.Options{Timeout: 2 * time.Second}, false), g.open(pgstore.Options{Timeout: 30 * time.Second}, false))
	g.grant(0, acquireMsg("w-1", "warm", "W"))

	hold(true)
	start := time.Now()
	code, out := g.post(0, acquireMsg("a-1", "doc", "A"))
	if code != 503 || errCode(t, code, out) != "unavailable" || !strings.Contains(out["error"].(map[string]any)["message"].(string), "may or may not") {
		t.Fatalf("a grant whose commit waits for the standby: %d %v", code, out)
	}
	t.Logf("answered 503 after %v (timeout 2s)", time.Since(start).Round(time.Millisecond))
	retried := make(chan uint64, 1)
	go func() {
		code, out := g.post(1, acquireMsg("a-1", "doc", "A"))
		if code != 200 || out["ok"] != true {
			t.Errorf("the retry: %d %v", code, out)
			retried <- 0
			return
		}
		retried <- uint64(out["grant"].(map[string]any)["fence"].(float64))
	}()
	waitSyncRep(t, p.DSN("")) // the first commit still waits
	select {
	case f := <-retried:
		t.Fatalf("the retry was answered (fence %d) before the standby had the first commit", f)
	default:
	}
	hold(false)
	f := <-retried
	var onStandby int64
	for deadline := time.Now().Add(30 * time.Second); onStandby != int64(f); {
		conn, err := pgx.Connect(ctx, strings.Replace(dsn, p.DSN(""), sb.DSN(""), 1))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.QueryRow(ctx, `SELECT fence FROM lease_fence_leases WHERE resource = 'doc'`).Scan(&onStandby)
		conn.Close(ctx)
		if time.Now().After(deadline) {
			t.Fatalf("the standby holds fence %d for doc, want %d", onStandby, f)
		}
	}

	// The cancelled wait.
	hold(true)
	answered := make(chan int, 1)
	go func() {
		code, out := g.post(1, acquireMsg("b-1", "other", "B"))
		if code == 503 && !strings.Contains(out["error"].(map[string]any)["message"].(string), "synchronous standbys") {
			t.Errorf("the cancelled wait answered %v", out)
		}
		answered <- code
	}()
	pid := waitSyncRep(t, p.DSN(""))
	pgtest.Exec(t, p.DSN(""), `SELECT pg_cancel_backend($1)`, pid)
	if code := <-answered; code != 503 {
		t.Fatalf("a commit whose wait for the standby was cancelled was answered %d", code)
	}
	hold(false)
	// Its retry gets the grant the primary committed.
	if f2, _ := g.grant(0, acquireMsg("b-1", "other", "B")); f2 <= f {
		t.Fatalf("fence %d", f2)
	}
}
