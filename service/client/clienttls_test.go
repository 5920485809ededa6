package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/httpapi"
)

// headerBackend is echoBackend that records the Authorization header each
// request carried, and the TLS of its connection.
type headerBackend struct {
	mu    sync.Mutex
	auths []string
	tls   []bool
}

func (h *headerBackend) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.auths = append(h.auths, r.Header.Get("Authorization"))
		h.tls = append(h.tls, r.TLS != nil)
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// TestClientTokenAndTLS: the token goes with every call, on the client's
// own connections (http:// and https://) and through an HTTPClient; an
// https:// coordinator is reached with the CA given in TLS; no method
// prints the token.
func TestClientTokenAndTLS(t *testing.T) {
	const tok = "tok-0123456789abcdef-XYZ"
	for _, tc := range []struct {
		name  string
		tls   bool
		owned bool // the client's own connections, not an HTTPClient
	}{{"http", false, true}, {"https", true, true}, {"https HTTPClient", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			hb := &headerBackend{}
			srv := httptest.NewUnstartedServer(hb.wrap(httpapi.NewHandler(&echoBackend{}, httpapi.HandlerOptions{})))
			if tc.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			clk, _ := clock.NewMonotonic("h")
			lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "h"})
			cfg := Config{BaseURL: srv.URL, Lease: lc, Token: tok, Attempts: 1}
			if tc.tls {
				cfg.TLS = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
			}
			if !tc.owned {
				cfg.TLS, cfg.HTTPClient = nil, srv.Client()
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if (c.conns[0] != nil) != tc.owned {
				t.Fatalf("own connections: %v", c.conns[0] != nil)
			}
			for range 2 {
				l, err := c.Acquire(context.Background(), "r")
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Release(context.Background(), l); err != nil {
					t.Fatal(err)
				}
			}
			for i, a := range hb.auths {
				if a != "Bearer "+tok || hb.tls[i] != tc.tls {
					t.Fatalf("request %d: Authorization %q, TLS %v", i, a, hb.tls[i])
				}
			}
			if printed := fmt.Sprintf("%v %+v %#v %s", c, c, c, c); strings.Contains(printed, tok) || !strings.Contains(printed, "client.Client(") {
				t.Fatalf("printed: %s", printed)
			}
		})
	}
	clk, _ := clock.NewMonotonic("h")
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "h"})
	for _, bad := range []string{"with space", "line\nbreak", "tab\t", "ünï"} {
		if _, err := New(Config{BaseURL: "http://127.0.0.1:1", Lease: lc, Token: bad}); err == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
	if _, err := New(Config{BaseURL: "https://127.0.0.1:1", Lease: lc, TLS: &tls.Config{}, HTTPClient: http.DefaultClient}); err == nil {
		t.Error("TLS and HTTPClient both accepted")
	}
}
