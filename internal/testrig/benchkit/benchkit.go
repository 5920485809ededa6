//go:build linux

// Package benchkit is what the benchmark programs under scripts/ share: the
// machine's load, the minimum / median / maximum of a side's rounds, and
// the start of a server that prints "listening on URL" (and, given
// -debug-addr, "debug on URL" on its standard error).
package benchkit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
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

// Server is a process a benchmark started and whose listening line it read.
type Server struct {
	Cmd *exec.Cmd
	// URL follows "listening on " in the first line of its standard output.
	URL string
	// Debug follows "debug on " on its standard error, if Start was asked
	// to wait for it.
	Debug string
}

// Start starts cmd, killed when this process dies unless cmd.SysProcAttr
// says otherwise, and reads the first line of its standard output. With
// debug it also waits for the "debug on URL" line on its standard error
// (cmd.Stderr must then be nil); otherwise the standard error goes to
// cmd.Stderr, or nowhere. The rest of the standard output is drained.
func Start(cmd *exec.Cmd, debug bool) (*Server, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var errp io.Reader
	if debug {
		if errp, err = cmd.StderrPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	dbg := make(chan string, 1)
	if debug {
		go func() {
			sc := bufio.NewScanner(errp)
			for sc.Scan() {
				if _, rest, ok := strings.Cut(sc.Text(), "debug on "); ok {
					select {
					case dbg <- strings.TrimSpace(rest):
					default:
					}
				}
			}
			close(dbg)
		}()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s printed no listening line: %w", cmd.Path, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	s := &Server{Cmd: cmd, URL: strings.TrimSpace(strings.TrimPrefix(line, "listening on "))}
	if debug {
		var ok bool
		if s.Debug, ok = <-dbg; !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, errors.New(cmd.Path + " printed no debug line")
		}
	}
	return s, nil
}
