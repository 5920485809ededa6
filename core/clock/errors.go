package clock

import (
	"strconv"

	"github.com/lease-fence/lease-fence/core/argerr"
)

// DomainError is returned when two instants from different clock domains are
// compared or subtracted. It is the spec's ClockDomainError.
type DomainError struct {
	Want string // the domain the operation works in
	Got  string // the domain of the instant that did not belong
}

// Error names both domains.
func (e *DomainError) Error() string {
	return "clock: instant from domain " + strconv.Quote(e.Got) +
		" cannot be measured against domain " + strconv.Quote(e.Want)
}

// ReadingProblem says what was wrong with a clock reading.
type ReadingProblem string

// The problems a guarded clock reports.
const (
	// NotANumber: the source returned NaN.
	NotANumber ReadingProblem = "not a number"
	// Infinite: the source returned +Inf or -Inf, or a manual clock would
	// step out of the finite range.
	Infinite ReadingProblem = "infinite"
	// Backwards: the reading is lower than one already accepted (an NTP step
	// on a wall clock, or a manual clock set back).
	Backwards ReadingProblem = "lower than an earlier reading"
	// Stuck: a manual clock's StepPerRead no longer moves it (its value
	// grew so large that the step is below the float spacing there), so
	// this read would observe the same instant as the next one.
	Stuck ReadingProblem = "too large for the clock's step to move it"
)

// ReadingError is returned by a guarded clock whose source produced a reading
// that cannot be trusted. The clock's last good reading is unchanged.
type ReadingError struct {
	Domain   string
	Problem  ReadingProblem
	Value    float64 // the rejected reading
	Previous float64 // the last accepted reading (meaningful for Backwards)
}

// Error says which domain produced which reading and what was wrong with it.
func (e *ReadingError) Error() string {
	msg := "clock: reading of domain " + strconv.Quote(e.Domain) + " is " + string(e.Problem) +
		" (" + FormatMillis(e.Value)
	if e.Problem == Backwards {
		msg += " after " + FormatMillis(e.Previous)
	}
	return msg + ")"
}

// ArgumentError reports an invalid argument to a clock function. Nothing changed. It is
// the one argument-error type of lease-fence (every package's ArgumentError
// is this type), so errors.As with it matches an argument error from any
// package; Pkg names the package that refused the argument and prefixes the
// message.
type ArgumentError = argerr.Error
