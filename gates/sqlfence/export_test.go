package sqlfence

import (
	"context"
	"database/sql"
	"errors"
)

// BreakRaise makes s forget to raise the floor: its check-and-raise
// statement keeps the floor where it was (and a new row's at 0), while it
// still counts refusals. The conformance test shows that the suite fails a
// Store broken this way.
func BreakRaise(s *Store) {
	s.qUpsert = upsert(s.dialect, "lease_fence_floor", true)
	stmt, err := s.db.PrepareContext(context.Background(), s.qUpsert)
	if err != nil {
		panic(err)
	}
	s.upsert = stmt
}

// BreakWait makes s admit a higher fence the way it admits the floor's own:
// through the share statement, without waiting for the writes in flight and
// without raising the floor. The conformance test shows that the suite
// fails a Store broken this way.
func BreakWait(s *Store) {
	if s.share == nil {
		panic("sqlfence: BreakWait on a Store without the share statement")
	}
	s.qShare = share("lease_fence_floor", true)
	stmt, err := s.db.PrepareContext(context.Background(), s.qShare)
	if err != nil {
		panic(err)
	}
	s.share = stmt
}

// Share runs s's share statement in tx and reports whether it admitted
// fence (returned the floor row, locked in share mode).
func Share(ctx context.Context, s *Store, tx *sql.Tx, resource string, fence int64) (bool, error) {
	var floor, rejections int64
	var holder, xid, locked string
	err := tx.StmtContext(ctx, s.share).QueryRowContext(ctx, resource, fence).Scan(&floor, &holder, &rejections, &xid, &locked)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// RaiseLockTakes runs s's raise-lock statement in tx and reports whether it
// took the resource's advisory lock (false: tx held it in share mode).
func RaiseLockTakes(ctx context.Context, s *Store, tx *sql.Tx, resource string) (bool, error) {
	var n int64
	err := tx.StmtContext(ctx, s.raiseLock).QueryRowContext(ctx, resource).Scan(&n)
	return n == 1, err
}
