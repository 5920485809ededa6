package gatetest_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/gatetest"
)

// memGate adapts core/fence.Gate: one Gate per resource, made on first use,
// and the values in a slice per resource in this process's memory (the
// resource the gate guards). Writes go through CommitContext.
type memGate struct {
	maxRej int
	mu     sync.Mutex
	gates  map[string]*fence.Gate
	values map[string][]string

	// breakRaiseAfter, for the deliberate break: check, write, and raise
	// the floor with Admit once the write succeeded (check-then-act),
	// instead of Commit doing all of it as one step.
	breakRaiseAfter bool
	// ceiling, if not 0, is the highest fence the adapter carries (as if
	// its protocol could not say more): a higher one is refused as bad
	// input before it reaches the gate.
	ceiling uint64
}

func (m *memGate) carry(tok fence.Token) error {
	if m.ceiling != 0 && tok.Fence > m.ceiling && tok.Validate() == nil {
		return &fence.ArgumentError{Pkg: "memgate", Arg: "token.fence", Reason: "must be at most the ceiling"}
	}
	return nil
}

func newMemGate(opts gatetest.Options) *memGate {
	return &memGate{maxRej: opts.MaxRejections, gates: map[string]*fence.Gate{}, values: map[string][]string{}}
}

func (m *memGate) gate(resource string) (*fence.Gate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.gates[resource]; g != nil {
		return g, nil
	}
	g, err := fence.NewGate(resource, fence.Options{MaxRejections: m.maxRej})
	if err != nil {
		return nil, err
	}
	m.gates[resource] = g
	return g, nil
}

var errWriteFailed = errors.New("the write failed after its first half")

