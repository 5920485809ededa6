package clock_test

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lease-fence/lease-fence/core/clock"
)

// Fixed instants used across the tests.
const (
	t0 = 0.0
	t1 = 40.0
	t2 = 900.0
	t3 = 1000.0
)

func mustManual(t *testing.T, domain string, opts clock.ManualOptions) *clock.Manual {
	t.Helper()
	m, err := clock.NewManual(domain, opts)
	if err != nil {
		t.Fatalf("NewManual(%q, %+v): %v", domain, opts, err)
	}
	return m
}

func mustNow(t *testing.T, c clock.Clock) clock.Instant {
	t.Helper()
	now, err := c.Now()
	if err != nil {
		t.Fatalf("%s.Now: %v", c.Domain(), err)
	}
	return now
}

func wantDomainError(t *testing.T, err error, want, got string) {
	t.Helper()
	var de *clock.DomainError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v (%T), want *clock.DomainError", err, err)
	}
	if de.Want != want || de.Got != got {
		t.Fatalf("DomainError{Want: %q, Got: %q}, want {%q, %q}", de.Want, de.Got, want, got)
	}
	if !strings.HasPrefix(err.Error(), "clock: ") || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), got) {
		t.Fatalf("message %q does not name both domains", err.Error())
	}
}

func wantReadingError(t *testing.T, err error, problem clock.ReadingProblem) *clock.ReadingError {
	t.Helper()
	var re *clock.ReadingError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v (%T), want *clock.ReadingError", err, err)
	}
	if re.Problem != problem {
		t.Fatalf("Problem = %q, want %q", re.Problem, problem)
	}
	return re
}

func wantArgumentError(t *testing.T, err error, arg string) {
	t.Helper()
	var ae *clock.ArgumentError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *clock.ArgumentError", err, err)
	}
	if ae.Arg != arg {
		t.Fatalf("ArgumentError.Arg = %q, want %q (%v)", ae.Arg, arg, err)
	}
	if !ae.InvalidArgument() {
		t.Fatal("InvalidArgument() = false")
	}
}

func TestSinceSameDomain(t *testing.T) {
	a, b := clock.At("agent", t1), clock.At("agent", t2)
	d, err := b.Since(a)
	if err != nil || d != t2-t1 {
		t.Fatalf("Since = %v, %v; want %v", d, err, t2-t1)
	}
	d, err = a.Since(b)
	if err != nil || d != t1-t2 {
		t.Fatalf("reverse Since = %v, %v; want %v", d, err, t1-t2)
	}
	dur, err := b.Duration(a)
	if err != nil || dur != 860*time.Millisecond {
		t.Fatalf("Duration = %v, %v", dur, err)
	}
}

// Clock domains: every way of measuring one domain against another is an
// error, never a number.
func TestCrossDomainIsAnError(t *testing.T) {
	agent, coord := clock.At("agent", t1), clock.At("coordinator", t1)
	cases := []struct {
		name string
		run  func() (any, error)
		want string
		got  string
	}{
		{"Since", func() (any, error) { return agent.Since(coord) }, "agent", "coordinator"},
		{"SinceReverse", func() (any, error) { return coord.Since(agent) }, "coordinator", "agent"},
		{"Duration", func() (any, error) { return agent.Duration(coord) }, "agent", "coordinator"},
		{"Before", func() (any, error) { return agent.Before(coord) }, "coordinator", "agent"},
		{"SameMillisStillRefused", func() (any, error) { return clock.At("a", 5).Since(clock.At("b", 5)) }, "a", "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.run()
			wantDomainError(t, err, tc.want, tc.got)
			switch x := v.(type) {
			case float64:
				if x != 0 {
					t.Fatalf("returned %v along with the error", x)
				}
			case time.Duration:
				if x != 0 {
					t.Fatalf("returned %v along with the error", x)
				}
			case bool:
				if x {
					t.Fatal("returned true along with the error")
				}
			}
		})
	}
}

func TestBefore(t *testing.T) {
	steps := []struct {
		a, b float64
		want bool
	}{{t0, t1, true}, {t1, t0, false}, {t1, t1, false}}
	for _, s := range steps {
		got, err := clock.At("d", s.a).Before(clock.At("d", s.b))
		if err != nil || got != s.want {
			t.Errorf("%v.Before(%v) = %v, %v; want %v", s.a, s.b, got, err, s.want)
		}
	}
}

