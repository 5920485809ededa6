// Package benchkit is what the benchmark programs under scripts/ share:
// the machine's load, rounds of closed-loop cycles, the minimum / median /
// maximum and quantiles of samples, CPU marks read from /proc, the lease
// service's raw requests, and the start and stop of the servers measured.
package benchkit

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lease-fence/lease-fence/service/auth"
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

// Closed is what a closed-loop benchmark of cycles takes (scripts/bench-service
// and scripts/peers, whose lines compare): each run stops after Cycles
// cycles or Duration, and runs with each client count of -conc.
type Closed struct {
	Cycles   int
	Duration time.Duration
	conc     string
}

// ClosedFlags defines -cycles, -duration and -conc.
func ClosedFlags() *Closed {
	c := &Closed{}
	flag.IntVar(&c.Cycles, "cycles", 2000, "stop a run after this many acquire+release cycles")
	flag.DurationVar(&c.Duration, "duration", 5*time.Second, "stop a run after this long")
	flag.StringVar(&c.conc, "conc", "1,8", "comma-separated client counts")
	return c
}

// Clients is the client counts of -conc (Fatal if they are not 1 to 64).
func (c *Closed) Clients() []int { return Must(Ints(c.conc, 1, 64)) }

// Rate is the line of a closed-loop run: its name, clients, cycles and
// time, and cycles and calls (perCycle a cycle) per second.
func Rate(name string, clients int, cycles int64, elapsed time.Duration, perCycle int) string {
	s := elapsed.Seconds()
	return fmt.Sprintf("%-18s clients=%-2d %6d cycles in %5.2fs  %8.0f cycles/s  %8.0f calls/s",
		name, clients, cycles, s, float64(cycles)/s, float64(perCycle)*float64(cycles)/s)
}

// Loop runs clients goroutines, each calling cycle with its index until
// cycles cycles are done in all, d has passed or a call fails (the first
// failure is returned; calls cut short by d are not failures), and returns
// the cycles done and the time they took.
func Loop(clients, cycles int, d time.Duration, cycle func(ctx context.Context, i int) error) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	var done atomic.Int64
	start := time.Now()
	for i := range clients {
		g.Go(func() error {
			for gctx.Err() == nil && done.Load() < int64(cycles) {
				if err := cycle(gctx, i); err != nil {
					if ctx.Err() != nil {
						return nil // cut short by d
					}
					return err
				}
				done.Add(1)
			}
			return nil
		})
	}
	err := g.Wait()
	return done.Load(), time.Since(start), err
}

// Handovers times n handovers of one lock between holders, after 10 to
// warm up. Each time next, the next holder's acquisition (which returns
// its release), runs in a goroutine; once queued has returned (next
// waits) and settle has passed, the lock's holder calls release, and the
// time from then until next returned is taken.
func Handovers(n int, settle time.Duration, release func() error, next func() (func() error, error), queued func() error) ([]time.Duration, error) {
	var lat []time.Duration
	for range n + 10 {
		type result struct {
			release func() error
			at      time.Time
			err     error
		}
		got := make(chan result, 1)
		go func() {
			r, err := next()
			got <- result{r, time.Now(), err}
		}()
		if err := queued(); err != nil {
			return nil, err
		}
		time.Sleep(settle)
		t0 := time.Now()
		if err := release(); err != nil {
			return nil, err
		}
		r := <-got
		if r.err != nil {
			return nil, r.err
		}
		lat, release = append(lat, r.at.Sub(t0)), r.release
	}
	_ = release()
	return lat[10:], nil
}

// Each calls f(worker, i) for every i below n, over workers goroutines
// that take the next i in turn, and returns the first error (after which
// no more are taken).
func Each(workers, n int, f func(worker, i int) error) error {
	var next atomic.Int64
	var g errgroup.Group
	for w := range workers {
		g.Go(func() error {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(w, i); err != nil {
					next.Store(int64(n))
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
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

// FreeAddr is a loopback address, "127.0.0.1:port", free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// TokenEntry is an entry of a tokens file (cmd/coordinator -auth, the
// Worker's LEASE_TOKENS) for token, named name, on every resource and
// holder.
func TokenEntry(name, token string) map[string]any {
	return map[string]any{"name": name, "tokenSha256": auth.TokenSHA256(token), "resources": []string{"*"}, "holders": []string{"*"}}
}
