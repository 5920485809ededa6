package gatetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
)

// floorRaisedBeforeWrite: the floor is raised to an admitted write's fence
// before the write runs, so an older fence that arrives while it runs is
// refused (immediately or when its turn comes), never lands after it.
func floorRaisedBeforeWrite(t testing.TB, c Config) {
	g, _ := c.New(t, Options{})
	ctx := context.Background()
	mustCommit(t, g, tk("agent-a", 1), "a1")
	wantFloor(t, g, res, 1)
	if !c.Inside {
		mustCommit(t, g, tk("agent-b", 2), "b2")
		wantFloor(t, g, res, 2)
		wantValues(t, g, res, "a1", "b2")
		return
	}
	older := make(chan error, 1)
	inside := 0
	err := g.Commit(ctx, tk("agent-b", 2), Write{Value: "b2", Inside: func() {
		inside++
		// The stale holder writes while b's write is running. A gate
		// that serializes writes makes it wait (then this gives up
		// waiting for it after a bounded number of yields, and it must
		// be refused when its turn comes); one that refuses it at once
		// answers here.
		done := make(chan struct{})
		go func() {
			defer close(done)
			older <- g.Commit(ctx, tk("agent-a", 1), Write{Value: "a1-late"})
		}()
		for range 20000 {
			select {
			case <-done:
				return
			default:
				runtime.Gosched()
			}
		}
	}})
	if err != nil {
		t.Fatalf("Commit(b, 2) = %v", err)
	}
	if inside != 1 {
		t.Fatalf("the adapter called Write.Inside %d times, want 1", inside)
	}
	wantStale(t, "an older fence arriving while the newer write ran", <-older,
		fence.Rejection{Seq: 1, Resource: res, RefusedHolderID: "agent-a", RefusedFence: 1, AdmittedHolderID: "agent-b", AdmittedFence: 2})
	wantFloor(t, g, res, 2)
	wantValues(t, g, res, "a1", "b2")
}

// equalFenceAdmitted: the fence at the floor writes again, from its holder
// or another one; the floor keeps the holder that first reached it.
func equalFenceAdmitted(t testing.TB, c Config) {
	g, _ := c.New(t, Options{})
	mustCommit(t, g, tk("agent-a", 3), "a3")
	mustCommit(t, g, tk("agent-a", 3), "a3-again")
	mustCommit(t, g, tk("agent-b", 3), "b3")
	wantFloor(t, g, res, 3)
	wantValues(t, g, res, "a3", "a3-again", "b3")
	wantRejections(t, g, res)
	err := g.Commit(context.Background(), tk("agent-c", 2), Write{Value: "c2"})
	wantStale(t, "fence 2 after fence 3", err,
		fence.Rejection{Seq: 1, Resource: res, RefusedHolderID: "agent-c", RefusedFence: 2, AdmittedHolderID: "agent-a", AdmittedFence: 3})
	if err := g.Admit(context.Background(), tk("agent-d", 3)); err != nil {
		t.Fatalf("Admit at the floor = %v, want nil", err)
	}
	wantFloor(t, g, res, 3)
}

// lowerFenceRefused: a fence below the floor is refused and logged with
// both holders, both fences and a sequence number counted per resource.
func lowerFenceRefused(t testing.TB, c Config) {
	g, _ := c.New(t, Options{})
	ctx := context.Background()
	mustCommit(t, g, tk("agent-a", 1), "a1")
	mustCommit(t, g, tk("agent-b", 2), "b2")
	r1 := fence.Rejection{Seq: 1, Resource: res, RefusedHolderID: "agent-a", RefusedFence: 1, AdmittedHolderID: "agent-b", AdmittedFence: 2}
	wantStale(t, "fence 1 after fence 2", g.Commit(ctx, tk("agent-a", 1), Write{Value: "a1-late"}), r1)
	mustCommit(t, g, tk("agent-c", 7), "c7")
	r2 := fence.Rejection{Seq: 2, Resource: res, RefusedHolderID: "agent-b", RefusedFence: 2, AdmittedHolderID: "agent-c", AdmittedFence: 7}
	wantStale(t, "fence 2 after fence 7", g.Commit(ctx, tk("agent-b", 2), Write{Value: "b2-late"}), r2)
	wantValues(t, g, res, "a1", "b2", "c7")
	wantFloor(t, g, res, 7)
	wantRejections(t, g, res, r1, r2)

	// Another resource has its own floor and its own sequence.
	other := "other-slot"
	mustCommit(t, g, fence.Token{Resource: other, HolderID: "agent-x", Fence: 4}, "x4")
	err := g.Commit(ctx, fence.Token{Resource: other, HolderID: "agent-y", Fence: 3}, Write{Value: "y3"})
	ro := fence.Rejection{Seq: 1, Resource: other, RefusedHolderID: "agent-y", RefusedFence: 3, AdmittedHolderID: "agent-x", AdmittedFence: 4}
	wantStale(t, "another resource", err, ro)
	wantRejections(t, g, other, ro)
	wantValues(t, g, other, "x4")
	wantRejections(t, g, res, r1, r2)
	wantFloor(t, g, res, 7)
}

