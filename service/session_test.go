package service

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// sessionRig is a Service behind the handler on a loopback server that
// counts the requests to the session path and the connections turned into
// sessions, and a client.Client with Config.Sessions.
type sessionRig struct {
	srv              *httptest.Server
	c                *client.Client
	upgrades, hijack atomic.Int64
}

func newSessionRig(t *testing.T, ss *httpapi.Sessions) *sessionRig {
	t.Helper()
	clk, _ := WallClock("coordinator")
	store, _ := NewLocal(LocalConfig{Clock: clk, TTL: time.Minute})
	svc, _ := New(Config{TTL: time.Minute, Store: store})
	r := &sessionRig{}
	h := httpapi.NewHandler(svc, httpapi.HandlerOptions{Sessions: ss})
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == wire.SessionPath {
			r.upgrades.Add(1)
		}
		h.ServeHTTP(w, req)
	}))
	r.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateHijacked {
			r.hijack.Add(1)
		}
	}
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	hclk, _ := clock.NewMonotonic("h")
	r.c = newClient(t, lease.ClientConfig{Clock: hclk, HolderID: "h"}, client.Config{BaseURL: r.srv.URL, Sessions: true})
	t.Cleanup(r.c.CloseIdleConnections)
	return r
}

// cycles acquires, renews, inspects and releases n times.
func (r *sessionRig) cycles(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		l, err := r.c.Acquire(ctx, "r")
		if err == nil {
			l, err = r.c.Renew(ctx, l)
		}
		if err == nil {
			var st client.Status
			if st, err = r.c.Inspect(ctx, "r"); err == nil && !st.Held {
				t.Fatalf("inspect of a held resource: %+v", st)
			}
		}
		if err == nil {
			err = r.c.Release(ctx, l)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestClientSessions: a client with Sessions sends its calls on one
// session to a coordinator that offers them, and as requests, after one
// refused upgrade, to one that does not.
func TestClientSessions(t *testing.T) {
	r := newSessionRig(t, httpapi.NewSessions(httpapi.SessionOptions{}))
	r.cycles(t, 5)
	if u, h := r.upgrades.Load(), r.hijack.Load(); u != 1 || h != 1 {
		t.Fatalf("with sessions: %d upgrades, %d connections turned into sessions; want 1 and 1", u, h)
	}
	r = newSessionRig(t, nil)
	r.cycles(t, 5)
	if u, h := r.upgrades.Load(), r.hijack.Load(); u != 1 || h != 0 {
		t.Fatalf("without sessions: %d upgrades, %d sessions; want 1 and 0", u, h)
	}
}

// TestClientSessionEnded: calls go on when the coordinator ends its
// sessions (a drain): the call whose session was closed is sent again, as
// a request once sessions are refused.
func TestClientSessionEnded(t *testing.T) {
	ss := httpapi.NewSessions(httpapi.SessionOptions{})
	r := newSessionRig(t, ss)
	r.cycles(t, 2)
	if err := ss.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.cycles(t, 2)
	if u := r.upgrades.Load(); u < 2 {
		t.Fatalf("%d upgrades; want the first and one refused after Close", u)
	}
}
