package lease

import (
	"strconv"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
)

// Leases that expired without a release do not pile up: the coordinator's
// map stays within about twice the live leases plus sweepMin, however many
// distinct resources come and go.
func TestExpiredLeasesAreSwept(t *testing.T) {
	clk, err := clock.NewManual("c", clock.ManualOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCoordinator(CoordinatorConfig{Clock: clk, TTL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50_000
	peak := 0
	for i := 0; i < n; i++ {
		res := "r" + strconv.Itoa(i)
		out, err := c.AcquireAt(clock.At("c", float64(i)), Request{Kind: KindAcquire, RequestID: res, Resource: res, HolderID: "h", SentAt: clock.At("a", 0)})
		if err != nil || !out.OK {
			t.Fatal(out, err)
		}
		peak = max(peak, c.leases.count)
	}
	// One lease is live at any time (ttl 1ms, one acquisition per ms).
	if peak > 2*sweepMin+2 {
		t.Fatalf("map grew to %d entries for 1 live lease", peak)
	}
	if c.replay.live > 1024 || len(c.replay.ring) > 1024 || len(c.replay.index) > 4096 {
		t.Fatalf("replay cache holds %d ids, %d grants, %d index slots", c.replay.live, len(c.replay.ring), len(c.replay.index))
	}
	// A sweep never removes a live lease.
	holder, f, _, ok, err := c.Holder(clock.At("c", n-1), "r"+strconv.Itoa(n-1))
	if err != nil || !ok || holder != "h" || f != n {
		t.Fatalf("latest lease: %q %d %v %v", holder, f, ok, err)
	}
}

// Live leases survive every sweep.
func TestSweepKeepsLiveLeases(t *testing.T) {
	clk, _ := clock.NewManual("c", clock.ManualOptions{})
	c, _ := NewCoordinator(CoordinatorConfig{Clock: clk, TTL: time.Hour})
	const n = 5 * sweepMin
	for i := 0; i < n; i++ {
		res := "r" + strconv.Itoa(i)
		if _, err := c.AcquireAt(clock.At("c", 0), Request{Kind: KindAcquire, RequestID: res, Resource: res, HolderID: "h", SentAt: clock.At("a", 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if c.leases.count != n {
		t.Fatalf("%d of %d live leases kept", c.leases.count, n)
	}
}

// A released lease's entry is deleted at once, so
// resources acquired and released over and over neither grow the map nor
// trigger sweeps.
func TestReleasedLeasesLeaveNoEntries(t *testing.T) {
	clk, _ := clock.NewManual("c", clock.ManualOptions{})
	c, _ := NewCoordinator(CoordinatorConfig{Clock: clk, TTL: time.Hour})
	for i := 0; i < 10_000; i++ {
		res := "r" + strconv.Itoa(i%4096)
		out, err := c.AcquireAt(clock.At("c", 0), Request{Kind: KindAcquire, RequestID: "q" + strconv.Itoa(i), Resource: res, HolderID: "h", SentAt: clock.At("a", 0)})
		if err != nil || !out.OK {
			t.Fatal(out, err)
		}
		if ok, err := c.ReleaseAt(clock.At("c", 0), out.Grant.Token()); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if c.leases.count != 0 || c.swept != 0 {
		t.Fatalf("%d entries, swept at %d", c.leases.count, c.swept)
	}
}
