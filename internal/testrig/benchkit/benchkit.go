// Package benchkit is what the benchmark programs under scripts/ share: the
// machine's load and the minimum / median / maximum of a side's rounds.
// (They start their servers with internal/testrig/serverproc.)
package benchkit

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Load is the machine's load average over 1, 5 and 15 minutes, as
// /proc/loadavg gives it, or "?" where there is none.
func Load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Number is what Spread takes.
type Number interface {
	~int | ~int64 | ~float64
}

// Spread returns the minimum, the median (the mean of the two middle values
// of an even count) and the maximum of xs; zeros for none.
func Spread[T Number](xs []T) (lo, med, hi T) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[0], med, s[len(s)-1]
}

// MMM formats Spread(xs) as "lo / med / hi", each with format.
func MMM(xs []float64, format string) string {
	lo, med, hi := Spread(xs)
	return fmt.Sprintf(format+" / "+format+" / "+format, lo, med, hi)
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Millis is ds in milliseconds.
func Millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = Ms(d)
	}
	return out
}
