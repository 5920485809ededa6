//go:build !js

package sim

import (
	"context"
	"database/sql"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	_ "modernc.org/sqlite"
)

// testOpenStore opens gates/sqlfence on a fresh SQLite database in memory
// (one connection, so it stays one database) for the runs that write
// through a store gate. The test imports the adapter; core/sim itself only
// knows the StoreGate interface.
var testOpenStore = func() (StoreGate, error) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE writes (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, fence BIGINT NOT NULL)`); err != nil {
		db.Close()
		return nil, err
	}
	st, err := sqlfence.Open(context.Background(), db, sqlfence.Options{Dialect: sqlfence.SQLite})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &sqlGate{Store: st, db: db}, nil
}

// sqlGate is sqlfence as a StoreGate: a landed write is a row of table
// writes, inserted in the fenced transaction.
type sqlGate struct {
	*sqlfence.Store
	db *sql.DB
}

func (g *sqlGate) Commit(ctx context.Context, tok fence.Token, fail bool) (bool, error) {
	ran := false
	err := g.Store.Commit(ctx, tok, func(ctx context.Context, tx *sql.Tx) error {
		ran = true
		if _, err := tx.ExecContext(ctx, `INSERT INTO writes (resource, fence) VALUES (?, ?)`, tok.Resource, int64(tok.Fence)); err != nil {
			return err
		}
		if fail {
			return errWriteFailed
		}
		return nil
	})
	return ran, err
}

func (g *sqlGate) Writes(ctx context.Context, resource string) ([]uint64, error) {
	rows, err := g.db.QueryContext(ctx, `SELECT fence FROM writes WHERE resource = ? ORDER BY id`, resource)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var f int64
		if err := rows.Scan(&f); err != nil {
			return nil, err
		}
		out = append(out, uint64(f))
	}
	return out, rows.Err()
}

func (g *sqlGate) Close() error { return g.db.Close() }
