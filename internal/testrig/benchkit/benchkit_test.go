package benchkit

import (
	"context"
	"errors"
	"io"
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
	_, _, err = Loop(2, 1000, time.Minute, func(_ context.Context, i int) error {
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
	if f, err := GrantedFence([]byte(`{"ok":true,"grant":{"fence":9}}`)); err != nil || f != 9 {
		t.Fatalf("GrantedFence = %d, %v", f, err)
	}
	if _, err := GrantedFence([]byte(`{"ok":false}`)); err == nil {
		t.Fatal("GrantedFence took a refusal")
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
