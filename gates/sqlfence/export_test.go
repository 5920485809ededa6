package sqlfence

import "context"

// BreakRaise makes s forget to raise the floor: its check-and-raise
// statement keeps the floor where it was (and a new row's at 0), while it
// still counts refusals. The conformance test shows that the suite fails a
// Store broken this way.
func BreakRaise(s *Store) {
	s.qUpsert = s.rebind(upsert(s.dialect, "lease_fence_floor", true))
	stmt, err := s.db.PrepareContext(context.Background(), s.qUpsert)
	if err != nil {
		panic(err)
	}
	s.upsert = stmt
}
