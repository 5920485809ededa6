package benchkit

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSpreadAndQuantile(t *testing.T) {
	if lo, med, hi := Spread([]int{5, 1, 4, 2}); lo != 1 || med != 3 || hi != 5 {
		t.Fatalf("Spread = %d %d %d; want 1 3 5", lo, med, hi)
	}
	if got := MMM([]float64{3, 1, 2}, "%.1f"); got != "1.0 / 2.0 / 3.0" {
		t.Fatalf("MMM = %q", got)
	}
	sorted := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if q50, q99 := Quantile(sorted, 0.5), Quantile(sorted, 0.99); q50 != 6 || q99 != 10 {
		t.Fatalf("Quantile = %d %d; want 6 10", q50, q99)
	}
}

func TestInts(t *testing.T) {
	got, err := Ints("1,8", 1, 64)
	if err != nil || len(got) != 2 || got[0] != 1 || got[1] != 8 {
		t.Fatalf("Ints = %v, %v", got, err)
	}
	for _, bad := range []string{"0", "1,x", "65"} {
		if _, err := Ints(bad, 1, 64); err == nil {
			t.Fatalf("Ints(%q) took it", bad)
		}
	}
}

func TestLoopStopsAtTheCountOrTheFirstFailure(t *testing.T) {
	n, _, err := Loop(4, 100, time.Minute, func(context.Context, int) error { return nil })
	if err != nil || n < 100 || n > 103 {
		t.Fatalf("Loop = %d, %v; want 100 to 103 cycles", n, err)
	}
	boom := errors.New("boom")
	// No count: client 0 alone could do all the cycles before client 1
	// first runs (on a loaded machine it did).
	_, _, err = Loop(2, math.MaxInt, time.Minute, func(_ context.Context, i int) error {
		if i == 1 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Loop = %v; want boom", err)
	}
}

func TestRequests(t *testing.T) {
	if got, want := AcquireBody("a1", "r", "h", "s", 7, 0), `{"requestId":"a1","resource":"r","holderId":"h","sentAt":{"millis":7,"domain":"h"},"kind":"acquire","secret":"s"}`; got != want {
		t.Fatalf("AcquireBody = %s", got)
	}
	// A service that grants fence 9 and ends the lease it granted.
	var posted []string
	svc := Poster(func(path, body string) ([]byte, error) {
		posted = append(posted, path+" "+body)
		if path == "/v1/acquire" {
			return []byte(`{"ok":true,"grant":{"fence":9}}`), nil
		}
		if !strings.Contains(body, `"fence":9,`) {
			return []byte(`{"ok":false}`), nil
		}
		return []byte(`{"ok":true}`), nil
	})
	if err := svc.Cycle("1", "r", "h", "s", 7); err != nil || len(posted) != 2 ||
		posted[1] != `/v1/release {"requestId":"r1","resource":"r","holderId":"h","fence":9,"secret":"s"}` {
		t.Fatalf("Cycle = %v, posting %q", err, posted)
	}
	if err := svc.Release("r2", "r", "h", "s", 8); err == nil {
		t.Fatal("Release took a refusal")
	}
	refusing := Poster(func(string, string) ([]byte, error) { return []byte(`{"ok":false}`), nil })
	if _, err := refusing.Acquire("a1", "r", "h", "s", 1); err == nil {
		t.Fatal("Acquire took a refusal")
	}
	answer := func(status int) *http.Response {
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: io.NopCloser(strings.NewReader("body"))}
	}
	if data, err := Answer(answer(http.StatusOK), nil); err != nil || string(data) != "body" {
		t.Fatalf("Answer(200) = %q, %v", data, err)
	}
	if _, err := Answer(answer(http.StatusConflict), nil); err == nil {
		t.Fatal("Answer took a 409")
	}
}

func TestEachTakesEveryItemOnceOrStopsAtAFailure(t *testing.T) {
	seen := make([]atomic.Int32, 100)
	if err := Each(4, len(seen), func(_, i int) error { seen[i].Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("item %d taken %d times", i, n)
		}
	}
	boom := errors.New("boom")
	var after atomic.Int32
	err := Each(1, 100, func(_, i int) error {
		if i == 10 {
			return boom
		}
		if i > 10 {
			after.Add(1)
		}
		return nil
	})
	if !errors.Is(err, boom) || after.Load() != 0 {
		t.Fatalf("Each = %v with %d items after the failure; want boom and none", err, after.Load())
	}
}

func TestHandoversTimesEachReleaseToTheNextHolder(t *testing.T) {
	freed := make(chan struct{}, 1) // the lock, free when it holds a token
	release := func() error { freed <- struct{}{}; return nil }
	nexts, waits := 0, 0
	lat, err := Handovers(3, 0, release, func() (func() error, error) {
		<-freed
		nexts++
		return release, nil
	}, func() error { waits++; return nil })
	if err != nil || len(lat) != 3 || nexts != 13 || waits != 13 {
		t.Fatalf("Handovers = %v, %v after %d acquisitions and %d waits; want 3 latencies of 13", lat, err, nexts, waits)
	}
	select {
	case <-freed:
	default:
		t.Fatal("the last holder kept the lock")
	}
	boom := errors.New("boom")
	if _, err := Handovers(3, 0, release, func() (func() error, error) { <-freed; return nil, boom }, func() error { return nil }); !errors.Is(err, boom) {
		t.Fatalf("Handovers = %v; want boom", err)
	}
}
