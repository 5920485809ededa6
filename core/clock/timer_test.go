package clock_test

import (
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
)

// TestManualTimers: calls are made by the Advance or Set that reaches them,
// in order of due reading (then of scheduling), with the clock already
// moved; a stopped call is never made; calls scheduled by a call for a
// reading already reached are made by the same Advance.
func TestManualTimers(t *testing.T) {
	m := mustManual(t, "sched", clock.ManualOptions{Start: 100})
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+clock.FormatMillis(m.Peek().Millis)) }
	}
	m.AfterFunc(50*time.Millisecond, at("b"))
	m.AfterFunc(10*time.Millisecond, at("a"))
	m.AfterFunc(50*time.Millisecond, at("c"))
	stopped := m.AfterFunc(20*time.Millisecond, at("never"))
	m.AfterFunc(-time.Second, at("now"))
	if next, ok := m.NextTimer(); !ok || next.Millis != 100 || m.Timers() != 5 {
		t.Fatalf("next %v %v, %d timers", next, ok, m.Timers())
	}
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a pending call must report true once")
	}
	if err := m.Advance(10); err != nil {
		t.Fatal(err)
	}
	m.AfterFunc(0, func() {
		got = append(got, "chained")
		m.AfterFunc(0, at("chained-again"))
	})
	if err := m.Set(200); err != nil {
		t.Fatal(err)
	}
	// b and c were due at 150, before chained-again (scheduled at 200).
	want := []string{"now@110", "a@110", "chained", "b@200", "c@200", "chained-again@200"}
	if len(got) != len(want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("calls %v, want %v", got, want)
		}
	}
	if m.Timers() != 0 {
		t.Fatalf("%d timers left", m.Timers())
	}
	if _, ok := m.NextTimer(); ok {
		t.Fatal("a next timer with none scheduled")
	}
	// Reads that step the clock make no calls.
	s := mustManual(t, "step", clock.ManualOptions{StepPerRead: 5})
	fired := false
	s.AfterFunc(time.Millisecond, func() { fired = true })
	for range 3 {
		if _, err := s.Now(); err != nil {
			t.Fatal(err)
		}
	}
	if fired {
		t.Fatal("a read made a call")
	}
	if err := s.Advance(0); err != nil || !fired {
		t.Fatalf("Advance(0) past the due reading made no call (%v)", err)
	}
	// A failed Advance makes no call; a nil Manual's timer never fires.
	var nilClock *clock.Manual
	if nilClock.AfterFunc(0, func() { t.Fatal("called") }).Stop() {
		t.Fatal("a nil Manual's timer was pending")
	}
	var _ clock.AfterFunc = m.AfterFunc
	if tm := clock.RealAfterFunc(time.Hour, func() {}); !tm.Stop() {
		t.Fatal("RealAfterFunc's timer was not pending")
	}
}
