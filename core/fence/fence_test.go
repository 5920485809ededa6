package fence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/internal/cputime"
)

func newGate(t testing.TB, resource string, floor uint64) *fence.Gate {
	t.Helper()
	g, err := fence.NewGate(resource, fence.Options{InitialFloor: floor})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func tok(holder string, f uint64) fence.Token {
	return fence.Token{Resource: "deploy-slot", HolderID: holder, Fence: f}
}

// snapshot is everything observable about a gate.
type snapshot struct {
	floor      uint64
	rejections []fence.Rejection
}

func snap(g *fence.Gate) snapshot { return snapshot{g.Floor(), g.Rejections()} }

func sameSnapshot(t *testing.T, before, after snapshot) {
	t.Helper()
	if before.floor != after.floor || len(before.rejections) != len(after.rejections) {
		t.Fatalf("gate changed: floor %d -> %d, %d -> %d rejections",
			before.floor, after.floor, len(before.rejections), len(after.rejections))
	}
}

// op is one step of a gate scenario: a commit (write true) or an admit.
type op struct {
	name      string
	token     fence.Token
	admit     bool
	failWith  error  // the write callback returns this
	wantErr   string // "", "stale", "mismatch", "arg"
	wantFloor uint64
	wantLog   int
	wantRan   bool
}

// runOps runs steps against g in order, checking after each one what ran,
// the floor and the length of the rejections log.
func runOps(t *testing.T, g *fence.Gate, steps []op) {
	t.Helper()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			t.Helper()
			ran := false
			var err error
			if s.admit {
				err = g.Admit(s.token)
			} else {
				err = g.Commit(s.token, func() error { ran = true; return s.failWith })
			}
			checkErr(t, err, s.wantErr, s.failWith)
			if ran != s.wantRan {
				t.Fatalf("write ran = %v, want %v", ran, s.wantRan)
			}
			if g.Floor() != s.wantFloor {
				t.Fatalf("floor = %d, want %d", g.Floor(), s.wantFloor)
			}
			if n := g.RejectionCount(); n != s.wantLog {
				t.Fatalf("%d rejections logged, want %d", n, s.wantLog)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string, callbackErr error) {
	t.Helper()
	var stale *fence.StaleFenceError
	var mis *fence.ResourceMismatchError
	var arg *fence.ArgumentError
	switch want {
	case "":
		if callbackErr != nil {
			if !errors.Is(err, callbackErr) {
				t.Fatalf("err = %v, want the callback's error %v", err, callbackErr)
			}
		} else if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
	case "stale":
		if !errors.As(err, &stale) {
			t.Fatalf("err = %v (%T), want *fence.StaleFenceError", err, err)
		}
	case "mismatch":
		if !errors.As(err, &mis) {
			t.Fatalf("err = %v (%T), want *fence.ResourceMismatchError", err, err)
		}
	case "arg":
		if !errors.As(err, &arg) || !arg.InvalidArgument() {
			t.Fatalf("err = %v (%T), want *fence.ArgumentError", err, err)
		}
	default:
		t.Fatalf("bad want %q", want)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "fence: ") && want != "" {
		t.Fatalf("message %q lacks the package prefix", err)
	}
}

var errWrite = errors.New("disk full")

// Fence ordering: a generation, once admitted, refuses every older one.
func TestGateFenceOrdering(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	runOps(t, g, []op{
		{name: "A1Admitted", token: tok("a", 1), wantFloor: 1, wantRan: true},
		{name: "A1Again", token: tok("a", 1), wantFloor: 1, wantRan: true},
		{name: "B2RaisesFloor", token: tok("b", 2), wantFloor: 2, wantRan: true},
		{name: "A1Stale", token: tok("a", 1), wantErr: "stale", wantFloor: 2, wantLog: 1},
		{name: "A1StaleAgain", token: tok("a", 1), wantErr: "stale", wantFloor: 2, wantLog: 2},
		{name: "C5SkipsAhead", token: tok("c", 5), wantFloor: 5, wantLog: 2, wantRan: true},
		{name: "B2NowStale", token: tok("b", 2), wantErr: "stale", wantFloor: 5, wantLog: 3},
		{name: "C5Writes", token: tok("c", 5), wantFloor: 5, wantLog: 3, wantRan: true},
		{name: "D6CallbackFails", token: tok("d", 6), failWith: errWrite, wantFloor: 6, wantLog: 3, wantRan: true},
		{name: "C5AfterFailedWrite", token: tok("c", 5), wantErr: "stale", wantFloor: 6, wantLog: 4},
		{name: "D6Retries", token: tok("d", 6), wantFloor: 6, wantLog: 4, wantRan: true},
	})
}

func TestRejectionLogEntries(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("agent-b", 8), nop))
	err1 := g.Commit(tok("agent-a", 7), nop)
	must(t, g.Commit(tok("agent-c", 9), nop))
	err2 := g.Commit(tok("agent-a", 7), nop)
	want := []fence.Rejection{
		{Seq: 1, Resource: "deploy-slot", RefusedHolderID: "agent-a", RefusedFence: 7, AdmittedHolderID: "agent-b", AdmittedFence: 8},
		{Seq: 2, Resource: "deploy-slot", RefusedHolderID: "agent-a", RefusedFence: 7, AdmittedHolderID: "agent-c", AdmittedFence: 9},
	}
	got := g.Rejections()
	if len(got) != len(want) {
		t.Fatalf("log = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rejection %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for i, err := range []error{err1, err2} {
		var se *fence.StaleFenceError
		if !errors.As(err, &se) || se.Rejection != want[i] {
			t.Errorf("error %d = %v, want the log entry %+v", i, err, want[i])
		}
	}
	msg := err2.Error()
	for _, part := range []string{`"agent-a"`, `"agent-c"`, "7", "9", "#2", `"deploy-slot"`} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q lacks %s", msg, part)
		}
	}
	// The log is a copy: changing it changes nothing in the gate.
	got[0].RefusedHolderID = "forged"
	if g.Rejections()[0].RefusedHolderID != "agent-a" {
		t.Fatal("Rejections returned the gate's own slice")
	}
}

