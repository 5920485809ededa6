package sim

import (
	"bytes"
	"errors"
	"flag"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

var (
	flagSeed  = flag.Int64("seed", -1, "TestSimSeed: the seed to replay (default: a fixed one)")
	flagNaive = flag.Bool("naive", false, "TestSimSeed: replay with naive agents")
	// make test-sim passes -seeds=10000; the default keeps go test ./core/...
	// (also run under -race and GOOS=js) short.
	flagSeeds      = flag.Uint64("seeds", 300, "TestSimSeeds: how many seeds to run")
	flagNaiveSeeds = flag.Uint64("naiveseeds", 300, "TestNaiveOverlaps: how many seeds to run")
	flagFrom       = flag.Uint64("seedfrom", 0, "TestSimSeeds: first seed")
)

// TestSimSeed replays one seed with a full trace: the command a failing run
// prints. Without -seed it runs seed 1, which must be a busy, clean run.
func TestSimSeed(t *testing.T) {
	seed, mode := uint64(1), Fenced
	if *flagSeed >= 0 {
		seed = uint64(*flagSeed)
	}
	if *flagNaive {
		mode = Naive
	}
	var trace bytes.Buffer
	r := Run(seed, Options{Mode: mode, Trace: &trace, MaxViolations: 10})
	if testing.Verbose() {
		t.Log("\n" + trace.String())
	}
	t.Logf("%v", r.Params)
	t.Logf("%+v", r.Stats)
	if r.FirstOverlap != "" {
		t.Logf("first overlap: %s", r.FirstOverlap)
	}
	for _, v := range r.Violations {
		t.Error(v)
	}
	if *flagSeed < 0 && (r.Stats.Grants == 0 || r.Stats.Writes == 0 || r.Stats.Renewals == 0) {
		t.Fatalf("seed %d did nothing worth checking: %+v", seed, r.Stats)
	}
}

// TestSimSeeds runs -seeds seeds (10,000 by default) with fenced agents and
// fails on the first violation, printing the command that replays it.
func TestSimSeeds(t *testing.T) {
	n, from := *flagSeeds, *flagFrom
	workers := runtime.GOMAXPROCS(0)
	var (
		mu       sync.Mutex
		total    Stats
		failures []string
		failed   int
		persist  Stats // totals over runs with persisted restarts
		amnesiac Stats
		outSkew  Stats
	)
	start := time.Now()
	var wg sync.WaitGroup
	for wi := range workers {
		wg.Go(func() {
			for s := from + uint64(wi); s < from+n; s += uint64(workers) {
				r := Run(s, Options{OpenStore: testOpenStore})
				mu.Lock()
				add(&total, &r.Stats)
				switch r.Params.Restart {
				case RestartPersisted:
					add(&persist, &r.Stats)
				case RestartAmnesiac:
					add(&amnesiac, &r.Stats)
				}
				if !r.Params.SkewWithin {
					add(&outSkew, &r.Stats)
				}
				if err := r.Err(); err != nil {
					failed++
					if len(failures) < 5 {
						failures = append(failures, err.Error()+"\n    replay: "+ReplayCommand(s, Fenced))
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	t.Logf("%d seeds in %v (%d workers): %.0f seeds/s; %.0f invariant checks per run",
		n, el.Round(time.Millisecond), workers, float64(n)/el.Seconds(), float64(total.TotalChecks())/float64(n))
	for _, inv := range AllInvariants() {
		t.Logf("  %-40s %10d checks", inv, total.Checks[inv])
	}
	t.Logf("  grants %d, replays %d, renewals %d, writes %d, stale refused %d, write failures %d, restarts %d, amnesia refusals %d",
		total.Grants, total.Replays, total.Renewals, total.Writes, total.StaleRefused, total.WriteFailures, total.Restarts, total.AmnesiaRefusals)
	t.Logf("  async writes %d (waited %d, cancelled while waiting %d); runs through sqlfence on SQLite %d",
		total.AsyncWrites, total.AsyncQueued, total.AsyncCancelled, total.SQLRuns)
	t.Logf("  runs with drift beyond the assumed skew: holders believed %d leases past the coordinator's window", outSkew.BeliefBeyondWindow)
	for _, f := range failures {
		t.Error(f)
	}
	if failed > 0 {
		t.Errorf("%d of %d seeds failed (the first %d are shown above)", failed, n, len(failures))
	}
	if n < 300 {
		return
	}
	// The runs must exercise what they claim to check.
	for inv := GateFloor; inv <= NamedInvariants; inv++ {
		if total.Checks[inv] == 0 {
			t.Errorf("%s was never evaluated in %d runs", inv, n)
		}
	}
	if persist.Checks[RestartAboveGate] == 0 || persist.Restarts == 0 {
		t.Errorf("no persisted restart was checked: %+v", persist)
	}
	if amnesiac.AmnesiaRefusals == 0 {
		t.Errorf("no gate refused a fence reissued after an amnesiac restart")
	}
	if total.StaleRefused == 0 || total.WriteFailures == 0 || total.Replays == 0 || total.Dups == 0 {
		t.Errorf("faults were not exercised: %+v", total)
	}
	if total.AsyncWrites == 0 || total.AsyncQueued == 0 || total.AsyncCancelled == 0 {
		t.Errorf("async writes were not exercised: %d, %d waited, %d cancelled", total.AsyncWrites, total.AsyncQueued, total.AsyncCancelled)
	}
	if testOpenStore != nil && total.SQLRuns == 0 {
		t.Errorf("no run wrote through sqlfence")
	}
	if outSkew.BeliefBeyondWindow == 0 {
		t.Errorf("runs with drift beyond the assumed skew never left the coordinator's window; the skew assumption is not being tested")
	}
}

func add(dst, s *Stats) {
	dst.Steps += s.Steps
	dst.Messages += s.Messages
	dst.Lost += s.Lost
	dst.Dups += s.Dups
	dst.Grants += s.Grants
	dst.Replays += s.Replays
	dst.Denied += s.Denied
	dst.Renewals += s.Renewals
	dst.RenewRefused += s.RenewRefused
	dst.Releases += s.Releases
	dst.Writes += s.Writes
	dst.StaleRefused += s.StaleRefused
	dst.WriteFailures += s.WriteFailures
	dst.Stalls += s.Stalls
	dst.Pauses += s.Pauses
	dst.Restarts += s.Restarts
	dst.AmnesiaRefusals += s.AmnesiaRefusals
	dst.Overlaps += s.Overlaps
	dst.BeliefBeyondWindow += s.BeliefBeyondWindow
	dst.AsyncWrites += s.AsyncWrites
	dst.AsyncQueued += s.AsyncQueued
	dst.AsyncCancelled += s.AsyncCancelled
	dst.SQLRuns += s.SQLRuns
	for i := range s.Checks {
		dst.Checks[i] += s.Checks[i]
	}
}

// TestNaiveOverlaps runs the same seeds with the naive lease: without a gate,
// stale holders' writes land after newer holders' writes. The simulator must
// find that, or it could not find anything.
func TestNaiveOverlaps(t *testing.T) {
	n := *flagNaiveSeeds
	runs, overlaps, beyond := uint64(0), 0, 0
	first := ""
	for s := range n {
		r := Run(s, Options{Mode: Naive})
		if r.Stats.Overlaps > 0 {
			runs++
			overlaps += r.Stats.Overlaps
			if first == "" {
				first = r.FirstOverlap + "\n    replay: " + ReplayCommand(s, Naive)
			}
		}
		beyond += r.Stats.BeliefBeyondWindow
	}
	t.Logf("naive: %d of %d runs (%.1f%%) ran overlapping writes, %d in all; holders believed %d leases past the coordinator's window",
		runs, n, 100*float64(runs)/float64(n), overlaps, beyond)
	t.Logf("first: %s", first)
	if runs < n/10 {
		t.Fatalf("naive agents overlapped in only %d of %d runs; the simulator is not producing the faults it claims", runs, n)
	}
}

// TestDeterministic: a seed decides everything, down to the trace.
func TestDeterministic(t *testing.T) {
	for _, seed := range []uint64{0, 7, 123456789} {
		for _, mode := range []Mode{Fenced, Naive} {
			var a, b bytes.Buffer
			ra := Run(seed, Options{Mode: mode, Trace: &a})
			rb := Run(seed, Options{Mode: mode, Trace: &b})
			if a.String() != b.String() || ra.Stats != rb.Stats {
				t.Fatalf("seed %d %v: two runs differ", seed, mode)
			}
			if a.Len() == 0 || !strings.Contains(a.String(), "sends acquire") {
				t.Fatalf("seed %d: empty trace", seed)
			}
		}
	}
	if Run(1, Options{}).Stats == Run(2, Options{}).Stats {
		t.Fatal("seeds 1 and 2 ran identically")
	}
	// Async writes run on goroutines of their own: a run whose writes
	// queued at a gate is run twice. (An answer read from the live gate
	// while the next waiter raised its floor made a few in 200 differ, and
	// so did waiters with one fence, refused together, answered in the
	// order the scheduler let them log their rejections: seed 145.)
	queued := 0
	for seed := range uint64(200) {
		var a, b bytes.Buffer
		ra := Run(seed, Options{Mode: Fenced, Trace: &a})
		if ra.Stats.AsyncQueued == 0 {
			continue
		}
		queued++
		if rb := Run(seed, Options{Mode: Fenced, Trace: &b}); a.String() != b.String() || ra.Stats != rb.Stats {
			t.Fatalf("seed %d, writes queued at a gate: two runs differ", seed)
		}
	}
	if queued < 20 {
		t.Fatalf("only %d of 200 seeds queued an async write", queued)
	}
}

// TestParamsRanges: every seed stays inside the ranges the issue asks for.
func TestParamsRanges(t *testing.T) {
	seen := map[RestartMode]bool{}
	for s := uint64(0); s < 5000; s++ {
		p := NewParams(s)
		if p.Agents < 2 || p.Agents > 16 || p.Resources < 1 || p.Resources > 4 {
			t.Fatalf("seed %d: %v", s, p)
		}
		if p.MaxStallMs < p.TTL.Milliseconds() || p.MaxStallMs > 4*p.TTL.Milliseconds() {
			t.Fatalf("seed %d: stalls up to %dms with ttl %v", s, p.MaxStallMs, p.TTL)
		}
		r := float64(p.Skew) / float64(p.TTL)
		bound := r / (2 - r)
		if p.SkewWithin != (p.MaxDrift <= bound) {
			t.Fatalf("seed %d: drift %v against bound %v, skewWithin %v", s, p.MaxDrift, bound, p.SkewWithin)
		}
		seen[p.Restart] = true
	}
	if len(seen) != 3 {
		t.Fatalf("restart modes seen: %v", seen)
	}
}

// BenchmarkRun measures whole runs: one op is one seed. It reports the
// events and invariant evaluations per run.
func BenchmarkRun(b *testing.B) {
	for _, mode := range []Mode{Fenced, Naive} {
		b.Run(mode.String(), func(b *testing.B) {
			steps, checks := 0, 0
			seed := uint64(0)
			for b.Loop() {
				r := Run(seed, Options{Mode: mode})
				steps += r.Stats.Steps
				checks += r.Stats.TotalChecks()
				seed++
			}
			b.ReportMetric(float64(steps)/float64(seed), "steps/run")
			b.ReportMetric(float64(checks)/float64(seed), "checks/run")
			b.ReportMetric(float64(seed)/b.Elapsed().Seconds(), "seeds/s")
		})
	}
}

// BenchmarkCheckHistory measures porcupine on one in-process history of 8
// clients on 2 resources.
func BenchmarkCheckHistory(b *testing.B) {
	ops := concurrentHistory(b, 1, 8, 100, 2, 30*time.Millisecond).Operations()
	m := LeaseModel(30 * time.Millisecond)
	for b.Loop() {
		if !porcupine.CheckOperations(m, ops) {
			b.Fatal("not linearizable")
		}
	}
	b.ReportMetric(float64(len(ops)), "ops/history")
}

// TestAsyncQueueSkippedIsCaught: the deliberate break. With async writes
// checked when they arrive and started at once (the gate's queue skipped),
// the simulator finds a gate running two writes at once, or an older fence
// writing after a newer one started, within the first few hundred seeds.
func TestAsyncQueueSkippedIsCaught(t *testing.T) {
	for s := range uint64(500) {
		r := Run(s, Options{skipAsyncQueue: true})
		if err := r.Err(); err != nil {
			var v *Violation
			if !errors.As(err, &v) || v.Invariant != GateFloor {
				t.Fatalf("seed %d: caught, but as %v", s, err)
			}
			t.Logf("seed %d: %v", s, err)
			if Run(s, Options{}).Err() != nil {
				t.Fatalf("seed %d fails without the break too", s)
			}
			return
		}
	}
	t.Fatal("500 seeds with the async queue skipped broke no invariant")
}

// TestSQLRunsCheckTheDatabase: a run through sqlfence ends with the
// database's rows and rejections matching what the run saw.
func TestSQLRunsCheckTheDatabase(t *testing.T) {
	if testOpenStore == nil {
		t.Skip("no SQLite driver under GOOS=js")
	}
	n := 0
	for s := uint64(0); n < 5 && s < 1000; s++ {
		if !NewParams(s).SQL {
			continue
		}
		n++
		r := Run(s, Options{OpenStore: testOpenStore})
		if err := r.Err(); err != nil {
			t.Fatalf("seed %d: %v", s, err)
		}
		if r.Stats.SQLRuns != 1 || r.Stats.Writes == 0 {
			t.Fatalf("seed %d did not write through sqlfence: %+v", s, r.Stats)
		}
	}
	if n == 0 {
		t.Fatal("no SQL seed among the first 1000")
	}
}