// admitRaisesWithoutWriting: Admit raises the floor and writes nothing; an
// older token is refused and logged like a stale write.
func admitRaisesWithoutWriting(t testing.TB, c Config) {
	g, _ := c.New(t, Options{})
	ctx := context.Background()
	mustCommit(t, g, tk("agent-a", 1), "a1")
	if err := g.Admit(ctx, tk("agent-b", 5)); err != nil {
		t.Fatalf("Admit(b, 5) = %v", err)
	}
	wantFloor(t, g, res, 5)
	wantValues(t, g, res, "a1")
	r1 := fence.Rejection{Seq: 1, Resource: res, RefusedHolderID: "agent-a", RefusedFence: 1, AdmittedHolderID: "agent-b", AdmittedFence: 5}
	wantStale(t, "a write below an admitted fence", g.Commit(ctx, tk("agent-a", 1), Write{Value: "a1-late"}), r1)
	r2 := fence.Rejection{Seq: 2, Resource: res, RefusedHolderID: "agent-c", RefusedFence: 4, AdmittedHolderID: "agent-b", AdmittedFence: 5}
	wantStale(t, "Admit of an older token", g.Admit(ctx, tk("agent-c", 4)), r2)
	wantRejections(t, g, res, r1, r2)
	wantFloor(t, g, res, 5)
	mustCommit(t, g, tk("agent-b", 5), "b5")
	wantValues(t, g, res, "a1", "b5")
	// Admit on a resource never written.
	if err := g.Admit(ctx, fence.Token{Resource: "fresh-slot", HolderID: "agent-z", Fence: 9}); err != nil {
		t.Fatalf("Admit on a fresh resource = %v", err)
	}
	wantFloor(t, g, "fresh-slot", 9)
	wantValues(t, g, "fresh-slot")
}

// failedWrite: the gate's declared rule for a write that fails part way.
func failedWrite(t testing.TB, c Config) {
	g, _ := c.New(t, Options{})
	ctx := context.Background()
	mustCommit(t, g, tk("agent-a", 1), "a1")
	err := g.Commit(ctx, tk("agent-b", 2), Write{Value: "b2-part", Fail: true})
	var se *fence.StaleFenceError
	if err == nil || errors.As(err, &se) || isInvalidArgument(err) {
		t.Fatalf("a failing write: err = %v, want the write's failure", err)
	}
	wantRejections(t, g, res)
	switch c.FailedWrite {
	case RollsBack:
		wantFloor(t, g, res, 1)
		wantValues(t, g, res, "a1")
		// Nothing of b's write is in the store, so a is still the newest
		// holder whose writes are there, and may write again.
		mustCommit(t, g, tk("agent-a", 1), "a1-again")
		wantValues(t, g, res, "a1", "a1-again")
	case KeepsFloor:
		wantFloor(t, g, res, 2)
		wantValues(t, g, res, "a1", "b2-part")
		r := fence.Rejection{Seq: 1, Resource: res, RefusedHolderID: "agent-a", RefusedFence: 1, AdmittedHolderID: "agent-b", AdmittedFence: 2}
		wantStale(t, "the older fence after a failed newer write", g.Commit(ctx, tk("agent-a", 1), Write{Value: "a1-again"}), r)
		wantValues(t, g, res, "a1", "b2-part")
	}
	mustCommit(t, g, tk("agent-b", 2), "b2")
	wantFloor(t, g, res, 2)
}

