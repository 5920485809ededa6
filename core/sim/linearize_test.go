package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/repodir"

	"github.com/anishathalye/porcupine"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// concurrentHistory runs clients goroutines against one coordinator whose
// manual clock every call reads (stepping 1ms per read) and which the clients
// also push forward, so leases expire in the middle of the run. Choices are
// seeded; the interleaving is whatever the scheduler does.
func concurrentHistory(t testing.TB, seed uint64, clients, opsPer, resources int, ttl time.Duration) *History {
	t.Helper()
	cc, err := clock.NewManual("coordinator", clock.ManualOptions{StepPerRead: 1})
	if err != nil {
		t.Fatal(err)
	}
	co, err := lease.NewCoordinator(lease.CoordinatorConfig{Clock: cc, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	h := NewHistory(func() float64 { return cc.Peek().Millis })
	var wg sync.WaitGroup
	start := make(chan struct{})
	for ci := range clients {
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(seed, uint64(ci)))
			name := "c" + strconv.Itoa(ci)
			hc, _ := clock.NewManual(name, clock.ManualOptions{StepPerRead: 1})
			cl, err := lease.NewClient(lease.ClientConfig{Clock: hc, HolderID: name,
				NewRequestID: func() string { return name + "-" + strconv.FormatUint(rng.Uint64(), 36) }})
			if err != nil {
				t.Error(err)
				return
			}
			rec := h.Record(co, ci)
			rec.Yield = runtime.Gosched
			var held *lease.Lease
			for range opsPer {
				if rng.IntN(3) == 0 {
					runtime.Gosched()
				}
				if rng.IntN(4) == 0 {
					_ = cc.Advance(float64(rng.IntN(int(ttl.Milliseconds()))))
				}
				if held == nil {
					req, err := cl.BeginAcquire("r" + strconv.Itoa(rng.IntN(resources)))
					if err != nil {
						t.Error(err)
						return
					}
					out, _ := rec.Acquire(req)
					for rng.IntN(3) == 0 { // a retry with the same request id
						runtime.Gosched()
						out, _ = rec.Acquire(req)
					}
					if out.OK {
						if held, err = cl.CompleteAcquire(req, out.Grant); err != nil {
							t.Error(err)
							return
						}
					}
					continue
				}
				switch rng.IntN(3) {
				case 0, 1:
					req, err := cl.BeginRenewal(held)
					if err != nil {
						t.Error(err)
						return
					}
					out, _ := rec.Renew(req)
					if !out.OK {
						held = nil
						continue
					}
					if held, err = cl.CompleteRenewal(req, out.Grant); err != nil {
						t.Error(err)
						return
					}
				default:
					_, _ = rec.Release(held.Token())
					held = nil
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return h
}

// overlapping counts operations whose call-return interval overlaps another
// operation's: the ones porcupine may order either way.
func overlapping(ops []porcupine.Operation) int {
	n := 0
	for i, a := range ops {
		for j, b := range ops {
			if i != j && a.Call <= b.Return && b.Call <= a.Return {
				n++
				break
			}
		}
	}
	return n
}

func partitionSizes(ops []porcupine.Operation) []int {
	var sizes []int
	for _, p := range partitionByResource(ops) {
		sizes = append(sizes, len(p))
	}
	return sizes
}

// TestLinearizableInProcess records concurrent histories against one
// in-process coordinator and checks each with porcupine.
func TestLinearizableInProcess(t *testing.T) {
	const ttl = 30 * time.Millisecond
	cases := []struct{ clients, ops, resources, histories int }{
		{4, 100, 1, 20},
		{8, 100, 2, 20},
		{16, 60, 4, 10},
	}
	total, grants, denials, expired, concurrent := 0, 0, 0, 0, 0
	for _, c := range cases {
		for i := range c.histories {
			seed := uint64(i)
			name := fmt.Sprintf("inprocess-c%d-r%d-s%d", c.clients, c.resources, seed)
			h := concurrentHistory(t, seed, c.clients, c.ops, c.resources, ttl)
			ops := h.Operations()
			for _, op := range ops {
				out := op.Output.(OpOutput)
				switch {
				case out.Err != "":
					t.Errorf("%s: an operation failed: %s", name, describeOp(op.Input.(OpInput), out))
				case out.OK && op.Input.(OpInput).Kind == OpAcquire:
					grants++
				case out.HeldBy != "":
					denials++
				case out.Expired:
					expired++
				}
			}
			if _, err := CheckHistory(name, repodir.Out(t, "test", "porcupine"), ttl, ops, time.Minute); err != nil {
				t.Fatal(err)
			}
			total += len(ops)
			concurrent += overlapping(ops)
			if i == 0 {
				t.Logf("%s: %d operations (%d overlap another), per resource %v", name, len(ops), overlapping(ops), partitionSizes(ops))
			}
		}
	}
	t.Logf("checked %d operations (%d overlap another): %d acquisitions granted, %d denied, %d renewals refused as expired",
		total, concurrent, grants, denials, expired)
	if grants == 0 || denials == 0 || expired == 0 || concurrent == 0 {
		t.Fatal("the histories did not exercise grants, denials and expiry")
	}
}

// retriedAfterLater is a history in which a releases with request id rel-a,
// b acquires and releases, and a's release is then answered again under
// retryID: a retry when retryID is rel-a, a second release otherwise.
func retriedAfterLater(retryID string) []porcupine.Operation {
	return []porcupine.Operation{
		op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
		op(0, 3, 4, relID("a", 1, "rel-a", 10, 10), OpOutput{OK: true}),
		op(1, 5, 6, acq("b", "b1", 20, 20), granted(2, 120)),
		op(1, 7, 8, relID("b", 2, "rel-b", 30, 30), OpOutput{OK: true}),
		op(0, 9, 10, relID("a", 1, retryID, 40, 40), OpOutput{OK: true}),
	}
}

// op builds one operation for hand-written histories: client, call and
// return stamps, input and output.
func op(client int, call, ret int64, in OpInput, out OpOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
}

func acq(holder, id string, lo, hi float64) OpInput {
	return OpInput{Kind: OpAcquire, Resource: "r", Holder: holder, RequestID: id, Lo: lo, Hi: hi}
}

func ren(holder string, f uint64, lo, hi float64) OpInput {
	return OpInput{Kind: OpRenew, Resource: "r", Holder: holder, RequestID: holder + "-renew", Fence: f, Lo: lo, Hi: hi}
}

func rel(holder string, f uint64, lo, hi float64) OpInput {
	return OpInput{Kind: OpRelease, Resource: "r", Holder: holder, Fence: f, Lo: lo, Hi: hi}
}

func relID(holder string, f uint64, id string, lo, hi float64) OpInput {
	in := rel(holder, f, lo, hi)
	in.RequestID = id
	return in
}

func granted(f uint64, exp float64) OpOutput { return OpOutput{OK: true, Fence: f, ExpiresAt: exp} }

// TestModelRejectsBadHistories feeds histories no correct coordinator can
// produce; porcupine must reject each and draw it. The good ones next to them
// show the model is not simply rejecting everything.
func TestModelRejectsBadHistories(t *testing.T) {
	const ttl = 100 * time.Millisecond
	cases := []struct {
		name string
		ok   bool
		ops  []porcupine.Operation
	}{
		{"bad-same-fence-twice", false, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
			op(1, 3, 4, acq("b", "b1", 200, 200), granted(1, 300)),
		}},
		{"bad-grant-while-held", false, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
			op(1, 3, 4, acq("b", "b1", 50, 50), granted(2, 150)),
		}},
		{"bad-retry-fresh-fence", false, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
			op(0, 3, 4, acq("a", "a1", 10, 10), granted(2, 110)),
		}},
		{"bad-renew-after-expiry", false, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
			op(0, 3, 4, ren("a", 1, 150, 150), granted(1, 250)),
		}},
		{"bad-expired-while-live", false, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
			op(0, 3, 4, ren("a", 1, 10, 20), OpOutput{Expired: true}),
		}},
		{"bad-time-backwards", false, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 200, 200), granted(1, 300)),
			op(1, 3, 4, acq("b", "b1", 0, 500), granted(2, 150)),
		}},
		{"bad-error-answer", false, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), OpOutput{Err: "lease: something broke"}),
		}},
		{"bad-release-of-ended-lease", false, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
			op(0, 3, 4, relID("a", 1, "rel-1", 10, 10), OpOutput{OK: true}),
			op(0, 5, 6, relID("a", 1, "rel-2", 20, 20), OpOutput{OK: true}),
		}},
		// Correct histories: concurrency lets porcupine reorder.
		{"good-release-retried", true, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
			op(0, 3, 4, relID("a", 1, "rel-1", 10, 10), OpOutput{OK: true}),
			op(1, 5, 6, acq("b", "b1", 20, 20), granted(2, 120)),
			op(0, 7, 8, relID("a", 1, "rel-1", 30, 30), OpOutput{OK: true}),
		}},
		{"good-earlier-release-retried-after-a-later-one", true, retriedAfterLater("rel-a")},
		{"bad-retry-with-another-request-id", false, retriedAfterLater("rel-x")},
		{"good-concurrent-order", true, []porcupine.Operation{
			op(0, 1, 10, acq("a", "a1", 0, 200), granted(2, 250)),
			op(1, 2, 9, acq("b", "b1", 0, 200), granted(1, 100)),
		}},
		{"good-replay-and-denial", true, []porcupine.Operation{
			op(0, 1, 2, acq("a", "a1", 0, 0), granted(1, 100)),
			op(1, 3, 4, acq("b", "b1", 10, 10), OpOutput{HeldBy: "a", RetryAfterMs: 90}),
			op(0, 5, 6, acq("a", "a1", 20, 20), granted(1, 100)),
			op(0, 7, 8, ren("a", 1, 30, 30), granted(1, 130)),
			op(0, 9, 10, rel("a", 1, 40, 40), OpOutput{OK: true}),
			op(1, 11, 12, acq("b", "b2", 50, 50), granted(2, 150)),
			op(0, 13, 14, ren("a", 1, 60, 60), OpOutput{Expired: true}),
		}},
	}
	dir := repodir.Out(t, "test", "porcupine")
	for _, c := range cases {
		path, err := CheckHistory(c.name, dir, ttl, c.ops, 10*time.Second)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrNotLinearizable) {
			t.Errorf("%s: porcupine accepted a history no coordinator may produce (err %v)", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: the error does not name the visualization: %v", c.name, err)
		}
		if b, rerr := os.ReadFile(path); rerr != nil || !strings.Contains(string(b), "<html") {
			t.Errorf("%s: no HTML visualization at %s: %v", c.name, path, rerr)
		}
	}
}
