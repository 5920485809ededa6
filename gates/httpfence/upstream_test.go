//go:build !js

package httpfence

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawUpstream accepts connections and runs serve on each, counting them.
type rawUpstream struct {
	ln    net.Listener
	conns atomic.Int32
}

func newRawUpstream(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			wg.Go(func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			})
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return u
}

// newAnsweringUpstream is a raw upstream that reads each request whole
// and writes the reply answer gives for its body, until answer says to hang
// up (after writing its reply).
func newAnsweringUpstream(t *testing.T, answer func(body string) (reply string, more bool)) *rawUpstream {
	return newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			reply, more := answer(string(b))
			_, _ = io.WriteString(c, reply)
			if !more {
				return
			}
		}
	})
}

func (u *rawUpstream) url() string { return "http://" + u.ln.Addr().String() }

func post(t *testing.T, tr http.RoundTripper, u, body string) (*http.Response, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", u+"/w", strings.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

func (t *upstreamTransport) idleCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle)
}

// Requests one after another share one connection.
func TestUpstreamTransportKeepsConnectionsAlive(t *testing.T) {
	var conns atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte("got "), b...))
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	u, _ := url.Parse(up.URL)
	tr := newUpstreamTransport(u.Host)
	defer tr.CloseIdleConnections()
	for i := range 20 {
		resp, body, err := post(t, tr, up.URL, "x"+string(rune('a'+i)))
		if err != nil || resp.StatusCode != 200 || body != "got x"+string(rune('a'+i)) {
			t.Fatalf("request %d: %v %v %q", i, resp, err, body)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 20 requests one after another, want 1", n)
	}
	if tr.idleCount() != 1 {
		t.Fatalf("%d idle connections, want 1", tr.idleCount())
	}
}

// An upstream that closes a kept-alive connection while it sits idle (its
// idle timeout) is noticed before the next write is sent on it: the write
// goes on a fresh connection and arrives once.
func TestUpstreamTransportNoticesAnIdleConnectionClosed(t *testing.T) {
	closed := make(chan struct{}, 16)
	var got atomic.Int32
	up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		got.Add(1)
		_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		// Keep-alive by the protocol, then closed: an idle timeout.
		c.Close()
		closed <- struct{}{}
	})
	tr := newUpstreamTransport(up.ln.Addr().String())
	defer tr.CloseIdleConnections()
	for i := range 3 {
		resp, _, err := post(t, tr, up.url(), "write")
		if err != nil || resp.StatusCode != 204 {
			t.Fatalf("write %d: %v %v", i, resp, err)
		}
		<-closed
	}
	if got.Load() != 3 || up.conns.Load() != 3 {
		t.Fatalf("the upstream got %d writes on %d connections, want 3 on 3", got.Load(), up.conns.Load())
	}
}

// Informational answers (100 Continue, 103 Early Hints) are passed over;
// the final answer is returned.
func TestUpstreamTransportSkipsInformationalAnswers(t *testing.T) {
	up := newAnsweringUpstream(t, func(string) (string, bool) {
		return "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", true
	})
	tr := newUpstreamTransport(up.ln.Addr().String())
	defer tr.CloseIdleConnections()
	for range 2 {
		resp, body, err := post(t, tr, up.url(), "x")
		if err != nil || resp.StatusCode != 201 || body != "ok" {
			t.Fatalf("%v %v %q", resp, err, body)
		}
	}
	if up.conns.Load() != 1 {
		t.Fatalf("%d connections", up.conns.Load())
	}
	// An upstream that switches protocols is an error, not an answer.
	sw := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
		}
		_, _ = io.Copy(io.Discard, c)
	})
	if _, _, err := post(t, newUpstreamTransport(sw.ln.Addr().String()), sw.url(), "x"); err == nil || !strings.Contains(err.Error(), "switched protocols") {
		t.Fatalf("101: %v", err)
	}
}