func TestAddKeepsDomain(t *testing.T) {
	a := clock.At("agent", t1)
	if got := a.AddMillis(960); got != clock.At("agent", t3) {
		t.Fatalf("AddMillis = %v", got)
	}
	if got := a.Add(960 * time.Millisecond); got != clock.At("agent", t3) {
		t.Fatalf("Add = %v", got)
	}
	if got := a.Add(-40 * time.Millisecond); got != clock.At("agent", t0) {
		t.Fatalf("Add negative = %v", got)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		in   clock.Instant
		ok   bool
	}{
		{"Good", clock.At("d", 1.5), true},
		{"Zero", clock.Instant{}, false},
		{"EmptyDomain", clock.At("", 1), false},
		{"NaN", clock.At("d", math.NaN()), false},
		{"PosInf", clock.At("d", math.Inf(1)), false},
		{"NegInf", clock.At("d", math.Inf(-1)), false},
		{"Negative", clock.At("d", -5), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.Validate()
			if tc.ok {
				if err != nil {
					t.Fatalf("Validate(%v) = %v", tc.in, err)
				}
				return
			}
			wantArgumentError(t, err, "instant")
		})
	}
}

func TestStringAndFormat(t *testing.T) {
	if got := clock.At("agent-a", 1234.5).String(); got != `1234.5ms@"agent-a"` {
		t.Fatalf("String = %q", got)
	}
	a, b := 0.1, 0.2
	if got := clock.FormatMillis(a + b); got != "0.30000000000000004" {
		t.Fatalf("FormatMillis = %q", got)
	}
}

func TestMillisConversions(t *testing.T) {
	if got := clock.Millis(1500 * time.Microsecond); got != 1.5 {
		t.Fatalf("Millis = %v", got)
	}
	cases := []struct {
		ms   float64
		want time.Duration
	}{
		{1.5, 1500 * time.Microsecond},
		{-2, -2 * time.Millisecond},
		{0.0000004, 0},
		{0.0000006, 1},
		{1e300, math.MaxInt64},
		{-1e300, math.MinInt64},
		{math.Inf(1), math.MaxInt64},
		{math.NaN(), 0},
	}
	for _, c := range cases {
		if got := clock.FromMillis(c.ms); got != c.want {
			t.Errorf("FromMillis(%v) = %v, want %v", c.ms, got, c.want)
		}
	}
}

func TestNewGuardedArguments(t *testing.T) {
	if _, err := clock.New("", func() float64 { return 0 }); err == nil {
		t.Fatal("empty domain accepted")
	} else {
		wantArgumentError(t, err, "domain")
	}
	if _, err := clock.New("d", nil); err == nil {
		t.Fatal("nil source accepted")
	} else {
		wantArgumentError(t, err, "read")
	}
}

// A guarded clock refuses bad readings and keeps its last good reading, so
// the next good reading is compared against it, not against the bad one.
func TestGuardRejectsBadReadings(t *testing.T) {
	steps := []struct {
		name    string
		reading float64
		problem clock.ReadingProblem // empty: accepted
	}{
		{"t0", t0, ""},
		{"t1", t1, ""},
		{"NaN", math.NaN(), clock.NotANumber},
		{"PlusInf", math.Inf(1), clock.Infinite},
		{"MinusInf", math.Inf(-1), clock.Infinite},
		{"BackwardsToT0", t0, clock.Backwards},
		{"RepeatT1", t1, ""},
		{"BackwardsByAHair", t1 - 1e-9, clock.Backwards},
		{"t2", t2, ""},
		{"NTPStepBack", t1, clock.Backwards},
		{"t3", t3, ""},
	}
	var next float64
	g, err := clock.New("wall", func() float64 { return next })
	if err != nil {
		t.Fatal(err)
	}
	lastGood := math.NaN()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			next = s.reading
			now, err := g.Now()
			if s.problem == "" {
				if err != nil || now != clock.At("wall", s.reading) {
					t.Fatalf("Now = %v, %v; want %v", now, err, s.reading)
				}
				lastGood = s.reading
				return
			}
			re := wantReadingError(t, err, s.problem)
			if now != (clock.Instant{}) {
				t.Fatalf("returned %v with the error", now)
			}
			if re.Domain != "wall" || !strings.Contains(re.Error(), `"wall"`) {
				t.Fatalf("error does not name the domain: %v", re)
			}
			if s.problem == clock.Backwards && (re.Previous != lastGood || re.Value != s.reading) {
				t.Fatalf("Backwards error %+v, want previous %v value %v", re, lastGood, s.reading)
			}
		})
	}
}

