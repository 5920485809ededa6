//go:build !js

package redisfence_test

import (
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/redisfence"
)

// BenchmarkCommitInterleaved compares, on the test server (AOF with
// appendfsync always), one RPUSH committed through the Store with the same
// RPUSH sent alone, and with the Store running a script without its commit
// marker (to show what the marker costs). The sides alternate in chunks of
// 20 commits, so the noise of other processes falls on all of them; the
// metrics are each side's time per commit and the ratios.
func BenchmarkCommitInterleaved(b *testing.B) {
	s, rdb, ns := newStore(b, redisfence.Options{})
	tok := fence.Token{Resource: "bench", HolderID: "h", Fence: 1}
	key := redisfence.Key("bench", ns+"list")
	w := redisfence.Write{Keys: []string{key}, Commands: [][]string{{"RPUSH", key, "v"}}}
	const chunk = 20
	var fenced, plain, unmarked time.Duration
	run := func(f func() error) time.Duration {
		start := time.Now()
		for range chunk {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += chunk {
		fenced += run(func() error { return s.Commit(bg, tok, w) })
		plain += run(func() error { return rdb.RPush(bg, key, "v").Err() })
		restore := redisfence.BreakScript("redis.call('SET', markKey, 'ok', 'PX', ttl)", "")
		unmarked += run(func() error { return s.Commit(bg, tok, w) })
		restore()
	}
	n := float64((b.N + chunk - 1) / chunk * chunk)
	b.ReportMetric(float64(fenced.Nanoseconds())/n, "ns/fenced")
	b.ReportMetric(float64(plain.Nanoseconds())/n, "ns/plain")
	b.ReportMetric(float64(unmarked.Nanoseconds())/n, "ns/no-marker")
	b.ReportMetric(float64(fenced)/float64(plain), "fenced/plain")
	b.ReportMetric(float64(unmarked)/float64(plain), "no-marker/plain")
}
