//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on f, without waiting: a second
// fence-proxy on the same state file is refused, since two proxies would
// each forward writes to a resource without waiting for the other's. The
// lock is the kernel's, so it ends with the process however it ends. (flock
// locks are separate from the POSIX locks SQLite takes on the same file.)
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errors.New("is in use by another fence-proxy (its lock is held); one proxy per state file")
		}
		return errors.New("cannot be locked: " + err.Error())
	}
}
