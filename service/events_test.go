package service

import (
	"context"
	"testing"

	"github.com/lease-fence/lease-fence/service/wire"
)

// drained returns the events w holds now, without waiting.
func drained(w *Watch) []wire.Event {
	var out []wire.Event
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}

// kinds returns "type resource holder" of each event, and checks that
// their seqs follow from after.
func kinds(t *testing.T, evs []wire.Event, after uint64) []string {
	t.Helper()
	var out []string
	for i, ev := range evs {
		if ev.Seq != after+uint64(i)+1 {
			t.Fatalf("event %d has seq %d, want %d: %+v", i, ev.Seq, after+uint64(i)+1, evs)
		}
		out = append(out, ev.Type+" "+ev.Resource+" "+ev.HolderID)
	}
	return out
}

// TestDecisionsPublishTheirEvents: grants, renewals, releases and expiries
// (at the next decision, and at the sweep) each publish one event in the
// order they were decided; other prefixes are not sent.
func TestDecisionsPublishTheirEvents(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	w, err := r.svc.Watch(wire.WatchRequest{Prefix: "job/"}, wire.Caller{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if h := w.Hello(); h.Seq != 0 || h.Resumed || h.Stream == "" {
		t.Fatalf("hello %+v", h)
	}
	f, s := r.grant(wire.OpAcquire, acquireMsg("q1", "job/1", "a"))
	r.grant(wire.OpAcquire, acquireMsg("q9", "other", "z"))
	r.grant(wire.OpRenew, renewMsg("q2", "job/1", "a", f, s))
	if st, out := r.post(wire.OpRelease, releaseMsg("q3", "job/1", "a", f, s)); st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	r.grant(wire.OpAcquire, acquireMsg("q4", "job/1", "b"))
	r.clk.Advance(2000)
	r.grant(wire.OpAcquire, acquireMsg("q5", "job/1", "c"))
	r.grant(wire.OpAcquire, acquireMsg("q6", "job/2", "d"))
	r.clk.Advance(2000)
	if _, err := r.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := drained(w)
	want := []string{"granted job/1 a", "renewed job/1 a", "released job/1 a", "granted job/1 b", "expired job/1 b",
		"granted job/1 c", "granted job/2 d"}
	// The sweep's two expiries come in the order of its stripes.
	if len(got) != len(want)+2 {
		t.Fatalf("events %+v", got)
	}
	var seqs []uint64
	for _, ev := range got {
		seqs = append(seqs, ev.Seq)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("seqs not increasing: %v", seqs)
		}
	}
	for i, k := range want {
		if g := got[i].Type + " " + got[i].Resource + " " + got[i].HolderID; g != k {
			t.Fatalf("event %d is %q, want %q (all: %+v)", i, g, k, got)
		}
	}
	for _, ev := range got[len(want):] {
		if ev.Type != wire.EventExpired {
			t.Fatalf("sweep event %+v", ev)
		}
	}
	if got[0].RemainingMillis != 1000 || got[0].Fence != f || got[0].Waiters == nil || *got[0].Waiters != 0 {
		t.Fatalf("grant event %+v", got[0])
	}
}
