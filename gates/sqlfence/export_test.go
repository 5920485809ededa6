package sqlfence

// BreakRaise makes s forget to raise the floor: its raise statement is
// replaced by one that takes the same arguments and changes nothing. The
// conformance test shows that the suite fails a Store broken this way.
func BreakRaise(s *Store) {
	s.qRaise = s.rebind(`UPDATE lease_fence_floor SET fence = fence WHERE ? > 0 AND ? <> '' AND resource = ?`)
}
