package fence_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
)

func isArgErr(err error) bool {
	var ia interface{ InvalidArgument() bool }
	return errors.As(err, &ia) && ia.InvalidArgument()
}

// The zero Gate and a nil *Gate refuse every call with an argument error:
// nothing runs, nothing panics, not even for a token with an empty resource
// (which matches the zero Gate's empty resource).
func TestZeroAndNilGateRefuseEverything(t *testing.T) {
	var zero fence.Gate
	var nilGate *fence.Gate
	for name, g := range map[string]*fence.Gate{"Zero": &zero, "Nil": nilGate} {
		t.Run(name, func(t *testing.T) {
			for _, tk := range []fence.Token{{}, {HolderID: "a", Fence: 1}, tok("a", 1)} {
				ran := false
				if err := g.Commit(tk, func() error { ran = true; return nil }); !isArgErr(err) || !strings.Contains(err.Error(), "NewGate") {
					t.Fatalf("Commit(%v) = %v", tk, err)
				}
				if err := g.CommitContext(context.Background(), tk, func(context.Context) error { ran = true; return nil }); !isArgErr(err) {
					t.Fatalf("CommitContext(%v) = %v", tk, err)
				}
				if err := g.Admit(tk); !isArgErr(err) {
					t.Fatalf("Admit(%v) = %v", tk, err)
				}
				if ok, err := g.WouldAdmit(tk); ok || !isArgErr(err) {
					t.Fatalf("WouldAdmit(%v) = %v, %v", tk, ok, err)
				}
				if ran {
					t.Fatal("a write ran on a gate that was never made")
				}
			}
			if g.Floor() != 0 || g.RejectionCount() != 0 || g.Rejections() != nil || g.Resource() != "" || g.MaxRejections() != 0 {
				t.Fatal("zero gate reports state")
			}
		})
	}
}

// A fence above MaxFence is invalid input everywhere: never admitted, the
// floor does not move, nothing is logged. MaxFence itself is a fence.
func TestFenceAboveMaxRefused(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("a", 5), nop))
	for _, f := range []uint64{fence.MaxFence + 1, 1 << 63, ^uint64(0)} {
		before := snap(g)
		tk := tok("forger", f)
		ran := false
		for _, err := range []error{
			g.Commit(tk, func() error { ran = true; return nil }),
			g.CommitContext(context.Background(), tk, func(context.Context) error { ran = true; return nil }),
			g.Admit(tk),
			tk.Validate(),
		} {
			if !isArgErr(err) || !strings.Contains(err.Error(), "token.fence must be at most 9007199254740991") {
				t.Fatalf("fence %d: err = %v", f, err)
			}
		}
		if ok, err := g.WouldAdmit(tk); ok || !isArgErr(err) {
			t.Fatalf("WouldAdmit = %v, %v", ok, err)
		}
		if ran {
			t.Fatal("write ran")
		}
		sameSnapshot(t, before, snap(g))
	}
	if fence.MaxFence != 9007199254740991 {
		t.Fatal(fence.MaxFence)
	}
	must(t, g.Commit(tok("last", fence.MaxFence), nop))
	if g.Floor() != fence.MaxFence {
		t.Fatal(g.Floor())
	}
	if _, err := fence.NewGate("r", fence.Options{InitialFloor: fence.MaxFence + 1}); !isArgErr(err) {
		t.Fatalf("InitialFloor above MaxFence: %v", err)
	}
	if _, err := fence.NewGate("r", fence.Options{InitialFloor: fence.MaxFence}); err != nil {
		t.Fatal(err)
	}
}

