// Package clock provides instants tagged with the clock domain they were read
// in, and clocks whose readings are guarded against NaN, infinite and backwards
// values.
//
// Two clocks have unrelated origins, so a difference between readings of two
// domains is a number shaped like a duration and off by an unknown offset.
// Instant.Since refuses to compute it and returns a *DomainError instead.
package clock

import (
	"math"
	"strconv"
	"time"
)

// Instant is a reading of a clock: milliseconds since the clock's origin, and
// the domain (the clock's name) it was read in. The origin of a monotonic clock
// is arbitrary, so an Instant means nothing outside its domain.
//
// The zero Instant has an empty domain and is not a valid reading.
type Instant struct {
	Millis float64
	Domain string
}

// At returns the instant millis in domain. It does not validate; see Validate.
func At(domain string, millis float64) Instant {
	return Instant{Millis: millis, Domain: domain}
}

// Validate reports whether t could have come from a clock: a non-empty domain
// and a finite millisecond count.
func (t Instant) Validate() error {
	if t.Domain == "" {
		return &ArgumentError{Pkg: "clock", Arg: "instant", Reason: "has an empty domain"}
	}
	if math.IsNaN(t.Millis) || math.IsInf(t.Millis, 0) {
		return &ArgumentError{Pkg: "clock", Arg: "instant", Reason: "millis must be a finite number, got " + FormatMillis(t.Millis)}
	}
	return nil
}

// Since returns t minus earlier in milliseconds. It is an error, never a
// number, when the two instants come from different domains.
func (t Instant) Since(earlier Instant) (float64, error) {
	if t.Domain != earlier.Domain {
		return 0, &DomainError{Want: t.Domain, Got: earlier.Domain}
	}
	return t.Millis - earlier.Millis, nil
}

// Duration is Since as a time.Duration.
func (t Instant) Duration(earlier Instant) (time.Duration, error) {
	ms, err := t.Since(earlier)
	if err != nil {
		return 0, err
	}
	return FromMillis(ms), nil
}

// Before reports whether t is strictly earlier than u, or a *DomainError when
// the domains differ.
func (t Instant) Before(u Instant) (bool, error) {
	d, err := u.Since(t)
	return d > 0, err
}

// AddMillis returns t moved by ms milliseconds, in the same domain.
func (t Instant) AddMillis(ms float64) Instant {
	return Instant{Millis: t.Millis + ms, Domain: t.Domain}
}

// Add returns t moved by d, in the same domain.
func (t Instant) Add(d time.Duration) Instant {
	return t.AddMillis(Millis(d))
}

// String formats t as "1234.5ms@domain".
func (t Instant) String() string {
	return FormatMillis(t.Millis) + "ms@" + strconv.Quote(t.Domain)
}

// Millis converts d to fractional milliseconds.
func Millis(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// FromMillis converts fractional milliseconds to a Duration, rounding to the
// nearest nanosecond and saturating at the Duration range.
func FromMillis(ms float64) time.Duration {
	ns := math.Round(ms * float64(time.Millisecond))
	switch {
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	case math.IsNaN(ns):
		return 0
	}
	return time.Duration(ns)
}

// FormatMillis formats a millisecond count the shortest way that reads back
// exactly.
func FormatMillis(ms float64) string {
	return strconv.FormatFloat(ms, 'g', -1, 64)
}