func TestInitialFloor(t *testing.T) {
	g := newGate(t, "deploy-slot", 5)
	runOps(t, g, []op{
		{name: "BelowPersistedFloor", token: tok("old", 4), wantErr: "stale", wantFloor: 5, wantLog: 1},
		{name: "AtFloor", token: tok("new", 5), wantFloor: 5, wantLog: 1, wantRan: true},
		{name: "AboveFloor", token: tok("newer", 6), wantFloor: 6, wantLog: 1, wantRan: true},
	})
	r := g.Rejections()[0]
	if r.AdmittedHolderID != "" || r.AdmittedFence != 5 {
		t.Fatalf("refusal before any admit = %+v", r)
	}
	var se *fence.StaleFenceError
	if err := g.Commit(tok("old", 4), nop); !errors.As(err, &se) || se.AdmittedHolderID != "newer" {
		t.Fatalf("err = %v", err)
	}
	g2 := newGate(t, "deploy-slot", 5)
	err := g2.Commit(tok("old", 4), nop)
	if !strings.Contains(err.Error(), "the initial floor") {
		t.Fatalf("refusal against an unclaimed initial floor says %q", err)
	}
	// Claiming the floor's own fence records the claimant.
	must(t, g2.Commit(tok("heir", 5), nop))
	err = g2.Commit(tok("old", 4), nop)
	if !errors.As(err, &se) || se.AdmittedHolderID != "heir" {
		t.Fatalf("err = %v", err)
	}
}

