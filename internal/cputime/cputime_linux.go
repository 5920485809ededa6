// Package cputime reads the process's CPU time, for benchmarks that report
// cpu-ns/op. It is imported by tests only.
package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time (user + system) the process has used, GC
// workers included. On a machine shared with other work it is a steadier
// measure than wall time; benchmarks report it as cpu-ns/op.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
