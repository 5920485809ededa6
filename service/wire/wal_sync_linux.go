package wire

import (
	"os"
	"syscall"
)

// fdatasync makes f's written data durable (not its times).
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
