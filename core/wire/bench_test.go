package wire

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
)

// BenchmarkServiceCycle measures one acquire + release through Service.Call.
func BenchmarkServiceCycle(b *testing.B) {
	clk, _ := WallClock("coordinator")
	svc, _ := NewService(ServiceConfig{Clock: clk, TTL: time.Minute})
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		m := acquireMsg("a"+id, "r", "h")
		rep, err := svc.Call(ctx, m)
		if err != nil || !rep.OK {
			b.Fatal(rep, err)
		}
		if rep, err := svc.Call(ctx, releaseMsg("r"+id, "r", "h", rep.Grant.Fence, rep.Grant.Secret)); err != nil || !rep.OK {
			b.Fatal(rep, err)
		}
	}
}

// BenchmarkHandlerCycle measures one acquire + release through the handler,
// decoding and encoding included, without a network.
func BenchmarkHandlerCycle(b *testing.B) {
	clk, _ := clock.NewMonotonic("coordinator")
	svc, _ := NewService(ServiceConfig{Clock: clk, TTL: time.Minute})
	h := NewHandler(svc, HandlerOptions{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		body, _ := EncodeMessage(acquireMsg("a"+id, "r", "h"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/acquire", strings.NewReader(string(body))))
		if rec.Code != 200 {
			b.Fatal(rec.Body.String())
		}
		m, _ := DecodeMessage(OpAcquire, body)
		_ = m
		i := strings.Index(rec.Body.String(), `"secret":"`)
		secret := rec.Body.String()[i+10 : i+10+43]
		f := strings.Index(rec.Body.String(), `"fence":`)
		fence, _ := strconv.ParseUint(strings.SplitN(rec.Body.String()[f+8:], ",", 2)[0], 10, 64)
		body, _ = EncodeMessage(releaseMsg("r"+id, "r", "h", fence, secret))
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/release", strings.NewReader(string(body))))
		if rec.Code != 200 {
			b.Fatal(rec.Body.String())
		}
	}
}
