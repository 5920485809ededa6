//go:build linux

// Command bench-memory measures the coordinator's memory under the loads an
// attacker or a busy deployment produces, and after them: RSS and live heap
// (after a full collection, read through cmd/coordinator -debug-addr)
// before the load, during it, and two TTLs after it ended, for
//
//	refused   200,000 renewals of never-acquired 1,000-byte names (each
//	          refused with "expired"; none may leave state behind)
//	cycles    1,000,000 acquire + release cycles over 100,000 resources,
//	          8 clients (every lease ends; nothing may stay behind)
//
// Each scenario gets a fresh server. The requirement (issue 10): both end
// within 10 MB of the starting live heap. Usage, after make coordinator:
//
//	go run ./scripts/bench-memory [-ttl 5s] [-durable] [-scale 1]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lease-fence/lease-fence/internal/benchkit"
)

type memory = benchkit.Memory

func start(bin string, ttl time.Duration, durable bool) (*benchkit.Server, error) {
	tmp, err := os.MkdirTemp("", "bench-memory-")
	if err != nil {
		return nil, err
	}
	args := []string{"-addr", "127.0.0.1:0", "-quiet", "-ttl", ttl.String(), "-max-id-bytes", "1024",
		"-max-leases", "200000", "-debug-addr", "127.0.0.1:0"}
	if durable {
		args = append(args, "-init", "-state", filepath.Join(tmp, "state"))
	} else {
		args = append(args, "-memory")
	}
	return benchkit.Start(exec.Command(bin, args...), tmp, nil, true)
}

func measure(s *benchkit.Server) (memory, error) { return benchkit.ReadMemory(s.Debug) }

var hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

const secret = "bench-memory-secret-0123"

// run drives n units of work over 8 clients, measuring once when half are
// done.
func run(s *benchkit.Server, n int, work func(client, i int) error) (memory, error) {
	var during memory
	var duringErr error
	err := benchkit.Each(8, n, func(c, i int) error {
		if i == n/2 {
			during, duringErr = measure(s)
		}
		return work(c, i)
	})
	if err == nil {
		err = duringErr
	}
	return during, err
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

func main() {
	bin := flag.String("coordinator", "out/bin/coordinator", "the built server")
	ttl := flag.Duration("ttl", 5*time.Second, "lease TTL of the server (the 'after' figure is taken 2 x TTL after the load)")
	durable := flag.Bool("durable", false, "run the server with its durable state (Pebble) instead of -memory")
	scale := flag.Float64("scale", 1, "multiply the loads by this (for a quick try)")
	flag.Parse()
	scenarios := []struct {
		name string
		n    int
		prep func(s *benchkit.Server) error
		work func(s *benchkit.Server) func(c, i int) error
	}{
		{"200,000 refused renewals of 1,000-byte names", int(200_000 * *scale),
			func(s *benchkit.Server) error {
				// Fence 1 is issued (and released), so that renewing
				// fence 1 is refused as "expired" rather than misuse.
				return benchkit.Post(hc, s.URL).Cycle("prep", "prep", "prep", secret, 1)
			},
			func(s *benchkit.Server) func(c, i int) error {
				pad, post := strings.Repeat("x", 1000-16), benchkit.Post(hc, s.URL)
				return func(_, i int) error {
					name := fmt.Sprintf("%s%016d", pad, i)
					data, err := post("/v1/renew", `{"requestId":"rn`+strconv.Itoa(i)+`","resource":"`+name+
						`","holderId":"attacker","sentAt":{"millis":1,"domain":"a"},"kind":"renew","fence":1,"secret":"`+secret+`"}`)
					if err != nil {
						return err
					}
					if !bytes.Contains(data, []byte(`"expired"`)) {
						return fmt.Errorf("renewal not refused: %s", data)
					}
					return nil
				}
			}},
		{"1,000,000 acquire+release cycles over 100,000 resources", int(1_000_000 * *scale), nil,
			func(s *benchkit.Server) func(c, i int) error {
				resources, post := max(int(100_000**scale), 8), benchkit.Post(hc, s.URL)
				return func(c, i int) error {
					// Client c works on resources c, c+8, ...: no
					// denials, every resource touched again and again.
					r := "res-" + strconv.Itoa((i%(resources/8))*8+c)
					return post.Cycle(strconv.Itoa(i), r, "h"+strconv.Itoa(c), secret, 1)
				}
			}},
	}
	mode := "-memory"
	if *durable {
		mode = "durable state (Pebble)"
	}
	fmt.Printf("coordinator %s, TTL %v; live heap = heap in use after a full GC\n\n", mode, *ttl)
	fmt.Println("| load | before (RSS / live heap) | during | 2 x TTL after | live heap after - before |")
	fmt.Println("|---|---|---|---|---:|")
	failed := false
	for _, sc := range scenarios {
		s, err := start(*bin, *ttl, *durable)
		if err != nil {
			benchkit.Fatal(err)
		}
		// Warm up: a few hundred cycles on one resource.
		for i := range 300 {
			if err := benchkit.Post(hc, s.URL).Cycle("w"+strconv.Itoa(i), "warm", "w", secret, 1); err != nil {
				benchkit.Fatal(fmt.Errorf("warm-up: %w", err))
			}
		}
		if sc.prep != nil {
			if err := sc.prep(s); err != nil {
				benchkit.Fatal(err)
			}
		}
		before, err := measure(s)
		if err != nil {
			benchkit.Fatal(err)
		}
		t0 := time.Now()
		during, err := run(s, sc.n, sc.work(s))
		if err != nil {
			benchkit.Fatal(fmt.Errorf("%s: %w", sc.name, err))
		}
		took := time.Since(t0)
		hc.CloseIdleConnections()
		time.Sleep(2 * *ttl)
		after, err := measure(s)
		if err != nil {
			benchkit.Fatal(err)
		}
		s.Stop()
		d := int64(after.LiveHeapBytes) - int64(before.LiveHeapBytes)
		fmt.Printf("| %s (%.0fs) | %s / %s | %s / %s (%d records) | %s / %s (%d records) | %+.2f MB |\n", sc.name, took.Seconds(),
			mb(before.RSSBytes), mb(int64(before.LiveHeapBytes)), mb(during.RSSBytes), mb(int64(during.LiveHeapBytes)), during.Records,
			mb(after.RSSBytes), mb(int64(after.LiveHeapBytes)), after.Records, float64(d)/(1<<20))
		if d > 10<<20 {
			failed = true
		}
	}
	if failed {
		fmt.Println("\nFAIL: a live heap did not come back within 10 MB of where it started")
		os.Exit(1)
	}
}
