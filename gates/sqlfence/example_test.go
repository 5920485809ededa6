//go:build !js

package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	"github.com/lease-fence/lease-fence/test/rig/docsession"
)

// The fence checked by the database: agent-b's write (fence 2) commits,
// then agent-a's stale write (fence 1) is refused inside the database and the
// refusal is committed to its rejections table.
func ExampleStore_Commit() {
	ctx := context.Background()
	db, _ := sql.Open("sqlite", "file::memory:")
	db.SetMaxOpenConns(1) // one in-memory database
	defer db.Close()
	_, _ = db.Exec(`CREATE TABLE slot (id INTEGER PRIMARY KEY, owner TEXT)`)
	_, _ = db.Exec(`INSERT INTO slot VALUES (1, 'nobody')`)
	// doc:start
	store, err := sqlfence.Open(ctx, db, sqlfence.Options{Dialect: sqlfence.SQLite})
	if err != nil {
		fmt.Println(err)
		return
	}
	claim := func(tok fence.Token) error {
		return store.Commit(ctx, tok, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE slot SET owner = ? WHERE id = 1`, tok.HolderID)
			return err
		})
	}
	fmt.Println(claim(fence.Token{Resource: "slot-1", HolderID: "agent-b", Fence: 2}))
	err = claim(fence.Token{Resource: "slot-1", HolderID: "agent-a", Fence: 1})
	var stale *fence.StaleFenceError
	fmt.Println(errors.As(err, &stale))
	// doc:end

	var owner string
	_ = db.QueryRow(`SELECT owner FROM slot WHERE id = 1`).Scan(&owner)
	floor, _ := store.Floor(ctx, "slot-1")
	rejections, _ := store.Rejections(ctx, "slot-1")
	fmt.Println(owner, floor)
	fmt.Printf("%+v\n", rejections)
	// Output:
	// <nil>
	// true
	// agent-b 2
	// [{Seq:1 Resource:slot-1 RefusedHolderID:agent-a RefusedFence:1 AdmittedHolderID:agent-b AdmittedFence:2}]
}

// docs/fencing.md shows the example's body as it is here.
func TestDocShowsTheExample(t *testing.T) {
	if names := docsession.GoBlocks(t, "example_test.go", "../../docs/fencing.md"); len(names) != 1 {
		t.Fatalf("example_test.go has %d doc blocks, want 1", len(names))
	}
}