// A connection is given back only when its answer was read to its end and
// neither side asked to close it.
func TestUpstreamTransportGivesBackOnlyWholeAnswers(t *testing.T) {
	up := newAnsweringUpstream(t, func(body string) (string, bool) {
		switch body {
		case "close":
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false
		case "cut":
			return "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false
		case "http/1.0":
			return "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", true
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true
	})
	tr := newUpstreamTransport(up.ln.Addr().String())
	defer tr.CloseIdleConnections()
	for _, c := range []struct {
		body    string
		ok      bool
		idle    int
		readErr bool
	}{
		{"keep", true, 1, false},
		{"close", true, 0, false},
		{"keep", true, 1, false},
		{"cut", true, 0, true},
		{"http/1.0", true, 0, false},
		{"keep", true, 1, false},
	} {
		resp, body, err := post(t, tr, up.url(), c.body)
		if resp == nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if c.readErr != (err != nil) {
			t.Fatalf("%s: body %q, err %v", c.body, body, err)
		}
		if tr.idleCount() != c.idle {
			t.Fatalf("after %s: %d idle connections, want %d", c.body, tr.idleCount(), c.idle)
		}
	}
	// An answer whose body is closed unread goes back only if it is short.
	resp, err := tr.RoundTrip(mustRequest(t, up.url(), "keep"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if tr.idleCount() != 1 {
		t.Fatalf("a short unread body: %d idle", tr.idleCount())
	}
}

func mustRequest(t *testing.T, u, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", u+"/w", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// brokenConn is a kept-alive connection whose writes fail, as one reset by
// the upstream between the check and the write would.
type brokenConn struct{ net.Conn }

func (brokenConn) Write([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// A request whose write failed on a kept-alive connection is sent again,
// once, on a fresh one (the upstream cannot have acted on it); one whose
// answer did not come is not.
func TestUpstreamTransportResendsOnlyUnsentRequests(t *testing.T) {
	var got atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)
	tr := newUpstreamTransport(u.Host)
	defer tr.CloseIdleConnections()
	a, b := net.Pipe()
	defer b.Close()
	tr.put(&upstreamConn{c: brokenConn{a}, br: bufio.NewReader(a), bw: bufio.NewWriter(brokenConn{a})})
	resp, _, err := post(t, tr, up.URL, "write")
	if err != nil || resp.StatusCode != 200 || got.Load() != 1 {
		t.Fatalf("%v %v; the upstream got %d", resp, err, got.Load())
	}
	// Without GetBody the body cannot be sent again: the error is returned.
	c, d := net.Pipe()
	defer d.Close()
	tr.CloseIdleConnections()
	tr.put(&upstreamConn{c: brokenConn{c}, br: bufio.NewReader(c), bw: bufio.NewWriter(brokenConn{c})})
	once := mustRequest(t, up.URL, "write")
	once.GetBody = nil
	if _, err := tr.RoundTrip(once); err == nil || got.Load() != 1 {
		t.Fatalf("a body that cannot be read again: %v; the upstream got %d", err, got.Load())
	}
	// No answer after a whole request: not sent again.
	var seen atomic.Int32
	silent := newAnsweringUpstream(t, func(string) (string, bool) {
		if seen.Add(1) == 2 {
			return "", false // the second request gets no answer
		}
		return "HTTP/1.1 204 No Content\r\n\r\n", true
	})
	tr2 := newUpstreamTransport(silent.ln.Addr().String())
	defer tr2.CloseIdleConnections()
	if _, _, err := post(t, tr2, silent.url(), "one"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := post(t, tr2, silent.url(), "two"); err == nil {
		t.Fatal("a request without an answer succeeded")
	}
	if seen.Load() != 2 {
		t.Fatalf("the upstream saw %d requests, want 2 (no resend)", seen.Load())
	}
}

// A context that ends stops a request waiting for its answer at once.
func TestUpstreamTransportStopsWhenTheContextEnds(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	arrived := make(chan struct{}, 1)
	up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil {
			arrived <- struct{}{}
			<-hold
		}
	})
	tr := newUpstreamTransport(up.ln.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", up.url()+"/slow", nil)
	done := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		done <- err
	}()
	<-arrived
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not stop when its context was cancelled")
	}
}

// countingConn counts the writes on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A request's head and its body in memory leave in one write, whatever
// wraps the body (ReverseProxy wraps every body it forwards).
func TestUpstreamTransportWritesHeadAndBodyTogether(t *testing.T) {
	up := newAnsweringUpstream(t, func(string) (string, bool) { return "HTTP/1.1 204 No Content\r\n\r\n", true })
	tr := newUpstreamTransport(up.ln.Addr().String())
	defer tr.CloseIdleConnections()
	c, err := net.Dial("tcp", up.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int32
	cc := countingConn{c, &writes}
	tr.put(&upstreamConn{c: cc, br: bufio.NewReader(cc), bw: bufio.NewWriter(cc)})
	req := mustRequest(t, up.url(), strings.Repeat("x", 100))
	req.Body = struct{ io.ReadCloser }{req.Body} // a body of a type nobody knows
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if writes.Load() != 1 {
		t.Fatalf("%d writes for one request, want 1", writes.Load())
	}
}
