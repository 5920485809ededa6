//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// gate opens the sqlfence tables "lease_fence" in the rig's schema, and a
// table for the resource's writes.
func gate(t *testing.T, g *rig) (*sqlfence.Store, *sql.DB) {
	t.Helper()
	db, err := sql.Open("pgx", g.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := sqlfence.Open(context.Background(), db, sqlfence.Options{Dialect: sqlfence.Postgres, Table: "lease_fence"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS doc_writes (id bigserial PRIMARY KEY, holder text NOT NULL, fence bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s, db
}

func write(tok fence.Token) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO doc_writes (holder, fence) VALUES ($1, $2)`, tok.HolderID, int64(tok.Fence))
		return err
	}
}

func writesBy(t *testing.T, db *sql.DB, holder string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM doc_writes WHERE holder = $1`, holder).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The playground's "A stale write that reaches the gate first", against a
// real PostgreSQL: A holds fence 1 and writes; its lease runs out while it
// stalls; B is granted fence 2 and has not written yet when A's late write
// arrives. With the fence table in the coordinator's database, B's grant
// raised the floor to 2 in its own transaction, so A's write is refused
// and logged with 0 writes by B. Without it (the second run), the floor is
// still 1 and A's stale write is admitted: the limit the spec states.
func TestStaleWriteThatReachesTheGateFirst(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		name := "fence table"
		if !atomic {
			name = "no fence table"
		}
		t.Run(name, func(t *testing.T) {
			opts := pgstore.Options{}
			if atomic {
				opts.FenceTable = "lease_fence"
			}
			g := newRig(t, 2, opts)
			gt, db := gate(t, g)
			ctx := context.Background()
			fa, _ := g.grant(0, acquireMsg("a-1", "doc", "A"))
			a := fence.Token{Resource: "doc", HolderID: "A", Fence: fa}
			if err := gt.Commit(ctx, a, write(a)); err != nil {
				t.Fatal(err)
			}
			g.step(ttlMs + 1) // A stalls past its lease
			fb, _ := g.grant(1, acquireMsg("b-1", "doc", "B"))
			if fb <= fa {
				t.Fatalf("B's fence %d", fb)
			}
			floor, err := gt.Floor(ctx, "doc")
			if err != nil {
				t.Fatal(err)
			}
			err = gt.Commit(ctx, a, write(a)) // A's late write, before B's first
			var stale *fence.StaleFenceError
			if atomic {
				if floor != fb {
					t.Fatalf("the floor after B's grant is %d, want B's fence %d", floor, fb)
				}
				if !errors.As(err, &stale) || stale.AdmittedHolderID != "B" || stale.AdmittedFence != fb {
					t.Fatalf("A's late write: %v, want refused against B's fence", err)
				}
				if n := writesBy(t, db, "B"); n != 0 {
					t.Fatalf("B wrote %d times", n)
				}
				if n := writesBy(t, db, "A"); n != 1 {
					t.Fatalf("A's writes in the table: %d, want its first only", n)
				}
				rej, err := gt.Rejections(ctx, "doc")
				if err != nil || len(rej) != 1 || rej[0].RefusedHolderID != "A" || rej[0].AdmittedHolderID != "B" {
					t.Fatalf("rejections %+v %v", rej, err)
				}
				return
			}
			if floor != fa || err != nil || writesBy(t, db, "A") != 2 {
				t.Fatalf("without the fence table: floor %d, A's late write %v, A's writes %d; want floor %d and the stale write admitted",
					floor, err, writesBy(t, db, "A"), fa)
			}
		})
	}
}

// A gate whose floor is already at or above the fence a grant takes (the
// coordinator's state restored from an older backup, or another
// coordinator raising the floor): the grant is refused, 500 internal,
// with a message naming the table; nothing is granted, the floor is left.
func TestGrantBelowTheFloorIsRefused(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{FenceTable: "lease_fence"})
	gt, _ := gate(t, g)
	ctx := context.Background()
	if err := gt.Admit(ctx, fence.Token{Resource: "doc", HolderID: "elsewhere", Fence: 1000}); err != nil {
		t.Fatal(err)
	}
	st, out := g.post(0, acquireMsg("a-1", "doc", "A"))
	if errCode(t, st, out) != "internal" || st != 500 {
		t.Fatalf("grant below the floor: %d %v", st, out)
	}
	msg := out["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, "lease_fence holds the floor 1000") {
		t.Fatalf("message %q", msg)
	}
	var rows int
	pgtest.QueryRow(t, g.dsn, `SELECT count(*) FROM lease_fence_leases`, &rows)
	if f, _ := gt.Floor(ctx, "doc"); f != 1000 || rows != 0 {
		t.Fatalf("floor %d and %d rows after the refused grant", f, rows)
	}
	// Other resources are granted as usual, and their floors raised.
	f, _ := g.grant(0, acquireMsg("b-1", "other", "B"))
	if fl, _ := gt.Floor(ctx, "other"); fl != f {
		t.Fatalf("floor of other %d, want %d", fl, f)
	}
}
