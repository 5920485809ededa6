package clock

import (
	"math"
	"sync"
	"time"
)

// Clock is a source of instants in one domain. Now returns an error rather
// than a reading it cannot vouch for.
//
// The packages that take a Clock refuse one whose Domain is empty. A nil
// *Guarded or *Manual, and the zero value of either, has an empty Domain and
// a Now that returns an *ArgumentError, so a typed nil is refused like an
// untyped one.
type Clock interface {
	Domain() string
	Now() (Instant, error)
}

var (
	_ Clock = (*Guarded)(nil)
	_ Clock = (*Manual)(nil)
)

// Guarded wraps a raw millisecond source and rejects readings that are NaN,
// infinite, or lower than an earlier accepted reading. A rejected reading
// returns a *ReadingError and leaves the clock as it was. It is safe for
// concurrent use.
type Guarded struct {
	domain string
	read   func() float64

	mu   sync.Mutex
	last float64
	seen bool
}

// New wraps read as a guarded clock in domain. Use it for any source of
// milliseconds: a wall clock, a test double, a host's performance counter.
func New(domain string, read func() float64) (*Guarded, error) {
	if domain == "" {
		return nil, &ArgumentError{Pkg: "clock", Arg: "domain", Reason: "must not be empty"}
	}
	if read == nil {
		return nil, &ArgumentError{Pkg: "clock", Arg: "read", Reason: "must not be nil"}
	}
	return &Guarded{domain: domain, read: read}, nil
}

// Domain returns the clock's domain, or "" for a nil or zero Guarded.
func (g *Guarded) Domain() string {
	if g == nil {
		return ""
	}
	return g.domain
}