func (m *memGate) Commit(ctx context.Context, tok fence.Token, w gatetest.Write) error {
	if err := m.carry(tok); err != nil {
		return err
	}
	g, err := m.gate(tok.Resource)
	if err != nil {
		return err
	}
	write := func(context.Context) error {
		m.mu.Lock()
		m.values[tok.Resource] = append(m.values[tok.Resource], w.Value)
		m.mu.Unlock()
		if w.Inside != nil {
			w.Inside()
		}
		if w.Fail {
			return errWriteFailed
		}
		return nil
	}
	if w.Nil {
		write = nil
	}
	if m.breakRaiseAfter && write != nil {
		if err := tok.Validate(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if ok, _ := g.WouldAdmit(tok); !ok {
			return g.Admit(tok) // refused and logged
		}
		if err := write(ctx); err != nil {
			return err
		}
		return g.Admit(tok)
	}
	return g.CommitContext(ctx, tok, write)
}

func (m *memGate) Admit(ctx context.Context, tok fence.Token) error {
	if err := m.carry(tok); err != nil {
		return err
	}
	g, err := m.gate(tok.Resource)
	if err != nil {
		return err
	}
	return g.Admit(tok)
}

func (m *memGate) Floor(ctx context.Context, resource string) (uint64, error) {
	g, err := m.gate(resource)
	if err != nil {
		return 0, err
	}
	return g.Floor(), nil
}

func (m *memGate) Rejections(ctx context.Context, resource string) ([]fence.Rejection, error) {
	g, err := m.gate(resource)
	if err != nil {
		return nil, err
	}
	return g.Rejections(), nil
}

// pagedGate is memGate with its log read a page at a time, by filtering
// it; offByOne is the deliberate break (a page starts at after, not above).
type pagedGate struct {
	*memGate
	offByOne bool
}

func (p pagedGate) RejectionsAfter(ctx context.Context, resource string, after uint64, limit int) ([]fence.Rejection, error) {
	if limit < 1 {
		return nil, &fence.ArgumentError{Pkg: "memgate", Arg: "limit", Reason: "must be at least 1"}
	}
	all, err := p.Rejections(ctx, resource)
	var out []fence.Rejection
	for _, r := range all {
		if (r.Seq > after || p.offByOne && r.Seq == after) && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, err
}

func (m *memGate) Values(ctx context.Context, resource string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.values[resource]...), nil
}

func memConfig(brk bool) gatetest.Config {
	return gatetest.Config{
		New: func(t testing.TB, opts gatetest.Options) (gatetest.Gate, string) {
			g := newMemGate(opts)
			g.breakRaiseAfter = brk
			return g, ""
		},
		FailedWrite: gatetest.KeepsFloor,
		Capped:      true,
		Inside:      true,
		Shared:      true,
	}
}

// The in-memory gate of core/fence passes the suite. It lives in one
// process's memory, so the rules with writer processes do not apply (each
// process would have its own gate: that is why the other gates exist).
func TestMemoryGate(t *testing.T) {
	gatetest.Run(t, memConfig(false))
}

// The deliberate break: a gate that writes first and raises the floor after
// the write (a check-then-act gate) fails the suite: an older fence arriving
// while the write runs lands after it, and a failed write leaves the floor
// where it was although the resource holds part of it.
func TestMemoryGateBreakCaught(t *testing.T) {
	got := gatetest.Failures(t, memConfig(true))
	for _, rule := range []string{"FloorRaisedBeforeWrite", "FailedWrite", "RaiseWaitsForEqualWrites"} {
		if len(got[rule]) == 0 {
			t.Errorf("rule %s did not catch a gate that raises the floor after the write; failures: %v", rule, got)
		}
	}
	if len(gatetest.Failures(t, memConfig(false))) != 0 {
		t.Errorf("the unbroken gate fails: %v", gatetest.Failures(t, memConfig(false)))
	}
}

// A gate that declares a ceiling below fence.MaxFence (Config.MaxFence) must
// refuse every fence above it as bad input and admit the ceiling itself: one
// that carries the fences above it anyway, or refuses its own ceiling, fails
// InvalidInput.
func TestMaxFenceDeclared(t *testing.T) {
	const ceiling = 999_999_999_999_999
	with := func(carried uint64) gatetest.Config {
		cfg := memConfig(false)
		cfg.MaxFence = ceiling
		next := cfg.New
		cfg.New = func(t testing.TB, o gatetest.Options) (gatetest.Gate, string) {
			g, addr := next(t, o)
			g.(*memGate).ceiling = carried
			return g, addr
		}
		return cfg
	}
	if got := gatetest.Failures(t, with(ceiling)); len(got) != 0 {
		t.Errorf("a gate that carries fences up to its declared ceiling fails: %v", got)
	}
	for _, carried := range []uint64{0 /* every fence */, ceiling - 1} {
		got := gatetest.Failures(t, with(carried))
		if len(got["InvalidInput"]) == 0 || len(got) != 1 {
			t.Errorf("carrying fences up to %d with a declared ceiling of %d: failures %v, want InvalidInput only", carried, uint64(ceiling), got)
		}
	}
}

// The Restart rule can fail: a gate whose store forgets its floors and its
// log when restarted (a floor kept only in memory) is caught.
func TestRestartCatchesAForgettingStore(t *testing.T) {
	cfg := memConfig(false)
	var made sync.Map // "" -> *memGate of the current rule
	next := cfg.New
	cfg.New = func(t testing.TB, o gatetest.Options) (gatetest.Gate, string) {
		g, addr := next(t, o)
		made.Store(addr, g)
		return g, addr
	}
	cfg.Restart = func(t testing.TB, addr string) {
		v, _ := made.Load(addr)
		g := v.(*memGate)
		g.mu.Lock()
		g.gates = map[string]*fence.Gate{}
		g.mu.Unlock()
	}
	got := gatetest.Failures(t, cfg)
	if len(got["Restart"]) == 0 || len(got) != 1 {
		t.Errorf("failures %v, want Restart only", got)
	}
}

// RejectionPages checks a gate's pages against its whole log: a gate whose
// page starts at the sequence number asked instead of after it fails.
func TestRejectionPages(t *testing.T) {
	for _, offByOne := range []bool{false, true} {
		cfg := memConfig(false)
		cfg.Paged = true
		cfg.New = func(t testing.TB, o gatetest.Options) (gatetest.Gate, string) {
			return pagedGate{newMemGate(o), offByOne}, ""
		}
		got := gatetest.Failures(t, cfg)
		if offByOne && (len(got["RejectionPages"]) == 0 || len(got) != 1) {
			t.Errorf("off by one: failures %v, want RejectionPages only", got)
		}
		if !offByOne && len(got) != 0 {
			t.Errorf("failures %v", got)
		}
	}
}

// Failures itself: a rule whose gate returns errors for everything is
// reported, and Fatal ends only that rule.
func TestFailuresRecordsEveryRule(t *testing.T) {
	cfg := gatetest.Config{
		New: func(t testing.TB, opts gatetest.Options) (gatetest.Gate, string) {
			return brokenGate{}, ""
		},
		FailedWrite: gatetest.RollsBack,
	}
	got := gatetest.Failures(t, cfg)
	for _, rule := range []string{"FloorRaisedBeforeWrite", "EqualFenceAdmitted", "LowerFenceRefused", "AdmitRaisesWithoutWriting", "FailedWrite", "InvalidInput", "CancelledContext", "RejectionLog", "ConcurrentWriters"} {
		if len(got[rule]) == 0 {
			t.Errorf("rule %s reported nothing against a gate that fails every call", rule)
		}
	}
	if _, ok := got["TwoProcesses"]; ok {
		t.Error("Failures ran a process rule")
	}
}

type brokenGate struct{}

var errBroken = errors.New("broken")

func (brokenGate) Commit(context.Context, fence.Token, gatetest.Write) error { return errBroken }
func (brokenGate) Admit(context.Context, fence.Token) error                  { return errBroken }
func (brokenGate) Floor(context.Context, string) (uint64, error)             { return 0, errBroken }
func (brokenGate) Rejections(context.Context, string) ([]fence.Rejection, error) {
	return nil, errBroken
}
func (brokenGate) Values(context.Context, string) ([]string, error) { return nil, errBroken }
