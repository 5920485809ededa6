//go:build !js

package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
)

// Tables made by a version whose rejection columns were refused_holder and
// admitted_holder are upgraded at Open: the columns are renamed, the rows
// kept, and the log goes on from them.
func TestOpenUpgradesOldRejectionColumns(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		db := b.open(t)
		for _, q := range []string{
			`CREATE TABLE lease_fence_floor (resource TEXT PRIMARY KEY, fence BIGINT NOT NULL, holder TEXT NOT NULL, rejections BIGINT NOT NULL)`,
			`CREATE TABLE lease_fence_rejection (resource TEXT NOT NULL, seq BIGINT NOT NULL, refused_holder TEXT NOT NULL,
				refused_fence BIGINT NOT NULL, admitted_holder TEXT NOT NULL, admitted_fence BIGINT NOT NULL, PRIMARY KEY (resource, seq))`,
			`INSERT INTO lease_fence_floor VALUES ('ledger', 5, 'b', 1)`,
			`INSERT INTO lease_fence_rejection VALUES ('ledger', 1, 'a', 4, 'b', 5)`,
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		s := open(t, b, db)
		if err := s.Commit(ctx, tok("c", 3), func(context.Context, *sql.Tx) error { return nil }); !errors.As(err, new(*fence.StaleFenceError)) {
			t.Fatalf("stale commit after the upgrade: %v", err)
		}
		want := []fence.Rejection{
			{Seq: 1, Resource: "ledger", RefusedHolderID: "a", RefusedFence: 4, AdmittedHolderID: "b", AdmittedFence: 5},
			{Seq: 2, Resource: "ledger", RefusedHolderID: "c", RefusedFence: 3, AdmittedHolderID: "b", AdmittedFence: 5},
		}
		if got, err := s.Rejections(ctx, "ledger"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("rejections = %+v, %v; want %+v", got, err, want)
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM lease_fence_rejection WHERE refused_holder_id = 'a' AND admitted_holder_id = 'b'`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("renamed columns: n=%d err=%v", n, err)
		}
		// A second Open, on tables already upgraded, changes nothing.
		if got, err := open(t, b, db).Rejections(ctx, "ledger"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("after a second Open: %+v, %v", got, err)
		}
	})
}

// A context ended with a cause gives back the cause, not a bare
// context.Canceled: before the transaction, inside write, and while a
// commit waits for another's lock.
func TestContextCauseReturned(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		db, s := openWithWrites(t, b)
		ctx := context.Background()
		cause := errors.New("the caller gave up")
		nop := func(context.Context, *sql.Tx) error { return nil }

		before, cancel := context.WithCancelCause(ctx)
		cancel(cause)
		if err := s.Commit(before, tok("a", 1), nop); !errors.Is(err, cause) {
			t.Errorf("cancelled before: %v", err)
		}
		if _, err := s.Floor(before, "ledger"); !errors.Is(err, cause) {
			t.Errorf("Floor: %v", err)
		}
		if _, err := s.Rejections(before, "ledger"); !errors.Is(err, cause) {
			t.Errorf("Rejections: %v", err)
		}

		inside, cancel := context.WithCancelCause(ctx)
		err := s.Commit(inside, tok("a", 1), func(ctx context.Context, tx *sql.Tx) error {
			if err := insertWrite(b, tok("a", 1))(ctx, tx); err != nil {
				return err
			}
			cancel(cause)
			return nil
		})
		if !errors.Is(err, cause) {
			t.Errorf("cancelled inside write: %v", err)
		}

		// One commit holds the floor row (SQLite: the write lock); another
		// waits for it and is cancelled while it waits.
		holding, release := make(chan struct{}), make(chan struct{})
		first := make(chan error, 1)
		go func() {
			first <- s.Commit(ctx, tok("a", 2), func(context.Context, *sql.Tx) error {
				close(holding)
				<-release
				return nil
			})
		}()
		<-holding
		waiting, cancel := context.WithCancelCause(ctx)
		second := make(chan error, 1)
		go func() { second <- s.Commit(waiting, tok("a", 2), nop) }()
		cancel(cause)
		if err := <-second; !errors.Is(err, cause) {
			t.Errorf("cancelled while waiting: %v", err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if w := readWrites(t, db, "ledger"); len(w) != 0 {
			t.Fatalf("writes = %v", w)
		}
	})
}
