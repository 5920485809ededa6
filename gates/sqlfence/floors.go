package sqlfence

import (
	"context"
	"strconv"

	"github.com/lease-fence/lease-fence/core/fence"
)

// MaxFloorsPage is the largest limit FloorsAfter takes.
const MaxFloorsPage = 10000

// FloorsAfter returns a page of the floors the Store keeps: those of the
// resources that start with prefix and sort after after (in byte order of
// their names), in that order, at most limit (1 to
// MaxFloorsPage) of them. Start with after "" and pass the last resource of
// each page to get the next; a page shorter than limit is the end. Each
// resource is on one page only, however the floors change between pages.
func (s *Store) FloorsAfter(ctx context.Context, prefix, after string, limit int) ([]fence.Floor, error) {
	switch {
	case s == nil || s.db == nil:
		return nil, argError("store", "is nil or was not made by Open")
	case ctx == nil:
		return nil, argError("ctx", "must not be nil")
	case len(prefix) > fence.MaxIDBytes:
		return nil, argError("prefix", "must be at most "+strconv.Itoa(fence.MaxIDBytes)+" bytes")
	case len(after) > fence.MaxIDBytes:
		return nil, argError("after", "must be at most "+strconv.Itoa(fence.MaxIDBytes)+" bytes")
	case limit < 1 || limit > MaxFloorsPage:
		return nil, argError("limit", "must be from 1 to "+strconv.Itoa(MaxFloorsPage))
	}
	// The scan of the primary key's index starts at the later of after
	// and prefix.
	args := []any{after, prefix, prefix, prefix, limit}
	if s.dialect == Postgres {
		args = []any{after, prefix, prefix, limit}
	}
	var out []fence.Floor
	err := s.retry(ctx, func() error {
		out = out[:0]
		rows, err := s.db.QueryContext(ctx, s.qFloorsAfter, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f fence.Floor
			var n int64
			if err := rows.Scan(&f.Resource, &n, &f.HolderID); err != nil {
				return err
			}
			f.Fence = uint64(n)
			out = append(out, f)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, ended(ctx, wrap("reading floors", err))
	}
	return out, nil
}

// RejectionTotal returns the number of refusals the Store has logged,
// across its resources.
func (s *Store) RejectionTotal(ctx context.Context) (uint64, error) {
	switch {
	case s == nil || s.db == nil:
		return 0, argError("store", "is nil or was not made by Open")
	case ctx == nil:
		return 0, argError("ctx", "must not be nil")
	}
	var n int64
	err := s.retry(ctx, func() error { return s.db.QueryRowContext(ctx, s.qRejectionTotal).Scan(&n) })
	if err != nil {
		return 0, ended(ctx, wrap("counting rejections", err))
	}
	return uint64(n), nil
}

// floorsQueries are FloorsAfter's and RejectionTotal's statements over the
// floor table (arguments of the first: after, prefix, then prefix twice in
// SQLite, once in PostgreSQL, then limit).
func floorsQueries(d Dialect, floor string) (after, total string) {
	// Byte order in both: SQLite compares TEXT with memcmp; PostgreSQL is
	// told to (its default collation may be a locale's).
	col, starts := "resource", `substr(resource, 1, length(?)) = ?`
	if d == Postgres {
		col, starts = `resource COLLATE "C"`, `starts_with(resource, ?)`
	}
	return `SELECT resource, fence, holder FROM ` + floor + ` WHERE ` + col + ` > ? AND ` + col + ` >= ? AND ` + starts + ` ORDER BY ` + col + ` LIMIT ?`,
		`SELECT COALESCE(SUM(rejections), 0) FROM ` + floor
}
