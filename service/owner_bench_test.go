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

// ownerBench runs each caller's sub-benchmark: a service whose caller
// holds 100 leases, and on each goroutine a resource of its own (res) and
// a call (call: m as the caller, failing the benchmark unless ok) that
// loop runs for each of pb's operations.
func ownerBench(b *testing.B, loop func(pb *testing.PB, res string, call func(m wire.Message) (wire.Reply, bool))) {
	for _, bc := range ownerBenchCallers {
		b.Run(bc.name, func(b *testing.B) {
			svc := benchService(b)
			call := func(m wire.Message) (wire.Reply, bool) {
				m.Caller = bc.caller
				rep, err := svc.Call(context.Background(), m)
				if err != nil || !rep.OK {
					b.Error(rep, err)
					return rep, false
				}
				return rep, true
			}
			for i := range 100 {
				if _, ok := call(acquireMsg("held"+strconv.Itoa(i), "held-"+strconv.Itoa(i), "h")); !ok {
					return
				}
			}
			var next atomic.Int64
			b.ReportAllocs()
			defer cpuPerOp(b)()
			b.RunParallel(func(pb *testing.PB) { loop(pb, "r-"+strconv.FormatInt(next.Add(1), 10), call) })
		})
	}
}

// BenchmarkOwnerAcquire measures one acquisition and its release.
func BenchmarkOwnerAcquire(b *testing.B) {
	ownerBench(b, func(pb *testing.PB, res string, call func(wire.Message) (wire.Reply, bool)) {
		for i := 0; pb.Next(); i++ {
			id := res + "-" + strconv.Itoa(i)
			rep, ok := call(acquireMsg("a"+id, res, "h"))
			if !ok {
				return
			}
			if _, ok := call(releaseMsg("x"+id, res, "h", rep.Grant.Fence, secretOf("h"))); !ok {
				return
			}
		}
	})
}

// BenchmarkOwnerRenew measures one renewal.
func BenchmarkOwnerRenew(b *testing.B) {
	ownerBench(b, func(pb *testing.PB, res string, call func(wire.Message) (wire.Reply, bool)) {
		rep, ok := call(acquireMsg("a"+res, res, "h"))
		if !ok {
			return
		}
		for i := 0; pb.Next(); i++ {
			if _, ok := call(renewMsg("n"+res+"-"+strconv.Itoa(i), res, "h", rep.Grant.Fence, secretOf("h"))); !ok {
				return
			}
		}
	})
}
