package workere2e

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestCheck feeds the checker a good history and one broken copy per rule.
func TestCheck(t *testing.T) {
	good := []Event{
		{Client: 1, Op: "acquire", Resource: "r", Start: 0, End: 10, OK: true, Fence: 1, ExpiresAt: 1005, TTLMillis: 1000},
		{Client: 2, Op: "acquire", Resource: "r", Start: 11, End: 20, OK: false},
		{Client: 1, Op: "renew", Resource: "r", Start: 21, End: 30, OK: true, Fence: 1, ExpiresAt: 1025, TTLMillis: 1000},
		{Client: 1, Op: "release", Resource: "r", Start: 31, End: 40, OK: true, Fence: 1},
		{Client: 2, Op: "acquire", Resource: "r", Start: 35, End: 50, OK: true, Fence: 2, ExpiresAt: 1045, TTLMillis: 1000},
		// Fence 2 is never released; fence 3 starts after it expired.
		{Client: 3, Op: "acquire", Resource: "r", Start: 60, End: 70, OK: true, Fence: 3, ExpiresAt: 2100, TTLMillis: 1000},
		{Client: 3, Op: "acquire", Resource: "s", Start: 0, End: 5, OK: true, Fence: 1, ExpiresAt: 1000, TTLMillis: 1000},
	}
	if err := Check(good); err != nil {
		t.Fatalf("good history refused: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(h []Event) []Event
		want   string
	}{
		{"fence granted twice", func(h []Event) []Event { h[4].Fence = 1; return h }, "granted twice"},
		{"fence backwards", func(h []Event) []Event { h[5].Fence = 2; h[4].Fence = 3; h[3].Fence = 1; return h }, "backwards"},
		{"overlap after expiry", func(h []Event) []Event { h[5].ExpiresAt = 2000; return h }, "two live holders"},
		{"granted before release", func(h []Event) []Event { h[4].End = 30; h[4].Start = 25; return h }, "before fence 1 was released"},
		{"renew of unknown fence", func(h []Event) []Event { h[2].Fence = 9; return h }, "never granted"},
		{"renew by another client", func(h []Event) []Event { h[2].Client = 2; return h }, "held by client"},
		{"released twice", func(h []Event) []Event { return append(h, h[3]) }, "released twice"},
		{"time travel", func(h []Event) []Event { h[0].End = -1; return h }, "ends before"},
	} {
		h := tc.mutate(append([]Event(nil), good...))
		err := Check(h)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestLinearizable(t *testing.T) {
	good := []Event{
		{Client: 1, Op: "acquire", Resource: "r", Start: 0, End: 10, OK: true, Fence: 1},
		{Client: 2, Op: "acquire", Resource: "r", Start: 5, End: 20, HeldBy: "client-1"},
		{Client: 1, Op: "renew", Resource: "r", Start: 21, End: 30, OK: true, Fence: 1},
		{Client: 1, Op: "release", Resource: "r", Start: 31, End: 40, OK: true, Fence: 1},
		{Client: 2, Op: "acquire", Resource: "r", Start: 35, End: 50, OK: true, Fence: 2},
		{Client: 1, Op: "renew", Resource: "r", Start: 51, End: 52, Fence: 1},
		{Client: 3, Op: "acquire", Resource: "s", Start: 0, End: 5, OK: true, Fence: 1},
	}
	if got := Linearizable(good, time.Minute); got != porcupine.Ok {
		t.Fatalf("good history: %s", got)
	}
	for _, tc := range []struct {
		name   string
		mutate func(h []Event) []Event
	}{
		{"two holders", func(h []Event) []Event {
			return append(h, Event{Client: 3, Op: "acquire", Resource: "r", Start: 11, End: 12, OK: true, Fence: 2})
		}},
		{"fence skipped", func(h []Event) []Event { h[4].Fence = 3; return h }},
		{"denied by the wrong holder", func(h []Event) []Event { h[1].HeldBy = "client-3"; return h }},
		{"renewed after release", func(h []Event) []Event { h[5].OK = true; return h }},
		{"granted before the release began", func(h []Event) []Event { h[4].Start, h[4].End = 22, 25; return h }},
	} {
		h := tc.mutate(append([]Event(nil), good...))
		if got := Linearizable(h, time.Minute); got != porcupine.Illegal {
			t.Errorf("%s: %s, want Illegal", tc.name, got)
		}
	}
}
