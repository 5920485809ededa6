package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// echoBackend grants every acquisition with the next fence, and can hold
// its answer until released.
type echoBackend struct {
	fence atomic.Uint64
	hold  chan struct{} // if not nil, each call waits for it
}

func (b *echoBackend) Call(ctx context.Context, m wire.Message) (wire.Reply, error) {
	if b.hold != nil {
		select {
		case <-b.hold:
		case <-ctx.Done():
			return wire.Reply{}, ctx.Err()
		}
	}
	if m.Op == wire.OpRelease {
		return wire.Reply{OK: true}, nil
	}
	q := m.Request
	return wire.Reply{OK: true, Grant: &wire.Grant{RequestID: q.RequestID, Resource: q.Resource, HolderID: q.HolderID,
		Fence: b.fence.Add(1), TTLMillis: 1000, CoordinatorExpiresAt: wire.Instant{Millis: 1, Domain: "coordinator"}}}, nil
}

// connServer is an HTTP server on 127.0.0.1 that counts the connections it
// accepted and can close them all.
type connServer struct {
	*httptest.Server
	mu    sync.Mutex
	conns []net.Conn
}

func newConnServer(t *testing.T, b httpapi.Backend) *connServer {
	s := &connServer{}
	s.Server = httptest.NewUnstartedServer(httpapi.NewHandler(b, httpapi.HandlerOptions{}))
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *connServer) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *connServer) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

func newTestClient(t *testing.T, url string, timeout time.Duration, attempts int) *Client {
	t.Helper()
	clk, _ := clock.NewMonotonic("h")
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "h"})
	c, err := New(Config{BaseURL: url, Lease: lc, AttemptTimeout: timeout, Attempts: attempts, Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if c.conns == nil {
		t.Fatal("an http:// client without HTTPClient does not use its own connections")
	}
	return c
}

// TestConnPoolKeepsConnections: calls reuse one kept-alive connection;
// concurrent calls open more; a connection the server closed while idle is
// replaced without costing the call an attempt.
func TestConnPoolKeepsConnections(t *testing.T) {
	srv := newConnServer(t, &echoBackend{})
	c := newTestClient(t, srv.URL, 5*time.Second, 1)
	ctx := context.Background()
	for range 5 {
		l, err := c.Acquire(ctx, "r")
		if err == nil {
			err = c.Release(ctx, l)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.accepted(); n != 1 {
		t.Fatalf("10 calls in a row opened %d connections", n)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Acquire(ctx, "r"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	before := srv.accepted()
	srv.closeAll()
	// The next call finds its kept connection closed, and goes through on a
	// new one within its one attempt.
	if _, err := c.Acquire(ctx, "after-close"); err != nil {
		t.Fatalf("after the server closed the idle connections: %v", err)
	}
	if srv.accepted() != before+1 {
		t.Fatalf("%d connections before, %d after", before, srv.accepted())
	}
	c.CloseIdleConnections()
	if len(c.conns[0].idle) != 0 {
		t.Fatal("idle connections kept after CloseIdleConnections")
	}
}

// TestConnPoolTimeoutsAndCancel: an answer that does not come within the
// attempt timeout fails the attempt (and the connection is not reused);
// a cancelled context ends the call at once.
func TestConnPoolTimeoutsAndCancel(t *testing.T) {
	b := &echoBackend{hold: make(chan struct{})}
	srv := newConnServer(t, b)
	c := newTestClient(t, srv.URL, 30*time.Millisecond, 2)
	start := time.Now()
	_, err := c.Acquire(context.Background(), "r")
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a held answer: %v", err)
	}
	if srv.accepted() != 2 {
		t.Fatalf("the two attempts used %d connections", srv.accepted())
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.timeout = time.Hour
	done := make(chan error, 1)
	go func() { _, err := c.Acquire(ctx, "r"); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled call: %v", err)
	}
	close(b.hold)
	if _, err := c.Acquire(context.Background(), "r"); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > time.Minute {
		t.Fatal("the calls took far longer than their timeouts")
	}
}
