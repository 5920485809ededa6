//go:build !js && !wasip1

package pgstore

import "math"

// SetClockOffset steps the clock the store reads: ms is added to every
// reading of the database server's clock from now on, as if that clock had
// been stepped by ms.
func SetClockOffset(s *Store, ms float64) { s.clockOffset.Store(math.Float64bits(ms)) }