// Ids are bounded by MaxIDBytes (1024 bytes, the wire protocol's bound).
func TestIDLength(t *testing.T) {
	if fence.MaxIDBytes != 1024 {
		t.Fatal(fence.MaxIDBytes)
	}
	long := strings.Repeat("h", 1025)
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("b", 2), nop))
	before := snap(g)
	for _, tk := range []fence.Token{tok(long, 1), tok(long, 3), {Resource: long, HolderID: "a", Fence: 3}} {
		if err := g.Commit(tk, nop); !isArgErr(err) || !strings.Contains(err.Error(), "at most 1024 bytes") {
			t.Fatalf("err = %v", err)
		}
		if err := g.Admit(tk); !isArgErr(err) {
			t.Fatalf("err = %v", err)
		}
	}
	sameSnapshot(t, before, snap(g))
	checkErr(t, g.Commit(tok(long[:1024], 1), nop), "stale", nil)
	if _, err := fence.NewGate(long, fence.Options{}); !isArgErr(err) {
		t.Fatalf("NewGate with a long resource: %v", err)
	}
	if _, err := fence.NewGate(long[:1024], fence.Options{}); err != nil {
		t.Fatal(err)
	}
}

// The log keeps the most recent MaxRejections refusals, oldest first, and
// counts all of them.
func TestRejectionLogIsARing(t *testing.T) {
	g, err := fence.NewGate("deploy-slot", fence.Options{MaxRejections: 3})
	must(t, err)
	must(t, g.Commit(tok("b", 100), nop))
	for i := 1; i <= 10; i++ {
		checkErr(t, g.Commit(tok("a"+strconv.Itoa(i), uint64(i)), nop), "stale", nil)
		log := g.Rejections()
		if g.RejectionCount() != i || len(log) != min(i, 3) {
			t.Fatalf("after %d refusals: count %d, %d kept", i, g.RejectionCount(), len(log))
		}
		for k, r := range log {
			seq := uint64(i - len(log) + k + 1)
			if r.Seq != seq || r.RefusedFence != seq || r.RefusedHolderID != "a"+strconv.Itoa(int(seq)) {
				t.Fatalf("after %d refusals entry %d = %+v", i, k, r)
			}
		}
	}
	d := newGate(t, "deploy-slot", 0)
	if d.MaxRejections() != fence.DefaultMaxRejections || fence.DefaultMaxRejections != 1000 {
		t.Fatal(d.MaxRejections())
	}
	must(t, d.Commit(tok("b", 2), nop))
	for range 1001 {
		_ = d.Commit(tok("a", 1), nop)
	}
	if log := d.Rejections(); len(log) != 1000 || log[0].Seq != 2 || log[999].Seq != 1001 || d.RejectionCount() != 1001 {
		t.Fatalf("default ring: %d kept, first %d", len(log), log[0].Seq)
	}
	for _, n := range []int{-1, fence.MaxMaxRejections + 1} {
		if _, err := fence.NewGate("r", fence.Options{MaxRejections: n}); !isArgErr(err) || !strings.Contains(err.Error(), "options.maxRejections") {
			t.Fatalf("MaxRejections %d: %v", n, err)
		}
	}
	if g, err := fence.NewGate("r", fence.Options{MaxRejections: fence.MaxMaxRejections}); err != nil || g.MaxRejections() != fence.MaxMaxRejections {
		t.Fatal(err)
	}
}

// A loop of refusals with the longest holder ids, each a fresh string, keeps
// at most MaxRejections of them alive.
func TestRefusalLoopMemoryBounded(t *testing.T) {
	g, err := fence.NewGate("deploy-slot", fence.Options{MaxRejections: 100})
	must(t, err)
	must(t, g.Commit(tok("b", 2), nop))
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	const refusals = 20000 // 20 MB of holder ids if all were kept
	for i := range refusals {
		holder := strings.Repeat(strconv.Itoa(i%10), fence.MaxIDBytes)
		_ = g.Commit(tok(holder, 1), nop)
	}
	grown := int64(heap()) - int64(before)
	if grown > 2<<20 {
		t.Fatalf("heap grew by %d bytes over %d refusals with 100 kept", grown, refusals)
	}
	if g.RejectionCount() != refusals || len(g.Rejections()) != 100 {
		t.Fatal(g.RejectionCount())
	}
}
