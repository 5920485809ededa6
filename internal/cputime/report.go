package cputime

import (
	"testing"
	"time"
)

// Report reports, as cpu-ns/op, the process CPU time per iteration of b since
// the reading cpu (taken with Process); nothing when CPU time is not measured.
func Report(b *testing.B, cpu time.Duration) {
	if cpu != 0 {
		b.ReportMetric(float64(Process()-cpu)/float64(b.N), "cpu-ns/op")
	}
}