// invalidInput: bad tokens and a missing write are refused before anything
// changes.
func invalidInput(t testing.TB, c Config) {
	g, _ := c.New(t, Options{})
	ctx := context.Background()
	mustCommit(t, g, tk("agent-a", 5), "a5")
	_ = g.Commit(ctx, tk("agent-z", 1), Write{Value: "z1"}) // one refusal in the log
	long := strings.Repeat("r", fence.MaxIDBytes+1)
	type badToken struct {
		name string
		tok  fence.Token
	}
	bad := []badToken{
		{"FenceZero", tk("agent-b", 0)},
		{"FenceAboveMax", tk("agent-b", fence.MaxFence+1)},
		{"FenceMaxUint64", tk("agent-b", ^uint64(0))},
		{"EmptyHolder", tk("", 6)},
		{"OversizedHolder", tk(strings.Repeat("h", fence.MaxIDBytes+1), 6)},
		{"EmptyResource", fence.Token{Resource: "", HolderID: "agent-b", Fence: 6}},
		{"OversizedResource", fence.Token{Resource: long, HolderID: "agent-b", Fence: 6}},
		// Below the floor and malformed: refused as malformed, not logged.
		{"StaleAndEmptyHolder", tk("", 1)},
	}
	ceiling := c.maxFence()
	if ceiling < fence.MaxFence {
		// Valid fences the gate cannot carry: refused as bad input too,
		// never cut down to something it can.
		bad = append(bad,
			badToken{"FenceAboveGateMax", tk("agent-b", ceiling+1)},
			badToken{"FenceMaxFenceAboveGateMax", tk("agent-b", fence.MaxFence)})
	}
	for _, b := range bad {
		before := snapshot(t, g, res)
		if err := g.Commit(ctx, b.tok, Write{Value: "bad"}); !isInvalidArgument(err) {
			t.Errorf("%s: Commit = %v, want an argument error", b.name, err)
		}
		if err := g.Admit(ctx, b.tok); !isInvalidArgument(err) {
			t.Errorf("%s: Admit = %v, want an argument error", b.name, err)
		}
		sameState(t, b.name, before, snapshot(t, g, res))
	}
	before := snapshot(t, g, res)
	for _, f := range []uint64{6, 1} { // would be admitted; would be refused
		if err := g.Commit(ctx, tk("agent-b", f), Write{Nil: true}); !isInvalidArgument(err) {
			t.Errorf("a missing write (fence %d): Commit = %v, want an argument error", f, err)
		}
	}
	sameState(t, "a missing write", before, snapshot(t, g, res))
	// The largest fence the gate can carry is admitted.
	mustCommit(t, g, tk("agent-m", ceiling), "max")
	wantFloor(t, g, res, ceiling)
}

// cancelledContext: a Commit whose context is already done changes nothing.
func cancelledContext(t testing.TB, c Config) {
	g, _ := c.New(t, Options{})
	mustCommit(t, g, tk("agent-a", 2), "a2")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, f := range []uint64{3, 1} {
		before := snapshot(t, g, res)
		err := g.Commit(ctx, tk("agent-b", f), Write{Value: "b"})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("fence %d with a cancelled context: err = %v, want context.Canceled", f, err)
		}
		sameState(t, fmt.Sprintf("fence %d with a cancelled context", f), before, snapshot(t, g, res))
	}
}

// rejectionLog: a capped gate keeps the newest MaxRejections refusals with
// their sequence numbers; an uncapped one keeps every refusal.
func rejectionLog(t testing.TB, c Config) {
	const max, n = 3, 5
	g, _ := c.New(t, Options{MaxRejections: max})
	mustCommit(t, g, tk("agent-b", 10), "b10")
	var all []fence.Rejection
	for i := range n {
		r := fence.Rejection{Seq: uint64(i + 1), Resource: res, RefusedHolderID: "agent-a", RefusedFence: uint64(i + 1), AdmittedHolderID: "agent-b", AdmittedFence: 10}
		wantStale(t, "refusal", g.Commit(context.Background(), tk("agent-a", uint64(i+1)), Write{Value: "a"}), r)
		all = append(all, r)
	}
	if c.Capped {
		wantRejections(t, g, res, all[n-max:]...)
	} else {
		wantRejections(t, g, res, all...)
	}
}

