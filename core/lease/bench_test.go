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

// coordinatorCycle runs the cycle from the reading start and returns the
// last reading it used.
func coordinatorCycle(b *testing.B, c *lease.Coordinator, in cycleInput, start float64) float64 {
	b.Helper()
	now := start
	i := 0
	sent := clock.At("agent", 0)
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		k := i % len(in.res)
		i++
		now += 0.001
		t := at(now)
		out, err := c.AcquireAt(t, lease.Request{Kind: lease.KindAcquire, RequestID: in.acqID[k], Resource: in.res[k], HolderID: "h", SentAt: sent})
		if err != nil || !out.OK {
			b.Fatal(out, err)
		}
		f := out.Grant.Fence
		out, err = c.RenewAt(t, lease.Request{Kind: lease.KindRenew, RequestID: in.renID[k], Resource: in.res[k], HolderID: "h", SentAt: sent, Fence: f})
		if err != nil || !out.OK {
			b.Fatal(out, err)
		}
		ok, err := c.ReleaseAt(t, fence.Token{Resource: in.res[k], HolderID: "h", Fence: f})
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	cputime.Report(b, cpu)
	return now
}

func baselineCycle(b *testing.B, m *mapBaseline, in cycleInput, start float64) float64 {
	b.Helper()
	now := start
	i := 0
	const ttl = 30_000.0
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		k := i % len(in.res)
		i++
		now += 0.001
		f, ok := m.acquire(now, in.res[k], "h", ttl)
		if !ok || !m.renew(now, in.res[k], "h", f, ttl) || !m.release(now, in.res[k], "h", f) {
			b.Fatal("baseline cycle failed")
		}
	}
	cputime.Report(b, cpu)
	return now
}

// BenchmarkCoordinatorCycle is one acquire, renew and release of a free
// resource through the *At methods (the clock read is left out on both
// sides).
func BenchmarkCoordinatorCycle(b *testing.B) {
	c := newCoordinator(b, manual(b, coordDomain, 0, 0), 30*time.Second, 0)
	coordinatorCycle(b, c, newCycleInput(4096, ""), 0)
}

func BenchmarkBaselineMapCycle(b *testing.B) {
	m := &mapBaseline{m: make(map[string]baseLease)}
	baselineCycle(b, m, newCycleInput(4096, ""), 0)
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

// heldMillion holds one million leases, built once per process: the
// coordinator, the baseline with the same leases, and the heap each grew by.
var heldMillion struct {
	once                  sync.Once
	c                     *lease.Coordinator
	m                     *mapBaseline
	coordBytes, baseBytes float64
	names, ids            []string
	coordNow, baseNow     float64 // the last reading each has seen
}

const million = 1_000_000

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func setupHeldMillion(b *testing.B) {
	h := &heldMillion
	h.once.Do(func() {
		// Names are the caller's; they are allocated before measuring, so the
		// figures are what the coordinator itself adds per held lease (the
		// map keeps a reference to the caller's resource string).
		h.names = make([]string, million)
		h.ids = make([]string, million)
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
		h.coordBytes = float64(heapInUse()-before) / million

		before = heapInUse()
		m := &mapBaseline{m: make(map[string]baseLease)}
		for i := range h.names {
			m.acquire(0, h.names[i], "h", 24*3600e3)
		}
		h.m = m
		h.baseBytes = float64(heapInUse()-before) / million
	})
}

// BenchmarkCoordinatorCycle1MHeld is the cycle on other resources while a
// million leases are held. B/held-lease is the heap the million leases take
// (runtime.MemStats after GC), excluding the callers' resource strings.
func BenchmarkCoordinatorCycle1MHeld(b *testing.B) {
	setupHeldMillion(b)
	heldMillion.coordNow = coordinatorCycle(b, heldMillion.c, newCycleInput(4096, "x"), heldMillion.coordNow+1)
	b.ReportMetric(heldMillion.coordBytes, "B/held-lease")
	runtime.KeepAlive(heldMillion.names)
}

func BenchmarkBaselineMapCycle1MHeld(b *testing.B) {
	setupHeldMillion(b)
	heldMillion.baseNow = baselineCycle(b, heldMillion.m, newCycleInput(4096, "x"), heldMillion.baseNow+1)
	b.ReportMetric(heldMillion.baseBytes, "B/held-lease")
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