// Admit lets a coordinator push the new generation at reassignment time, so
// the stale holder is refused before the new holder has written anything.
func TestAdmitRaisesFloorAheadOfWrites(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	runOps(t, g, []op{
		{name: "A1Writes", token: tok("a", 1), wantFloor: 1, wantRan: true},
		{name: "AdmitB2", token: tok("b", 2), admit: true, wantFloor: 2},
		{name: "A1RefusedBeforeBWrote", token: tok("a", 1), wantErr: "stale", wantFloor: 2, wantLog: 1},
		{name: "B2Writes", token: tok("b", 2), wantFloor: 2, wantLog: 1, wantRan: true},
		{name: "AdmitStaleA1", token: tok("a", 1), admit: true, wantErr: "stale", wantFloor: 2, wantLog: 2},
		{name: "AdmitSameB2", token: tok("b", 2), admit: true, wantFloor: 2, wantLog: 2},
	})
	if r := g.Rejections()[0]; r.AdmittedHolderID != "b" || r.RefusedHolderID != "a" {
		t.Fatalf("rejection = %+v", r)
	}
}

// Without Admit the stale holder that writes first is admitted: fencing does
// not make the handover atomic.
func TestStaleWriteBeforeNewHolderIsAdmitted(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	runOps(t, g, []op{
		{name: "A1", token: tok("a", 1), wantFloor: 1, wantRan: true},
		{name: "StaleA1StillAdmitted", token: tok("a", 1), wantFloor: 1, wantRan: true},
		{name: "B2", token: tok("b", 2), wantFloor: 2, wantRan: true},
		{name: "StaleA1NowRefused", token: tok("a", 1), wantErr: "stale", wantFloor: 2, wantLog: 1},
	})
}

// Bad input: a clear error, the write does not run, nothing changes.
func TestGateBadInput(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("a", 3), nop))
	cases := []struct {
		name  string
		token fence.Token
		nilFn bool
		want  string
		text  string
	}{
		{"OtherResource", fence.Token{Resource: "db", HolderID: "a", Fence: 9}, false, "mismatch", `token for resource "db" presented to the gate of "deploy-slot"`},
		{"OtherResourceStaleFence", fence.Token{Resource: "db", HolderID: "a", Fence: 1}, false, "mismatch", `"db"`},
		{"EmptyResource", fence.Token{HolderID: "a", Fence: 9}, false, "arg", "token.resource"},
		{"EmptyHolder", fence.Token{Resource: "deploy-slot", Fence: 9}, false, "arg", "token.holderId"},
		{"ZeroFence", fence.Token{Resource: "deploy-slot", HolderID: "a"}, false, "arg", "token.fence"},
		{"NilCallback", tok("a", 9), true, "arg", "write must not be nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snap(g)
			ran := false
			write := func() error { ran = true; return nil }
			if tc.nilFn {
				write = nil
			}
			err := g.Commit(tc.token, write)
			checkErr(t, err, tc.want, nil)
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("message %q lacks %q", err, tc.text)
			}
			if ran {
				t.Fatal("write ran")
			}
			sameSnapshot(t, before, snap(g))
			if !tc.nilFn {
				checkErr(t, g.Admit(tc.token), tc.want, nil)
				sameSnapshot(t, before, snap(g))
				ok, err := g.WouldAdmit(tc.token)
				checkErr(t, err, tc.want, nil)
				if ok {
					t.Fatal("WouldAdmit = true with an error")
				}
			}
		})
	}
	var ia interface{ InvalidArgument() bool }
	if err := g.Commit(fence.Token{Resource: "db", HolderID: "a", Fence: 9}, nop); !errors.As(err, &ia) || !ia.InvalidArgument() {
		t.Fatalf("mismatch is not marked as a caller error: %v", err)
	}
}

func TestNewGateEmptyResource(t *testing.T) {
	g, err := fence.NewGate("", fence.Options{})
	if g != nil {
		t.Fatal("returned a gate with the error")
	}
	checkErr(t, err, "arg", nil)
}