// rejectionPages: the log read a page at a time is the log read whole.
func rejectionPages(t testing.TB, c Config) {
	const max, n, limit = 5, 8, 3
	g, _ := c.New(t, Options{MaxRejections: max})
	p, ok := g.(Pager)
	if !ok {
		t.Fatalf("Config.Paged is set but the Gate (%T) is not a gatetest.Pager", g)
	}
	ctx := context.Background()
	mustCommit(t, g, tk("agent-b", 20), "b20")
	var all []fence.Rejection
	for i := range n {
		r := fence.Rejection{Seq: uint64(i + 1), Resource: res, RefusedHolderID: "agent-a", RefusedFence: uint64(i + 1), AdmittedHolderID: "agent-b", AdmittedFence: 20}
		wantStale(t, "refusal", g.Commit(ctx, tk("agent-a", uint64(i+1)), Write{Value: "a"}), r)
		all = append(all, r)
	}
	if c.Capped {
		all = all[n-max:]
	}
	page := func(after uint64, limit int) []fence.Rejection {
		t.Helper()
		got, err := p.RejectionsAfter(ctx, res, after, limit)
		if err != nil {
			t.Fatalf("RejectionsAfter(%d, %d): %v", after, limit, err)
		}
		if len(got) > limit {
			t.Fatalf("RejectionsAfter(%d, %d) returned %d refusals", after, limit, len(got))
		}
		return got
	}
	var got []fence.Rejection
	after := uint64(0)
	for range n + 1 {
		pg := page(after, limit)
		got = append(got, pg...)
		if len(pg) < limit {
			break
		}
		after = pg[len(pg)-1].Seq
	}
	if fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("pages of %d: %+v, want %+v", limit, got, all)
	}
	mid := all[1].Seq
	if got := page(mid, 100); fmt.Sprint(got) != fmt.Sprint(all[2:]) {
		t.Errorf("after %d: %+v, want %+v", mid, got, all[2:])
	}
	if got := page(0, 1); fmt.Sprint(got) != fmt.Sprint(all[:1]) {
		t.Errorf("after 0, limit 1: %+v, want %+v", got, all[:1])
	}
	if got := page(uint64(n), 10); len(got) != 0 {
		t.Errorf("after the last refusal: %+v", got)
	}
	if got, err := p.RejectionsAfter(ctx, "other-slot", 0, 10); err != nil || len(got) != 0 {
		t.Errorf("another resource: %+v, %v", got, err)
	}
	before := snapshot(t, g, res)
	if _, err := p.RejectionsAfter(ctx, res, 0, 0); !isInvalidArgument(err) {
		t.Errorf("limit 0: err = %v, want an argument error", err)
	}
	sameState(t, "a bad page", before, snapshot(t, g, res))
}

// attempt is one commit a writer made, and what became of it.
type attempt struct {
	Holder  string
	Fence   uint64
	Value   string
	Outcome string // "landed", "refused", "error: ..."
	Refusal fence.Rejection
}

// writeRandom commits n random fences, drifting upwards with jitter so that
// writers overtake each other and many commits are refused.
func writeRandom(ctx context.Context, g Gate, resource, holder string, seed uint64, n int, report func(start bool, a attempt)) []attempt {
	rng := rand.New(rand.NewPCG(seed, 0x9a7e))
	out := make([]attempt, 0, max(n, 0))
	for i := 0; n < 0 || i < n; i++ {
		f := uint64(1 + i + rng.IntN(12))
		a := attempt{Holder: holder, Fence: f, Value: value(holder, f, i)}
		if report != nil {
			report(true, a)
		}
		err := g.Commit(ctx, fence.Token{Resource: resource, HolderID: holder, Fence: f}, Write{Value: a.Value})
		var se *fence.StaleFenceError
		switch {
		case err == nil:
			a.Outcome = "landed"
		case errors.As(err, &se):
			a.Outcome = "refused"
			a.Refusal = se.Rejection
		default:
			a.Outcome = "error: " + err.Error()
		}
		if report != nil {
			report(false, a)
		}
		out = append(out, a)
	}
	return out
}

