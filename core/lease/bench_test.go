package lease_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/internal/cputime"
)

// mapBaseline is the least a lock service can do: a map of resource to
// holder, fence and expiry behind one mutex, with no validation, clock
// domains, replay cache or outcome values. The coordinator's
// acquire+renew+release cycle is measured against it.
type mapBaseline struct {
	mu     sync.Mutex
	issued uint64
	m      map[string]baseLease
}

type baseLease struct {
	holder string
	fence  uint64
	exp    float64
}

//go:noinline
func (b *mapBaseline) acquire(now float64, res, holder string, ttl float64) (uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.m[res]; ok && now < cur.exp {
		return 0, false
	}
	b.issued++
	b.m[res] = baseLease{holder, b.issued, now + ttl}
	return b.issued, true
}

//go:noinline
func (b *mapBaseline) renew(now float64, res, holder string, f uint64, ttl float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, ok := b.m[res]
	if !ok || cur.holder != holder || cur.fence != f || now >= cur.exp {
		return false
	}
	cur.exp = now + ttl
	b.m[res] = cur
	return true
}

//go:noinline
func (b *mapBaseline) release(now float64, res, holder string, f uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, ok := b.m[res]
	if !ok || cur.holder != holder || cur.fence != f || now >= cur.exp {
		return false
	}
	delete(b.m, res)
	return true
}

// cycleInput is a pool of distinct resources and request ids, so the replay
// cache runs full and evicting, as it would in service.
type cycleInput struct {
	res, acqID, renID []string
}

func newCycleInput(n int, prefix string) cycleInput {
	in := cycleInput{make([]string, n), make([]string, n), make([]string, n)}
	for i := range in.res {
		in.res[i] = prefix + "res-" + itoa(i)
		in.acqID[i] = prefix + "acq-" + itoa(i)
		in.renID[i] = prefix + "ren-" + itoa(i)
	}
	return in
}

// cycler runs the cycle on one side, n cycles at a time, each on the next
// resource of its pool and at a reading 0.001 ms after the previous one.
type cycler struct {
	in   cycleInput
	i    int
	now  float64 // the last reading used
	sent clock.Instant
}

// coordinator runs n cycles on c.
func (y *cycler) coordinator(b *testing.B, c *lease.Coordinator, n int) {
	for range n {
		k := y.i % len(y.in.res)
		y.i++
		y.now += 0.001
		t := at(y.now)
		out, err := c.AcquireAt(t, lease.Request{Kind: lease.KindAcquire, RequestID: y.in.acqID[k], Resource: y.in.res[k], HolderID: "h", SentAt: y.sent})
		if err != nil || !out.OK {
			b.Fatal(out, err)
		}
		f := out.Grant.Fence
		out, err = c.RenewAt(t, lease.Request{Kind: lease.KindRenew, RequestID: y.in.renID[k], Resource: y.in.res[k], HolderID: "h", SentAt: y.sent, Fence: f})
		if err != nil || !out.OK {
			b.Fatal(out, err)
		}
		ok, err := c.ReleaseAt(t, fence.Token{Resource: y.in.res[k], HolderID: "h", Fence: f})
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// baseline runs n cycles on m.
func (y *cycler) baseline(b *testing.B, m *mapBaseline, n int) {
	const ttl = 30_000.0
	for range n {
		k := y.i % len(y.in.res)
		y.i++
		y.now += 0.001
		f, ok := m.acquire(y.now, y.in.res[k], "h", ttl)
		if !ok || !m.renew(y.now, y.in.res[k], "h", f, ttl) || !m.release(y.now, y.in.res[k], "h", f) {
			b.Fatal("baseline cycle failed")
		}
	}
}

// coordinatorCycle runs the cycle from the reading after start and returns
// the last reading it used.
func coordinatorCycle(b *testing.B, c *lease.Coordinator, in cycleInput, start float64) float64 {
	b.Helper()
	y := cycler{in: in, now: start, sent: clock.At("agent", 0)}
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		y.coordinator(b, c, 1)
	}
	cputime.Report(b, cpu)
	return y.now
}

func baselineCycle(b *testing.B, m *mapBaseline, in cycleInput, start float64) float64 {
	b.Helper()
	y := cycler{in: in, now: start}
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		y.baseline(b, m, 1)
	}
	cputime.Report(b, cpu)
	return y.now
}

