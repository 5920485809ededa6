//go:build !js

package pgtest_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

func count(t *testing.T, dsn string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// StartFor starts a server with the options given, and stops it (its
// directory removed) when the test ends.
func TestStartFor(t *testing.T) {
	var s *pgtest.Server
	t.Run("run", func(t *testing.T) {
		s = pgtest.StartFor(t, pgtest.Options{Settings: []string{"work_mem=5MB"}})
		var mem string
		pgtest.QueryRow(t, s.DSN(""), `SHOW work_mem`, &mem)
		if mem != "5MB" {
			t.Errorf("work_mem %s, want 5MB", mem)
		}
	})
	if _, err := os.Stat(s.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after the test, its server's directory: %v", err)
	}
}

// A synchronous standby has every commit that returned on the primary;
// once the primary is killed (SIGKILL to every process) and the standby
// promoted, the standby takes writes.
func TestStandbyKillPromote(t *testing.T) {
	p := pgtest.StartFor(t, pgtest.Options{})
	pgtest.Exec(t, p.DSN(""), `CREATE TABLE t (id int)`)
	sb, err := p.StartStandby()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop()
	pgtest.Exec(t, p.DSN(""), `ALTER SYSTEM SET synchronous_standby_names = '*'`)
	pgtest.Exec(t, p.DSN(""), `SELECT pg_reload_conf()`)
	// The standby starts its walreceiver once its startup process asks
	// for WAL, which can be a moment after it answers queries.
	for deadline := time.Now().Add(30 * time.Second); ; {
		kids, err := sb.Children()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, title := range kids {
			found = found || strings.Contains(title, "walreceiver")
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no walreceiver among the standby's processes: %v", kids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	pgtest.Exec(t, p.DSN(""), `INSERT INTO t SELECT generate_series(1, 100)`)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(context.Background(), p.DSN("")); err == nil {
		t.Fatal("the killed primary still answers")
	}
	if err := sb.Promote(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, sb.DSN("")); n != 100 {
		t.Fatalf("the promoted standby holds %d rows, want 100", n)
	}
	pgtest.Exec(t, sb.DSN(""), `INSERT INTO t VALUES (101)`)
}

// A standby streaming through a Proxy: while the proxy holds the link, the
// standby gets nothing (a synchronous primary's commits wait), and once it
// heals the standby catches up.
func TestStandbyThroughAProxy(t *testing.T) {
	p := pgtest.StartFor(t, pgtest.Options{})
	px := p.ProxyFor(t)
	pgtest.Exec(t, p.DSN(""), `CREATE TABLE t (id int)`)
	sb, err := p.StartStandbyVia(px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop()
	waitRows := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); count(t, sb.DSN("")) != n; {
			if time.Now().After(deadline) {
				t.Fatalf("the standby holds %d rows, want %d", count(t, sb.DSN("")), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	pgtest.Exec(t, p.DSN(""), `INSERT INTO t VALUES (1)`)
	waitRows(1)
	px.Partition()
	pgtest.Exec(t, p.DSN(""), `INSERT INTO t VALUES (2)`)
	if n := count(t, sb.DSN("")); n != 1 {
		t.Fatalf("the standby got %d rows through a partition", n)
	}
	px.Heal()
	waitRows(2)
}
