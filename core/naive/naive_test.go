package naive_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/naive"
)

func manual(t *testing.T, start, step float64) *clock.Manual {
	t.Helper()
	m, err := clock.NewManual("agent", clock.ManualOptions{Start: start, StepPerRead: step})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The naive lease dates itself from the moment its grant or renewal reply
// arrived, and its check says only that the deadline had not passed when the
// check was made.
func TestNaiveLeaseSteps(t *testing.T) {
	const (
		t0   = 0.0
		t950 = 950.0
		t999 = 999.0
		t1k  = 1000.0
		t900 = 900.0
	)
	clk := manual(t, t0, 0)
	l, err := naive.Acquire(clk, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		at        float64
		renew     bool
		wantValid bool
		wantExp   float64
	}{
		{"ValidAtT0", t0, false, true, 1000},
		{"ValidAt950", t950, false, true, 1000},
		{"ValidAt999", t999, false, true, 1000},
		{"InvalidAt1000", t1k, false, false, 1000},
		{"RenewalReplyAt1000DatesFromArrival", t1k, true, true, 2000},
		{"ValidAt1900", t1k + t900, false, true, 2000},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := clk.Set(s.at); err != nil {
				t.Fatal(err)
			}
			if s.renew {
				if err := l.Renewed(); err != nil {
					t.Fatal(err)
				}
			}
			ok, err := l.Valid()
			if err != nil || ok != s.wantValid {
				t.Fatalf("Valid at %v = %v, %v; want %v", s.at, ok, err, s.wantValid)
			}
			if got := l.ExpiresAt(); got != clock.At("agent", s.wantExp) {
				t.Fatalf("ExpiresAt = %v, want %v", got, s.wantExp)
			}
		})
	}
}

// With a clock that steps on every read, the check and whatever follows it
// observe different instants: the check at 950 passes, and the very next
// reading (when the write lands) is already past the deadline. The lease has
// no way to know, because the write does not read it.
func TestNaiveCheckIsTrueOnlyWhenMade(t *testing.T) {
	clk := manual(t, 0, 950)
	l, err := naive.Acquire(clk, time.Second) // reads 0: expires at 1000
	if err != nil {
		t.Fatal(err)
	}
	ok, err := l.Valid() // reads 950
	if err != nil || !ok {
		t.Fatalf("check at 950 = %v, %v; want true", ok, err)
	}
	landed, _ := clk.Now() // the write lands at 1900
	if past, _ := l.ExpiresAt().Before(landed); !past {
		t.Fatalf("write landed at %v, before the deadline %v", landed, l.ExpiresAt())
	}
}

func TestNaiveBadInput(t *testing.T) {
	clk := manual(t, 0, 1)
	cases := []struct {
		name string
		clk  clock.Clock
		ttl  time.Duration
		arg  string
	}{
		{"NilClock", nil, time.Second, "clock"},
		{"TypedNilClock", (*clock.Manual)(nil), time.Second, "clock"},
		{"ZeroClock", &clock.Manual{}, time.Second, "clock"},
		{"ZeroTTL", clk, 0, "ttl"},
		{"NegativeTTL", clk, -time.Second, "ttl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := clk.Peek()
			l, err := naive.Acquire(tc.clk, tc.ttl)
			var ae *naive.ArgumentError
			if l != nil || !errors.As(err, &ae) || ae.Arg != tc.arg || ae.Pkg != "naive" || !strings.HasPrefix(err.Error(), "naive: ") {
				t.Fatalf("Acquire = %v, %v; want ArgumentError on %s", l, err, tc.arg)
			}
			if clk.Peek() != before {
				t.Fatal("a refused Acquire read the clock")
			}
		})
	}
}

// A clock that fails makes the naive lease fail too, rather than answer.
func TestNaiveClockErrors(t *testing.T) {
	var v float64
	g, err := clock.New("wall", func() float64 { return v })
	if err != nil {
		t.Fatal(err)
	}
	v = 100
	l, err := naive.Acquire(g, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v = 50 // NTP step back
	var re *clock.ReadingError
	if _, err := l.Valid(); !errors.As(err, &re) {
		t.Fatalf("Valid after a backwards step: %v", err)
	}
	if err := l.Renewed(); !errors.As(err, &re) {
		t.Fatalf("Renewed after a backwards step: %v", err)
	}
	if l.ExpiresAt().Millis != 1100 {
		t.Fatalf("failed renewal changed ExpiresAt to %v", l.ExpiresAt())
	}
}

// A nil or zero naive Lease answers with errors, not panics.
func TestNaiveNilAndZeroLease(t *testing.T) {
	for name, l := range map[string]*naive.Lease{"nil": nil, "zero": {}} {
		var ae *naive.ArgumentError
		if _, err := l.Valid(); !errors.As(err, &ae) || ae.Arg != "lease" {
			t.Fatalf("%s Valid: %v", name, err)
		}
		if err := l.Renewed(); !errors.As(err, &ae) || ae.Arg != "lease" {
			t.Fatalf("%s Renewed: %v", name, err)
		}
		if l.ExpiresAt() != (clock.Instant{}) {
			t.Fatalf("%s ExpiresAt = %v", name, l.ExpiresAt())
		}
	}
}