// Now reads the source once and returns it as an Instant if it passes the guard.
// The source is read while the clock's lock is held, so concurrent readers of
// a non-decreasing source never see each other's readings out of order.
// A nil or zero Guarded (not made by New) returns an *ArgumentError.
func (g *Guarded) Now() (Instant, error) {
	if g == nil || g.read == nil {
		return Instant{}, notMade("Guarded", "New or NewMonotonic")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.read()
	if err := g.accept(v); err != nil {
		return Instant{}, err
	}
	return Instant{Millis: v, Domain: g.domain}, nil
}

// accept checks v against the guard and records it. g.mu must be held.
func (g *Guarded) accept(v float64) error {
	switch {
	case math.IsNaN(v):
		return &ReadingError{Domain: g.domain, Problem: NotANumber, Value: v, Previous: g.last}
	case math.IsInf(v, 0):
		return &ReadingError{Domain: g.domain, Problem: Infinite, Value: v, Previous: g.last}
	case g.seen && v < g.last:
		return &ReadingError{Domain: g.domain, Problem: Backwards, Value: v, Previous: g.last}
	}
	g.last, g.seen = v, true
	return nil
}

// NewMonotonic returns a guarded clock in domain backed by the runtime's
// monotonic clock. Its origin is the moment it was created, so its readings
// start near zero and mean nothing in any other domain.
func NewMonotonic(domain string) (*Guarded, error) {
	origin := time.Now()
	return New(domain, func() float64 { return Millis(time.Since(origin)) })
}

// ManualOptions configures a manual clock.
type ManualOptions struct {
	// Start is the first reading. Zero by default.
	Start float64
	// StepPerRead moves the clock forward by this many milliseconds after
	// every read, so two reads never observe the same instant. Zero means the
	// clock only moves when told to.
	StepPerRead float64
}

// Manual is a deterministic clock for tests, simulations and the playground.
// It moves only by Advance and Set, and by StepPerRead after every reading.
// It never moves backwards. Its AfterFunc schedules calls that Advance and
// Set make when the clock reaches them. It is safe for concurrent use.
type Manual struct {
	domain string
	step   float64

	mu     sync.Mutex
	now    float64
	timers []*manualTimer // pending calls, earliest first
	seq    uint64
}

// NewManual returns a manual clock in domain.
func NewManual(domain string, opts ManualOptions) (*Manual, error) {
	if domain == "" {
		return nil, &ArgumentError{Pkg: "clock", Arg: "domain", Reason: "must not be empty"}
	}
	if !finite(opts.Start) {
		return nil, &ArgumentError{Pkg: "clock", Arg: "start", Reason: "must be a finite number, got " + FormatMillis(opts.Start)}
	}
	if !finite(opts.StepPerRead) || opts.StepPerRead < 0 {
		return nil, &ArgumentError{Pkg: "clock", Arg: "stepPerRead", Reason: "must be a finite number >= 0, got " + FormatMillis(opts.StepPerRead)}
	}
	if stuck(opts.Start, opts.StepPerRead) {
		return nil, &ArgumentError{Pkg: "clock", Arg: "stepPerRead", Reason: "of " + FormatMillis(opts.StepPerRead) +
			" is below the float spacing at the start " + FormatMillis(opts.Start) + ": the clock would never move"}
	}
	return &Manual{domain: domain, step: opts.StepPerRead, now: opts.Start}, nil
}

// stuck reports whether a clock at v with a positive step would not move:
// v+step rounds back to v.
func stuck(v, step float64) bool { return step > 0 && v+step == v }

// Domain returns the clock's domain, or "" for a nil or zero Manual.
func (m *Manual) Domain() string {
	if m == nil {
		return ""
	}
	return m.domain
}

// notMade is the error of a method called on a nil or zero clock.
func notMade(typ, ctor string) error {
	return &ArgumentError{Pkg: "clock", Arg: "clock", Reason: "is a nil or zero " + typ + "; make one with " + ctor}
}

// Now returns the current reading and then moves the clock on by StepPerRead.
// It fails if stepping would leave the finite range, or would not move the
// clock at all (a *ReadingError with Problem Stuck: the clock has grown so
// large that its step is below the float spacing), and for a nil or zero
// Manual (an *ArgumentError). A failed read changes nothing.
func (m *Manual) Now() (Instant, error) {
	if m == nil || m.domain == "" {
		return Instant{}, notMade("Manual", "NewManual")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.now
	next := v + m.step
	switch {
	case !finite(next):
		return Instant{}, &ReadingError{Domain: m.domain, Problem: Infinite, Value: next, Previous: v}
	case stuck(v, m.step):
		return Instant{}, &ReadingError{Domain: m.domain, Problem: Stuck, Value: v, Previous: v}
	}
	m.now = next
	return Instant{Millis: v, Domain: m.domain}, nil
}

// Peek returns the reading the next Now will return, without stepping. A nil
// Manual returns the zero Instant.
func (m *Manual) Peek() Instant {
	if m == nil {
		return Instant{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return Instant{Millis: m.now, Domain: m.domain}
}

// StepPerRead returns how far each read moves the clock (0 for a nil Manual).
func (m *Manual) StepPerRead() float64 {
	if m == nil {
		return 0
	}
	return m.step
}

// Advance moves the clock forward by ms milliseconds, then makes the calls
// scheduled by AfterFunc that are due. A negative, NaN or infinite amount,
// or one that takes the clock where its step no longer moves it, is an
// error and changes nothing.
func (m *Manual) Advance(ms float64) error {
	if m == nil || m.domain == "" {
		return notMade("Manual", "NewManual")
	}
	if !finite(ms) || ms < 0 {
		return &ArgumentError{Pkg: "clock", Arg: "advance", Reason: "must be a finite number >= 0, got " + FormatMillis(ms)}
	}
	return m.move("advance", func(now float64) (float64, error) {
		if next := now + ms; finite(next) {
			return next, nil
		}
		return 0, &ArgumentError{Pkg: "clock", Arg: "advance", Reason: "moves the clock out of the finite range"}
	})
}

// Set moves the clock to ms, then makes the calls scheduled by AfterFunc
// that are due. Moving it backwards is a *ReadingError and changes nothing;
// so is a value at which the clock's step would no longer move it (an
// *ArgumentError).
func (m *Manual) Set(ms float64) error {
	if m == nil || m.domain == "" {
		return notMade("Manual", "NewManual")
	}
	if !finite(ms) {
		return &ArgumentError{Pkg: "clock", Arg: "set", Reason: "must be a finite number, got " + FormatMillis(ms)}
	}
	return m.move("set", func(now float64) (float64, error) {
		if ms < now {
			return 0, &ReadingError{Domain: m.domain, Problem: Backwards, Value: ms, Previous: now}
		}
		return ms, nil
	})
}

// move sets the clock to what to returns for its reading, unless that is
// an error or a value where the clock's step no longer moves it (then
// nothing changes), and makes the calls scheduled by AfterFunc that are due.
func (m *Manual) move(arg string, to func(now float64) (float64, error)) error {
	m.mu.Lock()
	next, err := to(m.now)
	if err == nil && stuck(next, m.step) {
		err = &ArgumentError{Pkg: "clock", Arg: arg, Reason: "moves the clock to " + FormatMillis(next) +
			", where its step of " + FormatMillis(m.step) + " is below the float spacing and would never move it"}
	}
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.now = next
	m.mu.Unlock()
	m.fire()
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
