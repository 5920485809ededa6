//go:build !js

package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pebblestore"
)

// latency measures the time of one acquisition (the HTTP call, fsync
// included) on durable coordinators that already hold sizes[i] live leases,
// one sample of each in turn, and prints the percentiles of each and the
// ratio of their medians to the first's. The existing leases are written
// into each state before its server starts (an hour long, fences 1..n), so
// the servers restore them like after a restart; the time each took from
// its start to its listening line (the whole state read and checked) is
// printed too.
func latency(coordinator string, sizes []int, samples int) error {
	type target struct {
		n    int
		srv  *server
		took []time.Duration
	}
	var ts []*target
	defer func() {
		for _, t := range ts {
			if t.srv != nil {
				t.srv.stop()
			}
		}
	}()
	for _, n := range sizes {
		tmp, err := os.MkdirTemp("", "bench-latency-")
		if err != nil {
			return err
		}
		path := filepath.Join(tmp, "state")
		st, err := pebblestore.Create(path, pebblestore.Options{})
		if err != nil {
			return err
		}
		exp := float64(time.Now().Add(50 * time.Minute).UnixMilli())
		ctx := context.Background()
		if err := st.Write(ctx, service.Batch{Mark: uint64(n + 1024)}, true); err != nil {
			return err
		}
		for i := 0; i < n; i += 1000 {
			var b service.Batch
			for j := i; j < min(i+1000, n); j++ {
				b.Put = append(b.Put, service.Entry{Resource: "existing-" + strconv.Itoa(j), HolderID: "holder-" + strconv.Itoa(j%64),
					RequestID: "req-" + strconv.Itoa(j), Fence: uint64(j + 1), ExpiresAt: exp,
					SecretHash: sha256.Sum256([]byte("secret-" + strconv.Itoa(j)))})
			}
			if err := st.Write(ctx, b, true); err != nil {
				return err
			}
		}
		if err := st.Close(); err != nil {
			return err
		}
		cmd := exec.Command(coordinator, "-addr", "127.0.0.1:0", "-quiet", "-ttl", "1h", "-state", path,
			"-max-leases", strconv.Itoa(2*n+samples+100))
		t0 := time.Now()
		srv, err := startCmd(cmd, tmp)
		if err != nil {
			return fmt.Errorf("%d leases: %w", n, err)
		}
		fmt.Printf("  start with %7d leases: %6.1f ms to the listening line\n", n, benchkit.Ms(time.Since(t0)))
		ts = append(ts, &target{n: n, srv: srv})
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	const secret = "bench-latency-secret-0123"
	for k := range samples + 50 { // the first 50 are a warm-up
		for _, t := range ts {
			acq := benchkit.AcquireBody("a"+strconv.Itoa(k), "fresh-"+strconv.Itoa(k), "bench", secret, 1, 0)
			t0 := time.Now()
			if _, err := benchkit.Post(hc, t.srv.url)("/v1/acquire", acq); err != nil {
				return fmt.Errorf("%d leases: %w", t.n, err)
			}
			if k >= 50 {
				t.took = append(t.took, time.Since(t0))
			}
			// Not released: the lease count grows by the samples,
			// which is small against the sizes compared.
		}
	}
	fmt.Printf("p50 acquire (one client, durable, fsync included), %d samples each, taken in turns:\n", samples)
	var base time.Duration
	for i, t := range ts {
		slices.Sort(t.took)
		p := func(q float64) time.Duration { return t.took[int(q*float64(len(t.took)-1))] }
		if i == 0 {
			base = p(0.5)
		}
		fmt.Printf("  %7d existing leases: p50 %6.3f ms  p90 %6.3f ms  p99 %6.3f ms  min %6.3f ms  (p50 %.2fx the first)\n",
			t.n, benchkit.Ms(p(0.5)), benchkit.Ms(p(0.9)), benchkit.Ms(p(0.99)), benchkit.Ms(t.took[0]), float64(p(0.5))/float64(base))
	}
	return nil
}