// BenchmarkCycle is one acquire, renew and release of a free resource
// through the *At methods (the clock read is left out on both sides), next
// to the same cycle on mapBaseline, while 0, 1k, 100k or 1M other leases are
// held. The two sides alternate within every run of the benchmark, so
// -count N interleaves them N times. B/held-lease is the heap the held
// leases take (runtime.MemStats after GC), excluding the callers' resource
// and request id strings.
func BenchmarkCycle(b *testing.B) {
	for _, n := range []int{0, 1_000, 100_000, million} {
		b.Run("held="+heldName(n)+"/coordinator", func(b *testing.B) {
			h := heldLeases(b, n)
			h.coordNow = coordinatorCycle(b, h.c, h.cycle, h.coordNow+1)
			b.ReportMetric(h.coordBytes, "B/held-lease")
			runtime.KeepAlive(h.names)
		})
		b.Run("held="+heldName(n)+"/map+mutex", func(b *testing.B) {
			h := heldLeases(b, n)
			h.baseNow = baselineCycle(b, h.m, h.cycle, h.baseNow+1)
			b.ReportMetric(h.baseBytes, "B/held-lease")
		})
	}
}

// BenchmarkCycleInterleaved is BenchmarkCycle's comparison made so that the
// machine's noise falls on both sides alike: one benchmark runs the
// coordinator's cycle and the baseline's in alternating chunks of
// interleaveChunk cycles (each b.Loop iteration is one chunk of each, the
// side that goes first alternating), timing each chunk with the process's
// CPU clock and the wall clock. It reports each side's cost per cycle
// (coord-cpu-ns, base-cpu-ns, coord-ns, base-ns), their ratio (cpu-ratio,
// wall-ratio) and each side's allocations per cycle, with 0, 1k, 100k or 1M
// other leases held (the same held leases as BenchmarkCycle).
func BenchmarkCycleInterleaved(b *testing.B) {
	const interleaveChunk = 32768
	for _, n := range []int{0, 1_000, 100_000, million} {
		b.Run("held="+heldName(n), func(b *testing.B) {
			h := heldLeases(b, n)
			cy := cycler{in: h.cycle, now: h.coordNow + 1, sent: clock.At("agent", 0)}
			by := cycler{in: h.cycle, now: h.baseNow + 1}
			var cpu, wall, allocs [2]float64 // coordinator, baseline
			side := func(s int) {
				var m0, m1 runtime.MemStats
				if b.N == 1 {
					runtime.ReadMemStats(&m0)
				}
				c0, w0 := cputime.Process(), time.Now()
				if s == 0 {
					cy.coordinator(b, h.c, interleaveChunk)
				} else {
					by.baseline(b, h.m, interleaveChunk)
				}
				wall[s] += float64(time.Since(w0))
				cpu[s] += float64(cputime.Process() - c0)
				if b.N == 1 {
					runtime.ReadMemStats(&m1)
					allocs[s] = float64(m1.Mallocs-m0.Mallocs) / interleaveChunk
				}
			}
			turn := 0
			for b.Loop() {
				side(turn)
				side(1 - turn)
				turn = 1 - turn
			}
			h.coordNow, h.baseNow = cy.now, by.now
			cycles := float64(b.N) * interleaveChunk
			if cpu[1] > 0 {
				b.ReportMetric(cpu[0]/cycles, "coord-cpu-ns")
				b.ReportMetric(cpu[1]/cycles, "base-cpu-ns")
				b.ReportMetric(cpu[0]/cpu[1], "cpu-ratio")
			}
			b.ReportMetric(wall[0]/cycles, "coord-ns")
			b.ReportMetric(wall[1]/cycles, "base-ns")
			b.ReportMetric(wall[0]/wall[1], "wall-ratio")
			b.ReportMetric(allocs[0], "coord-allocs")
			b.ReportMetric(allocs[1], "base-allocs")
			runtime.KeepAlive(h.names)
		})
	}
}

