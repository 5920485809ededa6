//go:build !js

package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// Two commits to different resources whose statements lock two rows in
// opposite orders deadlock in PostgreSQL; the server aborts one (40P01),
// Commit retries it in a fresh transaction, and both land exactly once.
func TestPostgresDeadlockRetried(t *testing.T) {
	b := newPostgres(t)
	db := b.open(t)
	s := open(t, b, db)
	if _, err := db.Exec(`CREATE TABLE items (id INT PRIMARY KEY, v INT NOT NULL); INSERT INTO items VALUES (1, 0), (2, 0)`); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	locked := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	write := func(first, second, me int) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			runs.Add(1)
			if _, err := tx.ExecContext(ctx, `UPDATE items SET v = v + 1 WHERE id = $1`, first); err != nil {
				return err
			}
			once[me].Do(func() { close(locked[me]) })
			<-locked[1-me] // both hold their first row before either takes its second
			_, err := tx.ExecContext(ctx, `UPDATE items SET v = v + 1 WHERE id = $1`, second)
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for me, order := range [][2]int{{1, 2}, {2, 1}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := fence.Token{Resource: "r" + string(rune('0'+me)), HolderID: "h", Fence: 1}
			errs[me] = s.Commit(context.Background(), tk, write(order[0], order[1], me))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() < 3 {
		t.Fatalf("write ran %d times: no deadlock was retried", runs.Load())
	}
	var v1, v2 int
	if err := db.QueryRow(`SELECT (SELECT v FROM items WHERE id = 1), (SELECT v FROM items WHERE id = 2)`).Scan(&v1, &v2); err != nil {
		t.Fatal(err)
	}
	if v1 != 2 || v2 != 2 {
		t.Fatalf("items = %d, %d; want each updated once by each commit", v1, v2)
	}
	t.Logf("write ran %d times for 2 commits", runs.Load())
}

// While another connection holds SQLite's write lock and the Store's
// connections do not wait (no busy_timeout), Commit retries MaxAttempts
// times and then reports the busy database: nothing written, nothing
// logged. Once the lock is released the same commit lands.
func TestSQLiteBusyReported(t *testing.T) {
	b := newSQLite(t)
	db, s := openWithWrites(t, b)
	ctx := context.Background()
	mustWrite(t, b, s, tok("a", 1))
	noWait := openDB(t, "sqlite", "file:"+b.path)
	impatient := open(t, b, noWait)
	holder, err := b.open(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	ran := false
	err = impatient.Commit(ctx, tok("b", 2), func(context.Context, *sql.Tx) error { ran = true; return nil })
	var dbe *sqlfence.DBError
	if !errors.As(err, &dbe) || ran {
		t.Fatalf("err = %v (%T), ran = %v", err, err, ran)
	}
	t.Logf("with the write lock held elsewhere: %v", err)
	if _, err := holder.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, b, impatient, tok("b", 2))
	if w := readWrites(t, db, "ledger"); len(w) != 2 {
		t.Fatalf("writes = %v", w)
	}
	if r, _ := s.Rejections(ctx, "ledger"); len(r) != 0 {
		t.Fatalf("rejections = %v", r)
	}
}

// The connection of a PostgreSQL commit is killed by the server after the
// write ran and before COMMIT: Commit reports an error (it never claims a
// commit that did not happen), nothing is written, the floor stays, nothing
// is logged, and the Store keeps working on other connections.
func TestPostgresConnectionKilledBeforeCommit(t *testing.T) {
	b := newPostgres(t)
	db, s := openWithWrites(t, b)
	ctx := context.Background()
	mustWrite(t, b, s, tok("a", 1))
	admin := b.open(t)
	err := s.Commit(ctx, tok("b", 2), func(ctx context.Context, tx *sql.Tx) error {
		if err := insertWrite(b, tok("b", 2))(ctx, tx); err != nil {
			return err
		}
		var pid int
		if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		var ok bool
		if err := admin.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
			t.Errorf("terminate: %v %v", ok, err)
		}
		return nil
	})
	if err == nil {
		t.Fatal("Commit reported success on a connection the server had killed")
	}
	t.Logf("commit on a killed connection: %v", err)
	if w := readWrites(t, db, "ledger"); len(w) != 1 {
		t.Fatalf("writes = %v", w)
	}
	if f, _ := s.Floor(ctx, "ledger"); f != 1 {
		t.Fatalf("floor = %d", f)
	}
	if r, _ := s.Rejections(ctx, "ledger"); len(r) != 0 {
		t.Fatalf("rejections = %v", r)
	}
	mustWrite(t, b, s, tok("b", 2))
}

// A connection in the pool that the server ended while it sat idle (as a
// restart of the server ends them all) breaks the next statement sent on
// it. Nothing of that transaction can have happened, so Commit, Admit,
// Floor and Rejections run again on a fresh connection instead of failing.
func TestPostgresBrokenIdleConnectionIsRetried(t *testing.T) {
	b := newPostgres(t)
	db, s := openWithWrites(t, b)
	db.SetMaxOpenConns(1) // every call uses the one connection
	ctx := context.Background()
	admin := b.open(t)
	kill := func() {
		t.Helper()
		var pid int
		if err := db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		var ok bool
		if err := admin.QueryRowContext(ctx, `SELECT pg_terminate_backend($1, 5000)`, pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("terminate: %v %v", ok, err)
		}
	}
	runs := 0
	kill()
	err := s.Commit(ctx, tok("a", 1), func(ctx context.Context, tx *sql.Tx) error {
		runs++
		return insertWrite(b, tok("a", 1))(ctx, tx)
	})
	if err != nil || runs != 1 {
		t.Fatalf("Commit on a pool whose connection was ended: %v (write ran %d times)", err, runs)
	}
	kill()
	if err := s.Admit(ctx, tok("b", 2)); err != nil {
		t.Fatalf("Admit: %v", err)
	}
	kill()
	if f, err := s.Floor(ctx, "ledger"); err != nil || f != 2 {
		t.Fatalf("Floor = %d, %v", f, err)
	}
	if err := s.Commit(ctx, tok("a", 1), insertWrite(b, tok("a", 1))); err == nil {
		t.Fatal("a stale commit was admitted")
	}
	kill()
	if r, err := s.Rejections(ctx, "ledger"); err != nil || len(r) != 1 {
		t.Fatalf("Rejections = %v, %v", r, err)
	}
	if w := readWrites(t, db, "ledger"); len(w) != 1 {
		t.Fatalf("writes = %v", w)
	}
}
