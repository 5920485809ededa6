//go:build !linux && !js && !wasip1

package wire

import "os"

// fdatasync makes f's written data durable.
func fdatasync(f *os.File) error { return f.Sync() }