func heldName(n int) string {
	switch {
	case n >= million:
		return itoa(n/million) + "M"
	case n >= 1000:
		return itoa(n/1000) + "k"
	}
	return itoa(n)
}

// BenchmarkCoordinatorCycleNow is the same cycle through the shorthand
// methods, which read a manual clock under the coordinator's lock.
func BenchmarkCoordinatorCycleNow(b *testing.B) {
	c := newCoordinator(b, manual(b, coordDomain, 0, 0.001), 30*time.Second, 0)
	in := newCycleInput(4096, "")
	sent := clock.At("agent", 0)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		k := i % len(in.res)
		i++
		out, err := c.Acquire(lease.Request{Kind: lease.KindAcquire, RequestID: in.acqID[k], Resource: in.res[k], HolderID: "h", SentAt: sent})
		if err != nil || !out.OK {
			b.Fatal(out, err)
		}
		f := out.Grant.Fence
		if out, err = c.Renew(lease.Request{Kind: lease.KindRenew, RequestID: in.renID[k], Resource: in.res[k], HolderID: "h", SentAt: sent, Fence: f}); err != nil || !out.OK {
			b.Fatal(out, err)
		}
		if ok, err := c.Release(fence.Token{Resource: in.res[k], HolderID: "h", Fence: f}); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// held is a coordinator and a baseline holding the same n leases, built once
// per process and size, with the heap each grew by.
type held struct {
	c                     *lease.Coordinator
	m                     *mapBaseline
	coordBytes, baseBytes float64
	names, ids            []string
	cycle                 cycleInput
	coordNow, baseNow     float64 // the last reading each has seen
}

const million = 1_000_000

var (
	heldMu  sync.Mutex
	heldSet = map[int]*held{}
)

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func heldLeases(b *testing.B, n int) *held {
	heldMu.Lock()
	defer heldMu.Unlock()
	if h := heldSet[n]; h != nil {
		return h
	}
	// Names are the caller's; they are allocated before measuring, so the
	// figures are what the coordinator itself adds per held lease (it keeps
	// references to the caller's resource, holder and request id strings).
	h := &held{names: make([]string, n), ids: make([]string, n), cycle: newCycleInput(4096, "x")}
	for i := range h.names {
		h.names[i] = "held-" + itoa(i)
		h.ids[i] = "held-req-" + itoa(i)
	}
	sent := clock.At("agent", 0)
	before := heapInUse()
	c := newCoordinator(b, manual(b, coordDomain, 0, 0), 24*time.Hour, 0)
	for i := range h.names {
		if _, err := c.AcquireAt(at(0), lease.Request{Kind: lease.KindAcquire, RequestID: h.ids[i], Resource: h.names[i], HolderID: "h", SentAt: sent}); err != nil {
			b.Fatal(err)
		}
	}
	h.c = c
	after := heapInUse()
	if n > 0 {
		h.coordBytes = float64(after-before) / float64(n)
	}

	before = heapInUse()
	m := &mapBaseline{m: make(map[string]baseLease)}
	for i := range h.names {
		m.acquire(0, h.names[i], "h", 24*3600e3)
	}
	h.m = m
	if n > 0 {
		h.baseBytes = float64(heapInUse()-before) / float64(n)
	}
	heldSet[n] = h
	return h
}

// BenchmarkClientRoundTrip is the holder's side of an acquisition: begin
// (one clock read) and complete.
func BenchmarkClientRoundTrip(b *testing.B) {
	cl := newClient(b, manual(b, "agent", 0, 0.001), "h", 0)
	g := lease.Grant{Resource: "r", HolderID: "h", Fence: 1, TTL: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		req, err := cl.BeginAcquire("r")
		if err != nil {
			b.Fatal(err)
		}
		g.RequestID = req.RequestID
		if _, err := cl.CompleteAcquire(req, g); err != nil {
			b.Fatal(err)
		}
	}
}
