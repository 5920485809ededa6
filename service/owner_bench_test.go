//go:build unix

package service

import (
	"context"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/wire"
)

// The cost of counting a token's lease records in Local: an acquisition
// and its release, and a renewal, for a call without a token, of a token
// without a limit and of one with a limit (maxLeases 1,000, 100 leases
// held), in memory, one goroutine and in parallel.

// cpuPerOp reports the process's CPU time (user and system) per operation
// from its call to the call of the function it returns: a figure a loaded
// machine disturbs less than the time per operation.
func cpuPerOp(b *testing.B) (stop func()) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}

// ownerBenchCallers are the callers of the owner benchmarks.
var ownerBenchCallers = []struct {
	name   string
	caller wire.Caller
}{{"anonymous", wire.Caller{}}, {"token", wire.Caller{Name: "t"}}, {"limited", wire.Caller{Name: "t", MaxLeases: 1000}}}

func ownerBench(b *testing.B, c wire.Caller) *Service {
	svc := benchService(b)
	for i := range 100 {
		m := acquireMsg("held"+strconv.Itoa(i), "held-"+strconv.Itoa(i), "h")
		m.Caller = c
		if rep, err := svc.Call(context.Background(), m); err != nil || !rep.OK {
			b.Fatal(rep, err)
		}
	}
	return svc
}

// BenchmarkOwnerAcquire measures one acquisition and its release.
func BenchmarkOwnerAcquire(b *testing.B) {
	for _, bc := range ownerBenchCallers {
		b.Run(bc.name, func(b *testing.B) {
			svc := ownerBench(b, bc.caller)
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			defer cpuPerOp(b)()
			b.RunParallel(func(pb *testing.PB) {
				res := "r-" + strconv.FormatInt(next.Add(1), 10)
				for i := 0; pb.Next(); i++ {
					id := res + "-" + strconv.Itoa(i)
					m := acquireMsg("a"+id, res, "h")
					m.Caller = bc.caller
					rep, err := svc.Call(ctx, m)
					if err != nil || !rep.OK {
						b.Error(rep, err)
						return
					}
					m = releaseMsg("x"+id, res, "h", rep.Grant.Fence, secretOf("h"))
					m.Caller = bc.caller
					if rep, err := svc.Call(ctx, m); err != nil || !rep.OK {
						b.Error(rep, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkOwnerRenew measures one renewal.
func BenchmarkOwnerRenew(b *testing.B) {
	for _, bc := range ownerBenchCallers {
		b.Run(bc.name, func(b *testing.B) {
			svc := ownerBench(b, bc.caller)
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			defer cpuPerOp(b)()
			b.RunParallel(func(pb *testing.PB) {
				res := "r-" + strconv.FormatInt(next.Add(1), 10)
				m := acquireMsg("a"+res, res, "h")
				m.Caller = bc.caller
				rep, err := svc.Call(ctx, m)
				if err != nil || !rep.OK {
					b.Error(rep, err)
					return
				}
				f := rep.Grant.Fence
				for i := 0; pb.Next(); i++ {
					m := renewMsg("n"+res+"-"+strconv.Itoa(i), res, "h", f, secretOf("h"))
					m.Caller = bc.caller
					if rep, err := svc.Call(ctx, m); err != nil || !rep.OK {
						b.Error(rep, err)
						return
					}
				}
			})
		})
	}
}
