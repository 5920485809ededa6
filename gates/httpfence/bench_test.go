//go:build !js

package httpfence_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

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

// BenchmarkProxy is a write (or a read) through the proxy's handler, called
// directly (no client connection), to an upstream on loopback; the fence is
// at the floor, so no transaction runs. The CPU it shows is the proxy's
// own plus the upstream hop.
func BenchmarkProxy(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
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