// The floor is raised before the callback runs and stays raised when it
// panics; the gate stays usable.
func TestFloorStaysRaisedAfterPanic(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("a", 1), nop))
	var floorInside uint64
	func() {
		defer func() {
			if r := recover(); r != "half written" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = g.Commit(tok("b", 2), func() error {
			floorInside = g.Floor()
			panic("half written")
		})
		t.Fatal("Commit returned after a panicking write")
	}()
	if floorInside != 2 {
		t.Fatalf("floor inside the callback = %d, want 2 (raised before it runs)", floorInside)
	}
	if g.Floor() != 2 {
		t.Fatalf("floor after panic = %d, want 2", g.Floor())
	}
	err := g.Commit(tok("a", 1), nop)
	checkErr(t, err, "stale", nil)
	ran := false
	must(t, g.Commit(tok("b", 2), func() error { ran = true; return nil }))
	if !ran {
		t.Fatal("gate unusable after a panicking write")
	}
}

// A reentrant commit with an older fence from inside the callback is refused
// at once and logged; the outer write completes.
func TestReentrantOlderFenceRefused(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	must(t, g.Commit(tok("a", 1), nop))
	var inner error
	innerRan := false
	must(t, g.Commit(tok("b", 2), func() error {
		inner = g.Commit(tok("a", 1), func() error { innerRan = true; return nil })
		return nil
	}))
	checkErr(t, inner, "stale", nil)
	if innerRan {
		t.Fatal("reentrant stale write ran")
	}
	r := g.Rejections()
	if len(r) != 1 || r[0].RefusedFence != 1 || r[0].AdmittedFence != 2 || r[0].AdmittedHolderID != "b" {
		t.Fatalf("log = %+v", r)
	}
}

func TestWouldAdmitIsAdvisory(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	ok, err := g.WouldAdmit(tok("a", 1))
	if err != nil || !ok {
		t.Fatalf("WouldAdmit = %v, %v", ok, err)
	}
	// The answer is stale as soon as another holder writes.
	must(t, g.Commit(tok("b", 2), nop))
	err = g.Commit(tok("a", 1), nop)
	checkErr(t, err, "stale", nil)
	ok, _ = g.WouldAdmit(tok("a", 1))
	if ok {
		t.Fatal("WouldAdmit = true below the floor")
	}
	if g.RejectionCount() != 1 {
		t.Fatal("WouldAdmit logged a rejection")
	}
	if g.Resource() != "deploy-slot" {
		t.Fatal(g.Resource())
	}
}

func TestTokenString(t *testing.T) {
	if got := tok("a", 7).String(); got != `"a"@"deploy-slot"#7` {
		t.Fatal(got)
	}
}

