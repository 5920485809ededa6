//go:build !js

package httpfence_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
)

// BenchmarkParseHeader is the cost of reading a token from a request.
func BenchmarkParseHeader(b *testing.B) {
	h := http.Header{"Lease-Fence": {`resource="deploy-slot", holder="agent-a", fence=7`}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := httpfence.ParseHeader(h); err != nil {
			b.Fatal(err)
		}
	}
}

// createdUpstream is an upstream on loopback that reads each request's
// body and answers 201 Created.
func createdUpstream(b *testing.B) *url.URL {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u
}

// BenchmarkProxy is a write (or a read) through the proxy's handler, called
// directly (no client connection), to an upstream on loopback; the fence is
// at the floor, so no transaction runs. The CPU it shows is the proxy's
// own plus the upstream hop.
func BenchmarkProxy(b *testing.B) {
	u := createdUpstream(b)
	p, err := httpfence.New(httpfence.Options{Upstream: u, Store: openStore(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer p.CloseIdleConnections()
	v, _ := httpfence.FormatHeader(fence.Token{Resource: "r", HolderID: "a", Fence: 7})
	body := strings.Repeat("x", 100)
	for _, method := range []string{"GET", "POST"} {
		b.Run(method, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(method, "http://proxy/w", strings.NewReader(body))
				req.Header.Set("Lease-Fence", v)
				rec := httptest.NewRecorder()
				p.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					b.Fatal(rec.Code, rec.Body.String())
				}
			}
		})
	}
}

// BenchmarkUpstreamTransport is a write through the proxy, over a client
// connection, to an upstream on loopback, through two proxies on one
// upstream: one with the proxy's default transport to an http:// upstream,
// one with net/http's http.Transport, alternating in chunks of 50 writes
// so the noise of other processes falls on both. With one writer, and with
// 4 writers each on a resource of its own. The fence is at the floor (no
// transaction). Client, proxies and upstream share the process, so the
// times are all of them. Metrics: each side's time per write and
// http.Transport/default (above 1: the default is faster).
func BenchmarkUpstreamTransport(b *testing.B) {
	u := createdUpstream(b)
	body := strings.Repeat("x", 100)
	var urls [2]string
	for i, tr := range []http.RoundTripper{nil, &http.Transport{MaxIdleConnsPerHost: 256}} {
		p, err := httpfence.New(httpfence.Options{Upstream: u, Store: openStore(b), Transport: tr})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(p)
		defer srv.Close()
		defer p.CloseIdleConnections()
		urls[i] = srv.URL
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	write := func(b *testing.B, u, header string) {
		req, _ := http.NewRequest("POST", u+"/w", strings.NewReader(body))
		req.Header.Set("Lease-Fence", header)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatal(resp.Status)
		}
	}
	var seq atomic.Int64
	for _, writers := range []int{1, 4} {
		b.Run(strconv.Itoa(writers)+"-writers", func(b *testing.B) {
			const chunk = 50
			var took [2]time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i += chunk * writers {
				for j := range 2 {
					k := (j + i/(chunk*writers)) % 2
					start := time.Now()
					var wg sync.WaitGroup
					for range writers {
						h, _ := httpfence.FormatHeader(fence.Token{Resource: "r" + strconv.FormatInt(seq.Add(1), 10), HolderID: "a", Fence: 7})
						wg.Go(func() {
							for range chunk {
								write(b, urls[k], h)
							}
						})
					}
					wg.Wait()
					took[k] += time.Since(start)
				}
			}
			n := float64((b.N + chunk*writers - 1) / (chunk * writers) * chunk * writers)
			b.ReportMetric(float64(took[0].Nanoseconds())/n, "ns/default")
			b.ReportMetric(float64(took[1].Nanoseconds())/n, "ns/http.Transport")
			b.ReportMetric(float64(took[1])/float64(took[0]), "http.Transport/default")
		})
	}
}
