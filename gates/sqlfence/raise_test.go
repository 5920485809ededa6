//go:build !js

package sqlfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// PostgresRaise in a transaction of the caller's: while that transaction
// is open, a Commit of the old holder waits on the floor row; once it
// commits, the old holder's write is refused and logged against the new
// fence, though the new holder never wrote. A raise at or below the floor
// returns no row and changes nothing; a rolled-back raise leaves the floor.
func TestPostgresRaiseInTheCallersTransaction(t *testing.T) {
	b := newPostgres(t)
	db, s := openWithWrites(t, b)
	ctx := context.Background()
	a1 := fence.Token{Resource: "doc", HolderID: "A", Fence: 1}
	if err := s.Commit(ctx, a1, insertWrite(b, a1)); err != nil {
		t.Fatal(err)
	}
	raise, err := sqlfence.PostgresRaise("")
	if err != nil {
		t.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := tx.QueryRowContext(ctx, raise, "doc", int64(2), "B").Scan(&got); err != nil || got != 2 {
		t.Fatalf("raise to 2: %d, %v", got, err)
	}
	late := make(chan error, 1)
	go func() { late <- s.Commit(ctx, a1, insertWrite(b, a1)) }()
	// A's commit must be waiting for the floor row's lock before the raise
	// commits: wait until PostgreSQL shows a backend waiting on a lock.
	for deadline := time.Now().Add(20 * time.Second); ; {
		var waiting int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-late:
			t.Fatalf("A's late commit did not wait for the raise's transaction: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("A's late commit never waited on the floor row")
		}
		time.Sleep(time.Millisecond)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var stale *fence.StaleFenceError
	if err := <-late; !errors.As(err, &stale) || stale.AdmittedHolderID != "B" || stale.AdmittedFence != 2 || stale.RefusedFence != 1 {
		t.Fatalf("A's late write: %v, want refused against B's fence 2", err)
	}
	var writes int
	if err := db.QueryRow(`SELECT count(*) FROM writes WHERE resource = 'doc'`).Scan(&writes); err != nil || writes != 1 {
		t.Fatalf("%d writes (%v), want A's first only", writes, err)
	}
	rej, err := s.Rejections(ctx, "doc")
	if err != nil || len(rej) != 1 || rej[0].AdmittedHolderID != "B" {
		t.Fatalf("rejections %+v, %v", rej, err)
	}

	for _, f := range []int64{2, 1} {
		rows, err := db.Query(raise, "doc", f, "C")
		if err != nil {
			t.Fatal(err)
		}
		if rows.Next() {
			t.Fatalf("a raise to %d at floor 2 returned a row", f)
		}
		rows.Close()
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, raise, "doc", int64(9), "D").Scan(&got); err != nil || got != 9 {
		t.Fatalf("raise to 9: %d, %v", got, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Floor(ctx, "doc"); err != nil || f != 2 {
		t.Fatalf("floor %d (%v) after a rolled-back raise, want 2", f, err)
	}
	// A resource the gate never saw: the raise creates its floor row.
	if err := db.QueryRow(raise, "new", int64(5), "E").Scan(&got); err != nil || got != 5 {
		t.Fatalf("raise of a new resource: %d, %v", got, err)
	}
	if f, err := s.Floor(ctx, "new"); err != nil || f != 5 {
		t.Fatalf("floor of the new resource %d, %v", f, err)
	}
	e4 := fence.Token{Resource: "new", HolderID: "E", Fence: 5}
	if err := s.Commit(ctx, e4, insertWrite(b, e4)); err != nil {
		t.Fatalf("the raised holder's own write: %v", err)
	}

	var ae *fence.ArgumentError
	if _, err := sqlfence.PostgresRaise("bad name"); !errors.As(err, &ae) {
		t.Fatalf("bad table name: %v", err)
	}
}