// Many goroutines commit with different fences at once. Writes run one at a
// time (the race detector checks the unguarded log), in non-decreasing fence
// order, so no write runs after a write with a higher fence began; every
// refusal is logged; the highest fence always writes.
func TestGateConcurrentCommits(t *testing.T) {
	const writers, perWriter = 32, 20
	rng := rand.New(rand.NewPCG(1, 2))
	fences := rng.Perm(writers)
	g := newGate(t, "deploy-slot", 0)
	var ran []uint64 // appended inside the gate only: no lock on purpose
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for w := 0; w < writers; w++ {
		f := uint64(fences[w] + 1)
		wg.Go(func() {
			<-start
			for i := 0; i < perWriter; i++ {
				err := g.Commit(fence.Token{Resource: "deploy-slot", HolderID: "w", Fence: f}, func() error {
					ran = append(ran, f)
					return nil
				})
				var se *fence.StaleFenceError
				switch {
				case err == nil:
				case errors.As(err, &se):
					if se.RefusedFence != f || se.AdmittedFence <= f {
						t.Errorf("refusal %+v for fence %d", se.Rejection, f)
					}
					mu.Lock()
					refused++
					mu.Unlock()
				default:
					t.Error(err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for i := 1; i < len(ran); i++ {
		if ran[i] < ran[i-1] {
			t.Fatalf("write with fence %d ran after a write with fence %d began", ran[i], ran[i-1])
		}
	}
	if refused == 0 {
		t.Fatal("no commit was refused: the writers never overlapped")
	}
	if len(ran)+refused != writers*perWriter {
		t.Fatalf("%d ran + %d refused != %d", len(ran), refused, writers*perWriter)
	}
	if g.RejectionCount() != refused {
		t.Fatalf("log has %d entries for %d refusals", g.RejectionCount(), refused)
	}
	if len(ran) == 0 || ran[len(ran)-1] != writers || g.Floor() != writers {
		t.Fatalf("highest fence did not write last: floor %d, tail %v", g.Floor(), ran[max(0, len(ran)-3):])
	}
	for i, r := range g.Rejections() {
		if r.Seq != uint64(i+1) {
			t.Fatalf("rejection %d has seq %d", i, r.Seq)
		}
	}
}

// A writer blocked on the gate while a newer fence is admitted is refused
// when its turn comes, even though it passed the first check.
func TestWaitingOlderWriteRefusedAfterNewerBegins(t *testing.T) {
	g := newGate(t, "deploy-slot", 0)
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- g.Commit(tok("b", 2), func() error { close(inside); <-release; return nil })
	}()
	<-inside
	// fence 2 is writing; fence 3 raises the floor and queues behind it.
	queued := make(chan error)
	go func() { queued <- g.Commit(tok("c", 3), nop) }()
	close(release)
	must(t, <-done)
	must(t, <-queued)
	checkErr(t, g.Commit(tok("b", 2), nop), "stale", nil)
}

func nop() error { return nil }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// baseline is the cheapest correct gate: a mutex around compare, raise and
// call. BenchmarkGateCommitAdmitted is measured against it.
type baseline struct {
	mu    sync.Mutex
	floor uint64
}

var errStale = errors.New("stale")

//go:noinline
func (b *baseline) commit(f uint64, write func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f < b.floor {
		return errStale
	}
	b.floor = f
	return write()
}

var sink int

// benchCommits runs commit in b.Loop, with its allocations and CPU time.
func benchCommits(b *testing.B, commit func() error) {
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		if err := commit(); err != nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, cpu)
}

func BenchmarkGateCommitAdmitted(b *testing.B) {
	g := newGate(b, "deploy-slot", 0)
	tk := tok("a", 1)
	n := 0
	write := func() error { n++; return nil }
	benchCommits(b, func() error { return g.Commit(tk, write) })
	sink = n
}

// CommitContext on a free gate: the write's context (made only if the write
// looks at it), the record of the running write and its start time.
func BenchmarkGateCommitContextAdmitted(b *testing.B) {
	g := newGate(b, "deploy-slot", 0)
	tk := tok("a", 1)
	n := 0
	write := func(context.Context) error { n++; return nil }
	ctx := context.Background()
	benchCommits(b, func() error { return g.CommitContext(ctx, tk, write) })
	sink = n
}

// The same with a write that looks at its context (which makes it).
func BenchmarkGateCommitContextLooksAtContext(b *testing.B) {
	g := newGate(b, "deploy-slot", 0)
	tk := tok("a", 1)
	n := 0
	write := func(ctx context.Context) error {
		if ctx.Err() == nil {
			n++
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchCommits(b, func() error { return g.CommitContext(ctx, tk, write) })
	sink = n
}

func BenchmarkBaselineMutexCommit(b *testing.B) {
	var g baseline
	n := 0
	write := func() error { n++; return nil }
	benchCommits(b, func() error { return g.commit(1, write) })
	sink = n
}

func BenchmarkGateCommitAdmittedParallel(b *testing.B) {
	g := newGate(b, "deploy-slot", 0)
	tk := tok("a", 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.Commit(tk, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkBaselineMutexCommitParallel(b *testing.B) {
	var g baseline
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.commit(1, nop); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The refused path allocates the log entry and the error; measured for
// reference.
func BenchmarkGateCommitRefused(b *testing.B) {
	g := newGate(b, "deploy-slot", 0)
	must(b, g.Commit(tok("b", 2), nop))
	stale := tok("a", 1)
	b.ReportAllocs()
	for b.Loop() {
		if g.Commit(stale, nop) == nil {
			b.Fatal("admitted")
		}
	}
}
