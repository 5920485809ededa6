// Command simulate runs lease-fence simulations: one seed verbosely (to
// replay a failure), or a range of seeds with a progress line (a soak).
//
//	go run ./cmd/simulate -seed 42 -trace
//	go run ./cmd/simulate -from 0 -n 1000000
//	go run ./cmd/simulate -naive -n 10000
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/core/sim"
)

func main() {
	seed := flag.Int64("seed", -1, "run only this seed and print its parameters, statistics and any violation")
	trace := flag.Bool("trace", false, "with -seed: print every event")
	from := flag.Uint64("from", 0, "first seed of a range")
	n := flag.Uint64("n", 10000, "number of seeds in the range")
	naive := flag.Bool("naive", false, "run naive agents (expect overlapping writes) instead of fenced ones")
	workers := flag.Int("workers", runtime.GOMAXPROCS(0), "parallel runs")
	every := flag.Duration("progress", 5*time.Second, "interval between progress lines")
	flag.Parse()

	mode := sim.Fenced
	if *naive {
		mode = sim.Naive
	}
	if *seed >= 0 {
		os.Exit(one(uint64(*seed), mode, *trace))
	}
	os.Exit(soak(*from, *n, mode, *workers, *every))
}

func one(seed uint64, mode sim.Mode, trace bool) int {
	opts := sim.Options{Mode: mode}
	if trace {
		opts.Trace = os.Stdout
	}
	r := sim.Run(seed, opts)
	fmt.Println(r.Params)
	fmt.Printf("%+v\n", r.Stats)
	if r.FirstOverlap != "" {
		fmt.Println("first overlap:", r.FirstOverlap)
	}
	if err := r.Err(); err != nil && mode == sim.Fenced {
		fmt.Println(err)
		return 1
	}
	return 0
}

func soak(from, n uint64, mode sim.Mode, workers int, every time.Duration) int {
	var next, done, failed, overlapRuns, overlaps, checks atomic.Uint64
	next.Store(from)
	var mu sync.Mutex
	var failures []string
	byInvariant := map[sim.Invariant]int{}
	var runsBy, overlapBy [3]int // by restart mode
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d := done.Load()
				fmt.Printf("soak: %d/%d seeds, %d failed, %.0f seeds/s\n", d, n, failed.Load(), float64(d)/time.Since(start).Seconds())
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				s := next.Add(1) - 1
				if s >= from+n {
					return
				}
				r := sim.Run(s, sim.Options{Mode: mode})
				checks.Add(uint64(r.Stats.TotalChecks()))
				mu.Lock()
				runsBy[r.Params.Restart]++
				if r.Stats.Overlaps > 0 {
					overlapBy[r.Params.Restart]++
				}
				mu.Unlock()
				if r.Stats.Overlaps > 0 {
					overlapRuns.Add(1)
					overlaps.Add(uint64(r.Stats.Overlaps))
				}
				if err := r.Err(); err != nil && mode == sim.Fenced {
					failed.Add(1)
					mu.Lock()
					var v *sim.Violation
					if errors.As(err, &v) {
						byInvariant[v.Invariant]++
					}
					failures = append(failures, fmt.Sprintf("%v\n  replay: %s", err, sim.ReplayCommand(s, mode)))
					mu.Unlock()
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	el := time.Since(start)
	fmt.Printf("soak: %d seeds [%d, %d) %s in %v: %.0f seeds/s, %.0f invariant checks per run, %d failed\n",
		n, from, from+n, mode, el.Round(time.Millisecond), float64(n)/el.Seconds(), float64(checks.Load())/float64(n), failed.Load())
	if mode == sim.Naive {
		fmt.Printf("soak: naive runs with overlapping writes: %d of %d (%.1f%%), %d overlapping writes in all\n",
			overlapRuns.Load(), n, 100*float64(overlapRuns.Load())/float64(n), overlaps.Load())
		for _, m := range []sim.RestartMode{sim.NoRestart, sim.RestartPersisted, sim.RestartAmnesiac} {
			if runsBy[m] > 0 {
				fmt.Printf("soak:   restarts %-9v %d of %d runs (%.1f%%)\n", m, overlapBy[m], runsBy[m], 100*float64(overlapBy[m])/float64(runsBy[m]))
			}
		}
	}
	for _, inv := range sim.AllInvariants() {
		if byInvariant[inv] > 0 {
			fmt.Printf("soak: %d runs failed first on %s\n", byInvariant[inv], inv)
		}
	}
	for i, f := range failures {
		if i == 10 {
			fmt.Printf("... and %d more\n", len(failures)-10)
			break
		}
		fmt.Println(f)
	}
	if failed.Load() > 0 {
		return 1
	}
	return 0
}