func TestMonotonic(t *testing.T) {
	m, err := clock.NewMonotonic("host")
	if err != nil {
		t.Fatal(err)
	}
	if m.Domain() != "host" {
		t.Fatalf("Domain = %q", m.Domain())
	}
	prev := mustNow(t, m)
	if prev.Millis < 0 || prev.Millis > 60_000 {
		t.Fatalf("first reading %v is not near the clock's origin", prev)
	}
	for i := 0; i < 1000; i++ {
		now := mustNow(t, m)
		if d, err := now.Since(prev); err != nil || d < 0 {
			t.Fatalf("reading %d went backwards: %v after %v (%v)", i, now, prev, err)
		}
		prev = now
	}
	if _, err := clock.NewMonotonic(""); err == nil {
		t.Fatal("empty domain accepted")
	}
}

// Many goroutines reading one guarded monotonic clock never get a spurious
// Backwards error: the source is read under the guard's lock.
func TestMonotonicConcurrentReaders(t *testing.T) {
	m, err := clock.NewMonotonic("host")
	if err != nil {
		t.Fatal(err)
	}
	if err := readConcurrently(m, 8, 2000); err != nil {
		t.Fatal(err)
	}
}

// readConcurrently reads c k times in each of n goroutines and returns the
// first error.
func readConcurrently(c clock.Clock, n, k int) error {
	var g errgroup.Group
	for range n {
		g.Go(func() error {
			for range k {
				if _, err := c.Now(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func TestManualStepPerRead(t *testing.T) {
	m := mustManual(t, "agent", clock.ManualOptions{Start: 950, StepPerRead: 50})
	if m.StepPerRead() != 50 || m.Domain() != "agent" {
		t.Fatalf("StepPerRead %v Domain %q", m.StepPerRead(), m.Domain())
	}
	if p := m.Peek(); p != clock.At("agent", 950) {
		t.Fatalf("Peek = %v", p)
	}
	for _, want := range []float64{950, 1000, 1050} {
		if got := mustNow(t, m); got != clock.At("agent", want) {
			t.Fatalf("Now = %v, want %v", got, want)
		}
	}
	if p := m.Peek(); p != clock.At("agent", 1100) {
		t.Fatalf("Peek after three reads = %v", p)
	}
	if p := m.Peek(); p != clock.At("agent", 1100) {
		t.Fatalf("Peek moved the clock: %v", p)
	}
}

// Two reads of a stepping clock never observe the same instant: the check
// and the write of the naive lease see different times.
func TestManualTwoReadsDiffer(t *testing.T) {
	m := mustManual(t, "agent", clock.ManualOptions{StepPerRead: 1})
	a, b := mustNow(t, m), mustNow(t, m)
	if d, _ := b.Since(a); d != 1 {
		t.Fatalf("second read is %v after the first, want 1", d)
	}
	still := mustManual(t, "agent", clock.ManualOptions{Start: t2})
	if a, b := mustNow(t, still), mustNow(t, still); a != b {
		t.Fatalf("clock without step moved: %v then %v", a, b)
	}
}

func TestManualAdvanceAndSet(t *testing.T) {
	m := mustManual(t, "c", clock.ManualOptions{})
	steps := []struct {
		name    string
		do      func() error
		wantErr string // "arg", "backwards" or ""
		want    float64
	}{
		{"AdvanceToT1", func() error { return m.Advance(t1) }, "", t1},
		{"AdvanceZero", func() error { return m.Advance(0) }, "", t1},
		{"AdvanceNegative", func() error { return m.Advance(-1) }, "arg", t1},
		{"AdvanceNaN", func() error { return m.Advance(math.NaN()) }, "arg", t1},
		{"AdvanceInf", func() error { return m.Advance(math.Inf(1)) }, "arg", t1},
		{"AdvanceOverflow", func() error { return m.Advance(math.MaxFloat64) }, "", math.MaxFloat64},
		{"AdvanceOutOfRange", func() error { return m.Advance(math.MaxFloat64) }, "arg", math.MaxFloat64},
	}
	m2 := mustManual(t, "c", clock.ManualOptions{})
	steps2 := []struct {
		name    string
		do      func() error
		wantErr string
		want    float64
	}{
		{"SetT2", func() error { return m2.Set(t2) }, "", t2},
		{"SetSame", func() error { return m2.Set(t2) }, "", t2},
		{"SetBackwards", func() error { return m2.Set(t1) }, "backwards", t2},
		{"SetNaN", func() error { return m2.Set(math.NaN()) }, "arg", t2},
		{"SetInf", func() error { return m2.Set(math.Inf(1)) }, "arg", t2},
		{"SetT3", func() error { return m2.Set(t3) }, "", t3},
	}
	run := func(clk *clock.Manual, name string, do func() error, wantErr string, want float64) {
		t.Run(name, func(t *testing.T) {
			err := do()
			switch wantErr {
			case "":
				if err != nil {
					t.Fatal(err)
				}
			case "arg":
				var ae *clock.ArgumentError
				if !errors.As(err, &ae) {
					t.Fatalf("err = %v, want *clock.ArgumentError", err)
				}
			case "backwards":
				wantReadingError(t, err, clock.Backwards)
			}
			if got := clk.Peek().Millis; got != want {
				t.Fatalf("clock reads %v, want %v (a failed call must change nothing)", got, want)
			}
		})
	}
	for _, s := range steps {
		run(m, s.name, s.do, s.wantErr, s.want)
	}
	for _, s := range steps2 {
		run(m2, s.name, s.do, s.wantErr, s.want)
	}
}

func TestNewManualArguments(t *testing.T) {
	cases := []struct {
		name   string
		domain string
		opts   clock.ManualOptions
		arg    string
	}{
		{"EmptyDomain", "", clock.ManualOptions{}, "domain"},
		{"NaNStart", "d", clock.ManualOptions{Start: math.NaN()}, "start"},
		{"InfStart", "d", clock.ManualOptions{Start: math.Inf(-1)}, "start"},
		{"NegativeStep", "d", clock.ManualOptions{StepPerRead: -1}, "stepPerRead"},
		{"NaNStep", "d", clock.ManualOptions{StepPerRead: math.NaN()}, "stepPerRead"},
		{"InfStep", "d", clock.ManualOptions{StepPerRead: math.Inf(1)}, "stepPerRead"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := clock.NewManual(tc.domain, tc.opts)
			if m != nil {
				t.Fatal("returned a clock with the error")
			}
			wantArgumentError(t, err, tc.arg)
		})
	}
}

// A manual clock whose next step would leave the finite range refuses the
// read and stays where it was.
func TestManualStepOverflow(t *testing.T) {
	m := mustManual(t, "d", clock.ManualOptions{Start: math.MaxFloat64, StepPerRead: math.MaxFloat64})
	_, err := m.Now()
	wantReadingError(t, err, clock.Infinite)
	if m.Peek().Millis != math.MaxFloat64 {
		t.Fatalf("clock moved to %v", m.Peek())
	}
}

func TestManualConcurrentReadsAreDistinct(t *testing.T) {
	m := mustManual(t, "d", clock.ManualOptions{StepPerRead: 1})
	const n, per = 4, 500
	seen := make(chan float64, n*per)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			for j := 0; j < per; j++ {
				now, err := m.Now()
				if err != nil {
					t.Error(err)
					return
				}
				seen <- now.Millis
			}
		})
	}
	wg.Wait()
	close(seen)
	got := make(map[float64]bool)
	for v := range seen {
		if got[v] {
			t.Fatalf("reading %v handed out twice", v)
		}
		got[v] = true
	}
	if len(got) != n*per || m.Peek().Millis != n*per {
		t.Fatalf("%d distinct readings, clock at %v", len(got), m.Peek())
	}
}

// A nil or zero clock of either kind has an empty domain, and every method
// that would read or move it returns an *ArgumentError instead of panicking.
// The packages that take a Clock refuse an empty domain, so a typed nil
// *Manual is refused like an untyped nil.
func TestNilAndZeroClocksAreErrors(t *testing.T) {
	var nilManual *clock.Manual
	var nilGuarded *clock.Guarded
	clocks := []struct {
		name string
		clk  clock.Clock
	}{
		{"NilManual", nilManual},
		{"ZeroManual", &clock.Manual{}},
		{"NilGuarded", nilGuarded},
		{"ZeroGuarded", &clock.Guarded{}},
	}
	for _, c := range clocks {
		t.Run(c.name, func(t *testing.T) {
			if d := c.clk.Domain(); d != "" {
				t.Fatalf("Domain = %q", d)
			}
			now, err := c.clk.Now()
			wantArgumentError(t, err, "clock")
			if now != (clock.Instant{}) {
				t.Fatalf("returned %v with the error", now)
			}
		})
	}
	if p := nilManual.Peek(); p != (clock.Instant{}) {
		t.Fatalf("nil Peek = %v", p)
	}
	if s := nilManual.StepPerRead(); s != 0 {
		t.Fatalf("nil StepPerRead = %v", s)
	}
	for _, m := range []*clock.Manual{nilManual, {}} {
		wantArgumentError(t, m.Advance(1), "clock")
		wantArgumentError(t, m.Set(1), "clock")
	}
}

// A manual clock whose step is below the float spacing at its value would
// never move, so two reads would observe the same instant. It is refused at
// construction, by Set and Advance, and by a read that would get stuck.
func TestManualStepBelowFloatSpacing(t *testing.T) {
	m, err := clock.NewManual("d", clock.ManualOptions{Start: 1.7e12, StepPerRead: 1e-5})
	if m != nil {
		t.Fatal("returned a clock that never moves")
	}
	wantArgumentError(t, err, "stepPerRead")
	if !strings.Contains(err.Error(), "never move") {
		t.Fatalf("message %q", err)
	}
	// The same step is fine where the spacing is finer, and a step of 1e-3
	// still moves a clock at 1.7e12 (the spacing there is 2^-12).
	fine := mustManual(t, "d", clock.ManualOptions{Start: 1.7e12, StepPerRead: 1e-3})
	if a, b := mustNow(t, fine), mustNow(t, fine); a == b {
		t.Fatalf("two reads observed %v", a)
	}
	small := mustManual(t, "d", clock.ManualOptions{Start: 1, StepPerRead: 1e-5})
	wantArgumentError(t, small.Set(1.7e12), "set")
	wantArgumentError(t, small.Advance(1.7e12), "advance")
	if small.Peek().Millis != 1 {
		t.Fatalf("a refused move moved the clock to %v", small.Peek())
	}
	// A clock without a step never moves on reads and may go anywhere.
	still := mustManual(t, "d", clock.ManualOptions{Start: 1})
	if err := still.Set(1e300); err != nil {
		t.Fatal(err)
	}
	// Stepping itself can reach the edge: from 2^53-1 a step of 1 reaches
	// 2^53, where the spacing is 2 and a step of 1 rounds away.
	edge := mustManual(t, "d", clock.ManualOptions{Start: 1<<53 - 1, StepPerRead: 1})
	if got := mustNow(t, edge); got.Millis != 1<<53-1 {
		t.Fatalf("first read %v", got)
	}
	_, err = edge.Now()
	re := wantReadingError(t, err, clock.Stuck)
	if re.Value != 1<<53 || edge.Peek().Millis != 1<<53 {
		t.Fatalf("error %+v, clock at %v", re, edge.Peek())
	}
}

// yieldingSource is a millisecond source that hands out 0, 1, 2, ... and,
// for every even value, yields to the other goroutines before returning it,
// while odd values return at once. A guarded clock that read it outside its
// lock would let the odd value taken second be accepted before the even one
// taken first, which the guard reports as Backwards; read under the lock,
// the other readers wait and the yields only cost time.
type yieldingSource struct {
	mu   sync.Mutex
	next float64
}

func (s *yieldingSource) read() float64 {
	s.mu.Lock()
	v := s.next
	s.next++
	s.mu.Unlock()
	if int64(v)%2 == 0 {
		for range 50 {
			runtime.Gosched()
		}
	}
	return v
}

func TestGuardedReadsSourceUnderItsLock(t *testing.T) {
	src := &yieldingSource{}
	g, err := clock.New("host", src.read)
	if err != nil {
		t.Fatal(err)
	}
	if err := readConcurrently(g, 4, 200); err != nil {
		t.Fatalf("concurrent readers of a guarded clock: %v", err)
	}
}
