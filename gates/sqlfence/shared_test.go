//go:build !js

package sqlfence_test

import (
	"context"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// The share statement admits only the floor's own fence, and takes the
// resource's advisory lock in share mode when it does; the raise's lock
// statement then sees that lock as the transaction's own and does not ask
// for it again (two such transactions would deadlock), while a transaction
// that holds nothing takes it.
func TestShareAndRaiseLock(t *testing.T) {
	db, s := openWithWrites(t, newPostgres(t))
	ctx := context.Background()
	if err := s.Admit(ctx, fence.Token{Resource: "r", HolderID: "a", Fence: 5}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, c := range []struct {
		fence int64
		want  bool
	}{{4, false}, {6, false}, {5, true}} {
		got, err := sqlfence.Share(ctx, s, tx, "r", c.fence)
		if err != nil || got != c.want {
			t.Fatalf("share statement with fence %d at floor 5 = %v, %v; want %v", c.fence, got, err, c.want)
		}
	}
	if took, err := sqlfence.RaiseLockTakes(ctx, s, tx, "r"); err != nil || took {
		t.Fatalf("raise lock in a transaction holding the share lock: took %v, %v; want it skipped", took, err)
	}
	other, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if took, err := sqlfence.RaiseLockTakes(ctx, s, other, "another"); err != nil || !took {
		t.Fatalf("raise lock in a transaction holding nothing: took %v, %v; want it taken", took, err)
	}
}
