package fence_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the process has used, GC
// workers included. On a machine shared with other work it is a steadier
// measure than wall time; benchmarks report it as cpu-ns/op.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
