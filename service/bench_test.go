package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

func benchService(b *testing.B) *Service {
	clk, _ := WallClock("coordinator")
	store, _ := NewLocal(LocalConfig{Clock: clk, TTL: time.Minute})
	svc, _ := New(Config{TTL: time.Minute, Store: store})
	return svc
}

// BenchmarkServiceCycle measures one acquire + release through Service.Call,
// in memory.
func BenchmarkServiceCycle(b *testing.B) {
	svc := benchService(b)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		rep, err := svc.Call(ctx, acquireMsg("a"+id, "r", "h"))
		if err != nil || !rep.OK {
			b.Fatal(rep, err)
		}
		if rep, err := svc.Call(ctx, releaseMsg("r"+id, "r", "h", rep.Grant.Fence, secretOf("h"))); err != nil || !rep.OK {
			b.Fatal(rep, err)
		}
	}
}

// BenchmarkHandlerCycle measures one acquire + release through the handler,
// decoding and encoding included, without a network.
func BenchmarkHandlerCycle(b *testing.B) {
	h := httpapi.NewHandler(benchService(b), httpapi.HandlerOptions{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		body, _ := wire.EncodeMessage(acquireMsg("a"+id, "r", "h"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/acquire", strings.NewReader(string(body))))
		if rec.Code != 200 {
			b.Fatal(rec.Body.String())
		}
		f := strings.Index(rec.Body.String(), `"fence":`)
		fence, _ := strconv.ParseUint(strings.SplitN(rec.Body.String()[f+8:], ",", 2)[0], 10, 64)
		body, _ = wire.EncodeMessage(releaseMsg("r"+id, "r", "h", fence, secretOf("h")))
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/release", strings.NewReader(string(body))))
		if rec.Code != 200 {
			b.Fatal(rec.Body.String())
		}
	}
}

// BenchmarkDecodeMessage measures the strict decoding of one acquisition
// body.
func BenchmarkDecodeMessage(b *testing.B) {
	body, _ := wire.EncodeMessage(acquireMsg("0123456789abcdef0123456789abcdef", "resource-17", "holder-3"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.DecodeMessage(wire.OpAcquire, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPCycle measures one acquire + release from a client.Client to
// the handler over loopback HTTP, both ends in this process (for profiles
// of the whole path: go test -bench HTTPCycle -cpuprofile). Each goroutine
// holds its own resource; "8" runs 8 clients at once.
func BenchmarkHTTPCycle(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(strconv.Itoa(clients), func(b *testing.B) {
			srv := httptest.NewServer(httpapi.NewHandler(benchService(b), httpapi.HandlerOptions{}))
			defer srv.Close()
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				n := next.Add(1)
				holder := "h" + strconv.FormatInt(n, 10)
				hclk, _ := clock.NewMonotonic(holder)
				lc, _ := lease.NewClient(lease.ClientConfig{Clock: hclk, HolderID: holder})
				c, err := client.New(client.Config{BaseURL: srv.URL, Lease: lc})
				if err != nil {
					b.Error(err)
					return
				}
				ctx := context.Background()
				for pb.Next() {
					l, err := c.Acquire(ctx, "r"+holder)
					if err == nil {
						err = c.Release(ctx, l)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
