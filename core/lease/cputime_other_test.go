//go:build !linux

package lease_test

import "time"

// processCPU is not measured off Linux; cpu-ns/op is then not reported.
func processCPU() time.Duration { return 0 }
