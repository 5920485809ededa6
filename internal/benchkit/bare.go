//go:build !js

package benchkit

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// BareTxn is one decision of the floor of a PostgreSQL lock service (the
// "bare" side of bench-pg and of pgstore's BenchmarkCycle): a transaction
// that locks row id of bench_rows (id int PRIMARY KEY, holder text, fence
// bigint), reads it and updates it to holder and the next fence, in two
// round trips (BEGIN + lock, then UPDATE + COMMIT).
func BareTxn(ctx context.Context, conn *pgx.Conn, id int, holder string) error {
	var cur string
	var fence int64
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(`SELECT holder, fence FROM bench_rows WHERE id = $1 FOR UPDATE`, id).QueryRow(func(r pgx.Row) error { return r.Scan(&cur, &fence) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	b = &pgx.Batch{}
	b.Queue(`UPDATE bench_rows SET holder = $2, fence = $3 WHERE id = $1`, id, holder, fence+1)
	b.Queue("COMMIT")
	return conn.SendBatch(ctx, b).Close()
}