// checkHistory checks the store after writers made attempts: the values in
// landing order carry non-decreasing fences; every landed write is there
// exactly once and no refused one; every refusal was logged, sequence 1..n,
// each below the floor it met; the floor is the highest landed fence. An
// attempt in inflight (a killed writer's last commit, whose outcome nobody
// heard) may have landed, been refused and logged, or left nothing.
func checkHistory(t testing.TB, g Gate, resource string, attempts, inflight []attempt) {
	t.Helper()
	st := snapshot(t, g, resource)
	landed, refused, maybe := map[string]bool{}, map[string]attempt{}, map[string]attempt{}
	for _, a := range inflight {
		maybe[a.Value] = a
	}
	var maxLanded uint64
	for _, a := range attempts {
		switch {
		case a.Outcome == "landed":
			landed[a.Value] = true
			maxLanded = max(maxLanded, a.Fence)
		case a.Outcome == "refused":
			refused[a.Value] = a
			if a.Refusal.RefusedFence != a.Fence || a.Refusal.RefusedHolderID != a.Holder || a.Refusal.AdmittedFence <= a.Fence || a.Refusal.Resource != resource {
				t.Errorf("refusal of %s carries %+v", a.Value, a.Refusal)
			}
		default:
			t.Errorf("%s: %s", a.Value, a.Outcome)
		}
	}
	if len(refused) == 0 {
		t.Errorf("none of %d commits was refused: the writers never overtook each other", len(attempts))
	}
	seen := map[string]bool{}
	var prev uint64
	for i, v := range st.values {
		f, ok := fenceOf(v)
		if !ok {
			t.Errorf("value %d is %q, not one the writers made", i, v)
			continue
		}
		if seen[v] {
			t.Errorf("value %q landed twice", v)
		}
		seen[v] = true
		if f < prev {
			t.Errorf("value %q (fence %d) landed after a write with fence %d", v, f, prev)
		}
		prev = f
		_, inflight := maybe[v]
		switch {
		case landed[v]:
		case inflight:
			maxLanded = max(maxLanded, f)
		default:
			if _, r := refused[v]; r {
				t.Errorf("refused write %q landed", v)
			} else {
				t.Errorf("value %q landed but no writer reported it", v)
			}
		}
	}
	for v := range landed {
		if !seen[v] {
			t.Errorf("write %q was reported landed but is not in the store", v)
		}
	}
	for i, r := range st.rejections {
		if r.Seq != uint64(i+1) {
			t.Errorf("rejection %d has seq %d", i, r.Seq)
		}
		if r.RefusedFence >= r.AdmittedFence || r.Resource != resource {
			t.Errorf("rejection %+v", r)
		}
	}
	// The log holds exactly the refusals reported, plus perhaps one for
	// each in-flight attempt that did not land.
	reported := map[fence.Rejection]int{}
	for _, a := range refused {
		reported[a.Refusal]++
	}
	for _, r := range st.rejections {
		if reported[r] > 0 {
			reported[r]--
			continue
		}
		matched := false
		for v, a := range maybe {
			if a.Holder == r.RefusedHolderID && a.Fence == r.RefusedFence && !seen[v] {
				delete(maybe, v)
				matched = true
				break
			}
		}
		if !matched {
			t.Errorf("logged refusal %+v was not reported to any writer", r)
		}
	}
	for r, n := range reported {
		if n > 0 {
			t.Errorf("refusal %+v was reported to a writer but is not in the log", r)
		}
	}
	if st.floor != maxLanded {
		t.Errorf("floor %d, highest fence landed %d", st.floor, maxLanded)
	}
}

