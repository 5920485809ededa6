package clock

import (
	"slices"
	"time"
)

// Timer is a call scheduled by an AfterFunc.
type Timer interface {
	// Stop cancels the call if it has not been made yet, and reports
	// whether it cancelled it.
	Stop() bool
}

// AfterFunc calls f once d has passed on some clock, in a goroutine of its
// own choosing, and returns a Timer that can cancel the call. It is how the
// packages that wait (the coordinator service's wake-ups, a held lease's
// renewals and deadline) take time as an input: RealAfterFunc for clocks
// that follow real time, Manual.AfterFunc for a manual clock.
type AfterFunc func(d time.Duration, f func()) Timer

// RealAfterFunc is time.AfterFunc: f runs in its own goroutine once d has
// passed in real time. Use it with NewMonotonic and other clocks that
// follow real time.
func RealAfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

var _ AfterFunc = RealAfterFunc

// manualTimer is a call scheduled on a Manual clock.
type manualTimer struct {
	m       *Manual
	due     float64
	seq     uint64
	f       func()
	pending bool
}

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if !t.pending {
		return false
	}
	t.pending = false
	t.m.timers = slices.DeleteFunc(t.m.timers, func(o *manualTimer) bool { return o == t })
	return true
}

// before orders timers by due reading, then by the order they were
// scheduled in.
func (t *manualTimer) before(o *manualTimer) bool {
	return t.due < o.due || (t.due == o.due && t.seq < o.seq)
}

// AfterFunc schedules f for the reading d after the clock's current one
// (a negative d is taken as 0). The call is made by the Advance or Set that
// moves the clock to or past that reading, in the goroutine that called it,
// after the clock has moved and in order of due reading (calls due at the
// same reading in the order they were scheduled); reads that move the
// clock by StepPerRead make no calls. So f must not block: it may read the
// clock, schedule or stop timers, and hand work to other goroutines. A nil
// or zero Manual returns a Timer whose call is never made.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	if m == nil || m.domain == "" {
		return &manualTimer{m: &Manual{}}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	t := &manualTimer{m: m, due: m.now + Millis(max(d, 0)), seq: m.seq, f: f, pending: true}
	// Kept in order: tests schedule a handful at a time.
	i := len(m.timers)
	for i > 0 && t.before(m.timers[i-1]) {
		i--
	}
	m.timers = slices.Insert(m.timers, i, t)
	return t
}

// NextTimer returns the reading at which the earliest scheduled call is due,
// and false if none is scheduled.
func (m *Manual) NextTimer() (Instant, bool) {
	if m == nil {
		return Instant{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.timers) == 0 {
		return Instant{}, false
	}
	return Instant{Millis: m.timers[0].due, Domain: m.domain}, true
}

// Timers returns how many calls are scheduled and not yet made.
func (m *Manual) Timers() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

// fire makes the calls that are due, one at a time and without the lock
// held, including calls that those calls schedule for a reading already
// reached.
func (m *Manual) fire() {
	for {
		m.mu.Lock()
		if len(m.timers) == 0 || m.timers[0].due > m.now {
			m.mu.Unlock()
			return
		}
		t := m.timers[0]
		m.timers = slices.Delete(m.timers, 0, 1)
		t.pending = false
		m.mu.Unlock()
		t.f()
	}
}
