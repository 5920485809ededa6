package clock

import "strconv"

// DomainError is returned when two instants from different clock domains are
// compared or subtracted. It is the spec's ClockDomainError.
type DomainError struct {
	Want string // the domain the operation works in
	Got  string // the domain of the instant that did not belong
}

func (e *DomainError) Error() string {
	return "clock: instant from domain " + strconv.Quote(e.Got) +
		" cannot be measured against domain " + strconv.Quote(e.Want)
}

// ReadingProblem says what was wrong with a clock reading.
type ReadingProblem string

const (
	NotANumber ReadingProblem = "not a number"
	Infinite   ReadingProblem = "infinite"
	Backwards  ReadingProblem = "lower than an earlier reading"
)

// ReadingError is returned by a guarded clock whose source produced a reading
// that cannot be trusted. The clock's last good reading is unchanged.
type ReadingError struct {
	Domain   string
	Problem  ReadingProblem
	Value    float64 // the rejected reading
	Previous float64 // the last accepted reading (meaningful for Backwards)
}

func (e *ReadingError) Error() string {
	msg := "clock: reading of domain " + strconv.Quote(e.Domain) + " is " + string(e.Problem) +
		" (" + FormatMillis(e.Value)
	if e.Problem == Backwards {
		msg += " after " + FormatMillis(e.Previous)
	}
	return msg + ")"
}

// ArgumentError reports an invalid argument to a clock function.
type ArgumentError struct {
	Arg    string
	Reason string
}

func (e *ArgumentError) Error() string { return "clock: " + e.Arg + " " + e.Reason }

// InvalidArgument marks e as a caller error; bridges use it to pick an error
// class without knowing every package's types.
func (e *ArgumentError) InvalidArgument() bool { return true }
