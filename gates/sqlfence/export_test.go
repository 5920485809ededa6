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

// BreakWait makes s admit a higher fence the way it admits the floor's own:
// through the share statement, without waiting for the writes in flight and
// without raising the floor. The conformance test shows that the suite
// fails a Store broken this way.
func BreakWait(s *Store) {
	if s.share == nil {
		panic("sqlfence: BreakWait on a Store without the share statement")
	}
	s.qShare = s.rebind(share("lease_fence_floor", true))
	stmt, err := s.db.PrepareContext(context.Background(), s.qShare)
	if err != nil {
		panic(err)
	}
	s.share = stmt
}
