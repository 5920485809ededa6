//go:build unix

// Package procgroup ends the process groups that tests and benchmarks
// start (a coordinator, or wrangler dev with its workerd and proxy).
package procgroup

import (
	"syscall"
	"time"
)

// Stop ends the process group pgid: SIGINT, then SIGKILL if exited is not
// closed within grace; it returns once exited is closed.
func Stop(pgid int, exited <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
}