// concurrentWriters: goroutines committing random fences to one resource,
// through several handles when the gate has them.
func concurrentWriters(t testing.TB, c Config) {
	const writers, each = 6, 25
	g, addr := c.New(t, Options{MaxRejections: writers * each})
	handles := []Gate{g}
	if c.Attach != nil {
		handles = append(handles, c.Attach(t, addr), c.Attach(t, addr))
	}
	var mu sync.Mutex
	var all []attempt
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			got := writeRandom(context.Background(), handles[w%len(handles)], res, fmt.Sprintf("w%d", w), uint64(w), each, nil)
			mu.Lock()
			all = append(all, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	checkHistory(t, g, res, all, nil)
}

// restart: what the gate keeps survives a restart of its store.
func restart(t testing.TB, c Config) {
	g, addr := c.New(t, Options{})
	ctx := context.Background()
	mustCommit(t, g, tk("agent-a", 1), "a1")
	mustCommit(t, g, tk("agent-b", 2), "b2")
	r1 := fence.Rejection{Seq: 1, Resource: res, RefusedHolderID: "agent-a", RefusedFence: 1, AdmittedHolderID: "agent-b", AdmittedFence: 2}
	wantStale(t, "before the restart", g.Commit(ctx, tk("agent-a", 1), Write{Value: "a1-late"}), r1)
	if err := g.Admit(ctx, tk("agent-c", 3)); err != nil {
		t.Fatal(err)
	}
	c.Restart(t, addr)
	wantFloor(t, g, res, 3)
	wantValues(t, g, res, "a1", "b2")
	wantRejections(t, g, res, r1)
	r2 := fence.Rejection{Seq: 2, Resource: res, RefusedHolderID: "agent-b", RefusedFence: 2, AdmittedHolderID: "agent-c", AdmittedFence: 3}
	wantStale(t, "after the restart", g.Commit(ctx, tk("agent-b", 2), Write{Value: "b2-late"}), r2)
	mustCommit(t, g, tk("agent-c", 3), "c3")
	h := c.Attach
	if h != nil {
		wantValues(t, h(t, addr), res, "a1", "b2", "c3")
	}
}

// ShowTime is how long RaiseWaitsForEqualWrites gives a gate to admit a
// write it must not (a higher fence while equal-fence writes are in
// flight, an old fence after the higher one arrived) before it takes the
// gate to be waiting. It can only make the rule miss a break on a machine
// slower than that, never fail a correct gate.
var ShowTime = 2 * time.Second

// raiseWaitsForEqualWrites: writes with the floor's fence run (n at once);
// a higher fence arriving waits for all of them, then is admitted; an old
// fence arriving after it never starts.
func raiseWaitsForEqualWrites(t testing.TB, c Config) {
	g, _ := c.New(t, Options{})
	ctx := context.Background()
	n := 1
	if c.Shared {
		n = 8
	}
	mustCommit(t, g, tk("agent-a", 5), "a5")
	var inflight atomic.Int32
	entered := make(chan struct{}, n)
	release := make(chan struct{})
	equal := make(chan error, n)
	for i := range n {
		go func() {
			equal <- g.Commit(ctx, tk("agent-a", 5), Write{Value: value("agent-a", 5, i), Inside: func() {
				inflight.Add(1)
				entered <- struct{}{}
				<-release
				inflight.Add(-1)
			}})
		}()
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	deadline := time.After(time.Minute)
	for i := range n {
		select {
		case <-entered:
		case err := <-equal:
			t.Fatalf("an equal-fence write ended before it was released: %v", err)
		case <-deadline:
			t.Fatalf("only %d of %d writes with the floor's fence were admitted at once: the gate runs them one at a time", i, n)
		}
	}
	// The raise arrives while the n writes are in flight.
	var raiseSaw atomic.Int32
	raiseIn := make(chan struct{})
	raise := make(chan error, 1)
	go func() {
		raise <- g.Commit(ctx, tk("agent-b", 6), Write{Value: "b6", Inside: func() {
			raiseSaw.Store(inflight.Load())
			close(raiseIn)
		}})
	}()
	select {
	case <-raiseIn:
		t.Errorf("fence 6 was admitted while %d writes with fence 5 were in flight", raiseSaw.Load())
	case err := <-raise:
		t.Fatalf("fence 6 ended while writes with fence 5 were in flight: %v", err)
	case <-time.After(ShowTime):
	}
	// An old fence arriving after the higher one must not start.
	var lateRan atomic.Bool
	late := make(chan error, 1)
	if c.Unordered {
		late <- &fence.StaleFenceError{Rejection: fence.Rejection{Seq: 1, Resource: res, RefusedHolderID: "agent-a", RefusedFence: 5, AdmittedHolderID: "agent-b", AdmittedFence: 6}}
	} else {
		go func() {
			late <- g.Commit(ctx, tk("agent-a", 5), Write{Value: "a5-late", Inside: func() { lateRan.Store(true) }})
		}()
		select {
		case err := <-late:
			if lateRan.Load() {
				t.Errorf("a write with fence 5 started after fence 6 arrived (and returned %v)", err)
			}
			late <- err
		case <-time.After(ShowTime):
			if lateRan.Load() {
				t.Errorf("a write with fence 5 started after fence 6 arrived")
			}
		}
	}
	released = true
	close(release)
	for range n {
		if err := <-equal; err != nil {
			t.Errorf("a write with fence 5 admitted before the raise: %v", err)
		}
	}
	if err := <-raise; err != nil {
		t.Fatalf("Commit(b, 6) = %v", err)
	}
	if k := raiseSaw.Load(); k != 0 {
		t.Errorf("fence 6 was admitted while %d writes with fence 5 were still in flight", k)
	}
	err := <-late
	if lateRan.Load() {
		t.Errorf("a write with fence 5 ran after fence 6 arrived")
	}
	wantStale(t, "an old fence arriving after a raise", err,
		fence.Rejection{Seq: 1, Resource: res, RefusedHolderID: "agent-a", RefusedFence: 5, AdmittedHolderID: "agent-b", AdmittedFence: 6})
	wantFloor(t, g, res, 6)
	got, err := g.Values(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n+2 || got[0] != "a5" || got[n+1] != "b6" {
		t.Fatalf("values %q: want a5, the %d writes with fence 5, then b6", got, n)
	}
}
