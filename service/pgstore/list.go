//go:build !js && !wasip1

package pgstore

import (
	"context"
	"unicode/utf8"

	"github.com/lease-fence/lease-fence/service"
)

// List (service.Lister) reads one page of the live lease records under
// prefix after after, in byte order of resource: one keyset query on the
// index of the resources' bytes, whose cost is bounded by the page (and
// the rows without a live lease it passes over in the range).
func (s *Store) List(ctx context.Context, prefix, after string, limit int) (live []service.Entry, now float64, next string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var upper *string
	if u, ok := prefixEnd(prefix); ok {
		upper = &u
	}
	rows, err := s.pool.Query(ctx, qList, after, prefix, upper, limit+1, s.offset())
	if err != nil {
		return nil, 0, "", unavailable("listing", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e service.Entry
		var f int64
		if err := rows.Scan(&e.Resource, &e.HolderID, &f, &e.ExpiresAt, &e.Value, &now); err != nil {
			return nil, 0, "", unavailable("listing", err)
		}
		e.Fence = uint64(max(f, 0))
		live = append(live, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, "", unavailable("listing", err)
	}
	if len(live) > limit {
		live = live[:limit]
		next = live[limit-1].Resource
	}
	return live, now, next, nil
}

// prefixEnd returns the least string above every string that begins with
// prefix, in byte order: prefix with its last character replaced by the
// next one (dropping characters that have none); ok is false when there
// is none (an empty prefix).
func prefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, n := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-n]
		if r == utf8.RuneError && n <= 1 {
			continue
		}
		next := r + 1
		if next == 0xD800 {
			next = 0xE000 // past the surrogates, which UTF-8 cannot hold
		}
		if next <= utf8.MaxRune {
			return prefix + string(next), true
		}
	}
	return "", false
}
