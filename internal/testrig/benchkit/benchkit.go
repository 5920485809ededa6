// Package benchkit is what the benchmark programs under scripts/ share:
// the machine's load, rounds of closed-loop cycles, the minimum / median /
// maximum and quantiles of samples, CPU marks read from /proc, the lease
// service's raw requests, and the start and stop of the servers measured.
package benchkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

var (
	cleanups   []func()
	cleanupsMu sync.Mutex
)

// atExit registers f to run when Fatal ends the program (a server it
// started, which must not outlive it).
func atExit(f func()) {
	cleanupsMu.Lock()
	defer cleanupsMu.Unlock()
	cleanups = append(cleanups, f)
}

// Fatal prints err after the program's name, runs the functions of atExit
// and exits with status 1.
func Fatal(err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
	cleanupsMu.Lock()
	fs := cleanups
	cleanups = nil
	cleanupsMu.Unlock()
	for _, f := range fs {
		f()
	}
	os.Exit(1)
}

// Must is v, or Fatal(err).
func Must[T any](v T, err error) T {
	if err != nil {
		Fatal(err)
	}
	return v
}

// Ints parses a comma-separated list of whole numbers from lo to hi.
func Ints(s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("bad count %q (want %d to %d)", f, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

// Loop runs clients goroutines, each calling cycle with its index until
// cycles cycles are done in all, d has passed or a call fails (the first
// failure is returned; calls cut short by d are not failures), and returns
// the cycles done and the time they took.
func Loop(clients, cycles int, d time.Duration, cycle func(ctx context.Context, i int) error) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var done atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for ctx.Err() == nil && done.Load() < int64(cycles) {
				if err := cycle(ctx, i); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { first = err; cancel() })
					}
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return done.Load(), time.Since(start), first
}

// Each calls f(worker, i) for every i below n, over workers goroutines
// that take the next i in turn, and returns the first error (after which
// no more are taken).
func Each(workers, n int, f func(worker, i int) error) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(w, i); err != nil {
					errs <- err
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
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

// Quantile is the p-quantile of sorted xs, the sample at rank p*len
// (rounded down); zero for none.
func Quantile[T Number](sorted []T, p float64) T {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
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

// Latencies returns the line of a set of latencies: name, count, p50,
// p99, minimum and maximum in milliseconds. Given a file, it first appends
// every latency to it (milliseconds, one a line).
func Latencies(name string, lat []time.Duration, samples string) (string, error) {
	if samples != "" {
		f, err := os.OpenFile(samples, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		for _, d := range lat {
			fmt.Fprintf(f, "%.4f\n", Ms(d))
		}
		if err := f.Close(); err != nil {
			return "", err
		}
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	if len(s) == 0 {
		return name + " n=0", nil
	}
	return fmt.Sprintf("%-18s n=%-5d p50 %8.3f ms  p99 %8.3f ms  min %8.3f ms  max %8.3f ms", name, len(s),
		Ms(Quantile(s, 0.5)), Ms(Quantile(s, 0.99)), Ms(s[0]), Ms(s[len(s)-1])), nil
}
