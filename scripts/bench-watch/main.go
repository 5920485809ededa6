//go:build linux

// Command bench-watch measures #27's watch and list against the native
// coordinator (out/bin/coordinator -memory, on loopback), with the Go
// client (service/client):
//
//	watch  the delay of each event: from the send of the acquisition that
//	       decided it to the watcher reading it, at -rate events per
//	       second for -seconds (an upper bound of decision to delivery:
//	       it includes the acquisition's own request)
//	list   -leases live leases listed end to end (client.List, pages of
//	       1,000), -runs times, with the server's live heap (after a full
//	       collection, through -debug-addr) before and after: nothing is
//	       kept. (What one page costs the server, and that it does not grow
//	       with the leases held: BenchmarkListPage in package service.)
//
// Usage, after make coordinator:
//
//	go run ./scripts/bench-watch [-rate 1000] [-seconds 5] [-leases 100000] [-runs 3]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
)

func main() {
	bin := flag.String("coordinator", "out/bin/coordinator", "the coordinator binary")
	rate := flag.Int("rate", 1000, "events per second")
	seconds := flag.Int("seconds", 5, "how long to produce events")
	leases := flag.Int("leases", 100_000, "live leases to list")
	runs := flag.Int("runs", 3, "listings")
	flag.Parse()
	if err := run(*bin, *rate, *seconds, *leases, *runs); err != nil {
		benchkit.Fatal(err)
	}
}

func newClient(url, holder string) (*client.Client, error) {
	return benchkit.NewClient(holder, 0, client.Config{BaseURL: url})
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64) + " ms"
}

func run(bin string, rate, seconds, leases, runs int) error {
	maxLeases := strconv.Itoa(leases + rate*seconds + 1000)
	srv, err := benchkit.Start(exec.Command(bin, "-addr", "127.0.0.1:0", "-memory", "-quiet", "-ttl", "10m", "-debug-addr", "127.0.0.1:0",
		"-max-leases", maxLeases, "-release-memory", maxLeases, "-max-conns", "1000"), "", nil, true)
	if err != nil {
		return err
	}
	defer srv.Stop()
	url := srv.URL
	liveHeap := func() (uint64, error) {
		m, err := benchkit.ReadMemory(srv.Debug)
		return m.LiveHeapBytes, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Watch: one watcher, one producer at rate.
	w, err := newClient(url, "watcher")
	if err != nil {
		return err
	}
	p, err := newClient(url, "producer")
	if err != nil {
		return err
	}
	var sent sync.Map // resource -> time.Time of the send
	n := rate * seconds
	delays := make([]time.Duration, 0, n)
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		for ev, err := range w.Watch(ctx, client.WatchOptions{Prefix: "w/"}) {
			if err != nil {
				done <- err
				return
			}
			now := time.Now()
			if ev.Type == wire.EventHello {
				close(ready)
				continue
			}
			if t, ok := sent.Load(ev.Resource); ok {
				delays = append(delays, now.Sub(t.(time.Time)))
			}
			if len(delays) == n {
				done <- nil
				return
			}
		}
	}()
	<-ready
	tick := time.NewTicker(time.Second / time.Duration(rate))
	begin := time.Now()
	for i := range n {
		<-tick.C
		r := "w/" + strconv.Itoa(i)
		sent.Store(r, time.Now())
		if _, err := p.Acquire(ctx, r); err != nil {
			return err
		}
	}
	tick.Stop()
	produced := time.Since(begin)
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-time.After(30 * time.Second):
		return errors.New("the watcher did not get every event")
	}
	slices.Sort(delays)
	q := func(f float64) time.Duration { return benchkit.Quantile(delays, f) }
	fmt.Printf("watch: %d events at %.0f/s: delay p50 %s, p90 %s, p99 %s, max %s\n", len(delays), float64(n)/produced.Seconds(),
		ms(q(0.5)), ms(q(0.9)), ms(q(0.99)), ms(delays[len(delays)-1]))

	// List: fill, then list end to end.
	fillers := make([]*client.Client, 32)
	for g := range fillers {
		if fillers[g], err = newClient(url, "filler"+strconv.Itoa(g)); err != nil {
			return err
		}
	}
	if err := benchkit.Each(len(fillers), leases, func(g, i int) error {
		_, err := fillers[g].Acquire(ctx, "l/"+strconv.Itoa(i))
		return err
	}); err != nil {
		return err
	}
	heap0, err := liveHeap()
	if err != nil {
		return err
	}
	var took []time.Duration
	for range runs {
		startList := time.Now()
		count := 0
		for _, err := range w.List(ctx, client.ListOptions{Prefix: "l/"}) {
			if err != nil {
				return err
			}
			count++
		}
		took = append(took, time.Since(startList))
		if count != leases {
			return fmt.Errorf("listed %d leases of %d", count, leases)
		}
	}
	heap1, err := liveHeap()
	if err != nil {
		return err
	}
	fmt.Printf("list: %d leases end to end, %d runs (min / median / max): %s ms\n", leases, runs, benchkit.MMM(benchkit.Millis(took), "%.2f"))
	fmt.Printf("list: server live heap %.1f MB before the listings, %.1f MB after\n", float64(heap0)/(1<<20), float64(heap1)/(1<<20))
	return nil
}
