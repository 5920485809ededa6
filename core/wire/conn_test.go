package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// faultServer is the handler of a rig on a real loopback socket, with a
// fault per request (as the test transport of client_test.go applies them)
// and a count of the connections clients opened.
type faultServer struct {
	*rig
	srv     *httptest.Server
	conns   atomic.Int64
	mu      sync.Mutex
	plan    []fault
	sent    int
	done    chan struct{} // closed when the test ends: releases held replies
	holding chan struct{} // one value per reply being held
}

func newFaultServer(t *testing.T, plan ...fault) *faultServer {
	t.Helper()
	fs := &faultServer{rig: newRig(t, nil), plan: plan, done: make(chan struct{}), holding: make(chan struct{}, len(plan))}
	fs.srv = httptest.NewUnstartedServer(http.HandlerFunc(fs.serve))
	fs.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			fs.conns.Add(1)
		}
	}
	fs.srv.Start()
	t.Cleanup(func() { close(fs.done); fs.srv.Close() })
	return fs
}

func (fs *faultServer) serve(w http.ResponseWriter, r *http.Request) {
	fs.mu.Lock()
	f := deliver
	if fs.sent < len(fs.plan) {
		f = fs.plan[fs.sent]
	}
	fs.sent++
	fs.mu.Unlock()
	hangUp := func() {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	switch f {
	case dropRequest:
		hangUp()
		return
	case dropReply, holdReply:
		fs.h.ServeHTTP(httptest.NewRecorder(), r)
		if f == holdReply {
			fs.holding <- struct{}{}
			select { // the client gives up on the attempt and closes the connection
			case <-r.Context().Done():
			case <-fs.done:
			}
		}
		hangUp()
		return
	}
	fs.h.ServeHTTP(w, r)
}

// client returns a Client in its default configuration (no HTTPClient),
// which uses its own connection pool for this http:// URL.
func (fs *faultServer) client(t *testing.T, holder string, attempts int) *Client {
	t.Helper()
	agent, _ := clock.NewManual("agent-"+holder, clock.ManualOptions{Start: 50})
	lc, err := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: holder, ClockSkew: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ClientConfig{
		BaseURL:  fs.srv.URL,
		Lease:    lc,
		Attempts: attempts,
		// Only holdReply attempts wait for it; long enough that no other
		// attempt reaches it on a loaded machine.
		AttemptTimeout: 500 * time.Millisecond,
		Backoff:        func(int) time.Duration { return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.direct == nil {
		t.Fatal("the default client does not use its own connection pool")
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// TestDirectClientRetries: over a real socket, whatever happens to the
// first attempts, an acquisition ends with exactly one fence issued, and a
// lease anchored at the first send.
func TestDirectClientRetries(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan []fault
	}{
		{"none", nil},
		{"reply dropped", []fault{dropReply}},
		{"request dropped", []fault{dropRequest}},
		{"reply delayed past the timeout", []fault{holdReply}},
		{"everything at once", []fault{dropRequest, holdReply, dropReply}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFaultServer(t, tc.plan...)
			c := fs.client(t, "a", 4)
			l, err := c.Acquire(context.Background(), "deploy")
			if err != nil {
				t.Fatal(err)
			}
			if fs.sent != len(tc.plan)+1 {
				t.Fatalf("%d attempts, want %d", fs.sent, len(tc.plan)+1)
			}
			st := fs.state("deploy")
			if st.IssuedFence != 1 || l.Token().Fence != 1 || st.Lease.Secret != l.secret || l.Deadline().Millis != 50+1000-10 {
				t.Fatalf("issued %d, lease %v", st.IssuedFence, l)
			}
			if l, err = c.Renew(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			if err := c.Release(context.Background(), l); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDirectClientReusesConnections: 8 goroutines sharing one Client open
// at most 8 connections however many calls they make (the connection goes
// back to the pool before a call returns).
func TestDirectClientReusesConnections(t *testing.T) {
	fs := newFaultServer(t)
	c := fs.client(t, "a", 1)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := "r" + strconv.Itoa(g)
			for range 25 {
				l, err := c.Acquire(context.Background(), res)
				if err == nil {
					err = c.Release(context.Background(), l)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := fs.conns.Load(); n < 1 || n > 8 {
		t.Fatalf("400 calls from 8 goroutines opened %d connections", n)
	}
}

// TestDirectClientResendsOnAStaleConnection: a kept-alive connection the
// server closed while it was idle is replaced without using an attempt.
func TestDirectClientResendsOnAStaleConnection(t *testing.T) {
	fs := newFaultServer(t)
	c := fs.client(t, "a", 1)
	ctx := context.Background()
	l, err := c.Acquire(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	fs.srv.CloseClientConnections()
	if err := c.Release(ctx, l); err != nil {
		t.Fatalf("release on a connection the server closed: %v", err)
	}
	if fs.sent != 2 || fs.conns.Load() != 2 {
		t.Fatalf("%d requests served on %d connections, want 2 on 2", fs.sent, fs.conns.Load())
	}
	if st := fs.state("deploy"); st.Lease != nil || st.IssuedFence != 1 {
		t.Fatalf("state %+v", st)
	}
}

// TestDirectClientContext: a context that ends while a reply is awaited
// ends the call at once with the context's error, and a cancelled context
// sends nothing.
func TestDirectClientContext(t *testing.T) {
	fs := newFaultServer(t, holdReply, holdReply, holdReply, holdReply)
	agent, _ := clock.NewManual("agent-a", clock.ManualOptions{Start: 50})
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a"})
	// An attempt timeout far beyond the test: only the context can end it.
	c, err := NewClient(ClientConfig{BaseURL: fs.srv.URL, Lease: lc, AttemptTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "deploy")
		errc <- err
	}()
	<-fs.holding // the server processed the request and holds the reply
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while waiting: %v", err)
	}
	if _, err := c.Acquire(ctx, "deploy"); !errors.Is(err, context.Canceled) || fs.sent != 1 {
		t.Fatalf("cancelled before sending: %v after %d requests", err, fs.sent)
	}
}

// TestClientTransportChoice: the Client's own pool is used only for a
// plain http:// URL without a proxy; otherwise net/http, with enough idle
// connections kept for concurrent callers.
func TestClientTransportChoice(t *testing.T) {
	agent, _ := clock.NewManual("a", clock.ManualOptions{})
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a"})
	defer func(old func(*http.Request) (*url.URL, error)) { proxyFor = old }(proxyFor)
	proxyFor = func(r *http.Request) (*url.URL, error) { // as with HTTP_PROXY=http://proxy.test NO_PROXY=127.0.0.1
		if r.URL.Hostname() == "127.0.0.1" || r.URL.Hostname() == "localhost" {
			return nil, nil
		}
		return url.Parse("http://proxy.test:3128")
	}
	for _, tc := range []struct {
		url    string
		direct bool
	}{
		{"http://127.0.0.1:8787", true},
		{"http://127.0.0.1:8787/prefix/", true},
		{"http://coordinator.test:8787", false}, // HTTP_PROXY applies
		{"https://127.0.0.1:8787", false},
		{"http://user:pw@127.0.0.1:8787", false},
	} {
		c, err := NewClient(ClientConfig{BaseURL: tc.url, Lease: lc})
		if err != nil {
			t.Fatal(err)
		}
		if (c.direct != nil) != tc.direct {
			t.Errorf("%s: own pool %v, want %v", tc.url, c.direct != nil, tc.direct)
		}
		if tr, ok := c.hc.Transport.(*http.Transport); !ok || tr.MaxIdleConnsPerHost < 8 || tr.Proxy == nil {
			t.Errorf("%s: net/http transport %+v", tc.url, c.hc.Transport)
		}
	}
	c, _ := NewClient(ClientConfig{BaseURL: "http://127.0.0.1:8787/prefix/", Lease: lc})
	if c.direct.prefix != "/prefix" || c.direct.host != "127.0.0.1:8787" || c.direct.addr != "127.0.0.1:8787" {
		t.Errorf("pool %+v", c.direct)
	}
	c, _ = NewClient(ClientConfig{BaseURL: "http://localhost", Lease: lc})
	if c.direct == nil || c.direct.addr != "localhost:80" {
		t.Errorf("pool for http://localhost: %+v", c.direct)
	}
}

// FuzzReadHead: whatever readHead takes, http.ReadResponse reads the same
// way (status, length, whether the connection closes, where the body
// starts); whatever it leaves, it leaves unread.
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: 11\r\nDate: Mon, 30 Nov 2026 14:00:00 GMT\r\n\r\n{\"ok\":true}",
		"HTTP/1.1 403 Forbidden\r\ncontent-length: 2\r\nConnection: keep-alive, Close\r\n\r\n{}",
		"HTTP/1.1 200\r\nContent-Length:0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n folded\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nX: a\x01b\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		st, n, closing, ok, err := readHead(br)
		if !ok {
			if err == nil { // nothing consumed
				rest, _ := io.ReadAll(br)
				if !bytes.Equal(rest, data) {
					t.Fatalf("%q: declined but consumed %d bytes", data, len(data)-len(rest))
				}
			}
			return
		}
		bodyAt := len(data) - br.Buffered()
		rr := bufio.NewReaderSize(bytes.NewReader(data), 4096)
		resp, err := http.ReadResponse(rr, nil)
		if err != nil {
			t.Fatalf("%q: readHead took it (status %d, length %d), http.ReadResponse: %v", data, st, n, err)
		}
		if resp.StatusCode != st || resp.ContentLength != n || resp.Close != closing || len(data)-rr.Buffered() != bodyAt {
			t.Fatalf("%q: readHead %d %d %v body at %d, http.ReadResponse %d %d %v body at %d",
				data, st, n, closing, bodyAt, resp.StatusCode, resp.ContentLength, resp.Close, len(data)-rr.Buffered())
		}
	})
}

// TestDirectClientRefusesInterimAnswers: an unsolicited 100 Continue before
// the answer ends the attempt and the connection instead of leaving the
// real answer to be read as the next call's.
func TestDirectClientRefusesInterimAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
				_, _ = br.ReadByte() // until the client hangs up
			}()
		}
	}()
	p := newConnPool("http://" + ln.Addr().String())
	_, _, err = p.post(context.Background(), time.Now().Add(time.Minute), "/v1/release", []byte(`{}`))
	if err == nil {
		t.Fatal("an interim answer was taken")
	}
	if len(p.idle) != 0 {
		t.Fatal("the connection went back to the pool")
	}
}
