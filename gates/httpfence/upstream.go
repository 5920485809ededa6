package httpfence

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// upstreamTransport is the Proxy's default http.RoundTripper for an http://
// upstream: HTTP/1.1 over kept-alive connections, each request written and
// its answer read on the goroutine that forwards it, with net/http's own
// Request.Write and ReadResponse. http.Transport runs two goroutines per
// connection and hands every request and answer between them and the
// caller, and flushes a request's head before a body it does not know to be
// in memory (ReverseProxy wraps every body), so each write costs two more
// goroutine switches and one more write to the socket.
// BenchmarkUpstreamTransport, at load 12 on two shared cores: a write
// through the proxy took 1.10/1.25/1.28x (min/median/max of three runs) as
// long over http.Transport with one writer, 0.99/1.06/1.28x with four. The
// protocol stays net/http's: only the connections are managed here.
//
// A connection taken from the pool is checked before use (a peek that does
// not wait: an upstream that closed it while it sat idle is noticed then,
// as http.Transport's reader goroutine notices it), so a write is not sent
// on a connection already closed. A request is sent again on a fresh
// connection only if writing it failed on a kept-alive one (the upstream
// cannot have acted on a request it did not receive whole); a request whose
// answer did not come is not (the upstream may have acted on it).
type upstreamTransport struct {
	addr    string // host:port
	dialer  net.Dialer
	maxIdle int
	idleFor time.Duration

	mu     sync.Mutex
	idle   []*upstreamConn // most recently used last
	closed bool
}

type upstreamConn struct {
	c         net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

func newUpstreamTransport(addr string) *upstreamTransport {
	return &upstreamTransport{
		addr:    addr,
		dialer:  net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle: 256,
		idleFor: 90 * time.Second,
	}
}

// get returns a kept-alive connection that is still open, or nil.
func (t *upstreamTransport) get() *upstreamConn {
	now := time.Now()
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			return nil
		}
		pc := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if now.Sub(pc.idleSince) < t.idleFor && pc.br.Buffered() == 0 && stillOpen(pc.c) {
			return pc
		}
		pc.c.Close()
	}
}

func (t *upstreamTransport) put(pc *upstreamConn) {
	pc.idleSince = time.Now()
	t.mu.Lock()
	if t.closed || len(t.idle) >= t.maxIdle {
		t.mu.Unlock()
		pc.c.Close()
		return
	}
	t.idle = append(t.idle, pc)
	t.mu.Unlock()
}

// CloseIdleConnections closes the kept-alive connections not in use.
func (t *upstreamTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, pc := range idle {
		pc.c.Close()
	}
}

func (t *upstreamTransport) dial(ctx context.Context) (*upstreamConn, error) {
	c, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	return &upstreamConn{c: c, br: bufio.NewReaderSize(c, 4<<10), bw: bufio.NewWriterSize(c, 4<<10)}, nil
}

// bufferedWriter is a *bufio.Writer that Request.Write does not recognise
// as one (see exchange).
type bufferedWriter struct{ *bufio.Writer }

// errWriteFailed marks a request that was not sent whole.
type errWriteFailed struct{ err error }

func (e errWriteFailed) Error() string { return e.err.Error() }
func (e errWriteFailed) Unwrap() error { return e.err }

var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip sends req to the upstream and returns its answer, whose body
// reads from the connection (which goes back to the pool once the body is
// read to its end and closed).
func (t *upstreamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Scheme != "http" {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("httpfence: the upstream transport speaks http:// only")
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		pc := t.get()
		reused := pc != nil
		if pc == nil {
			var err error
			if pc, err = t.dial(ctx); err != nil {
				closeBody(req)
				return nil, err
			}
		}
		resp, err := t.exchange(ctx, pc, req)
		if err == nil {
			return resp, nil
		}
		var wf errWriteFailed
		if reused && attempt == 0 && errors.As(err, &wf) && ctx.Err() == nil {
			if req.Body == nil || req.Body == http.NoBody {
				continue
			}
			if req.GetBody != nil {
				if body, gerr := req.GetBody(); gerr == nil {
					r2 := *req
					r2.Body = body
					req = &r2
					continue
				}
			}
		}
		closeBody(req)
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("%w (%v)", cerr, err)
		}
		return nil, err
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// exchange writes req on pc and reads the answer's head. On an error it has
// closed pc.
func (t *upstreamTransport) exchange(ctx context.Context, pc *upstreamConn, req *http.Request) (*http.Response, error) {
	// A context that ends (the request's deadline, or its cancellation)
	// stops any read or write on the connection at once: the connection
	// gets a deadline in the past then, and none otherwise (setting and
	// clearing the context's deadline on it for each request would cost
	// two timer updates a request for what the context's timer does).
	stop := context.AfterFunc(ctx, func() { _ = pc.c.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		pc.c.Close()
		return nil, err
	}
	// Request.Write flushes the head of a request with a body it does not
	// know to be in memory (ReverseProxy's wrapper of any body) before the
	// body, if it writes to a *bufio.Writer: given another type, it writes
	// head and body into the buffer, which leaves in one write (or more for
	// a body larger than the buffer) when flushed here.
	if err := req.Write(bufferedWriter{pc.bw}); err != nil {
		return fail(errWriteFailed{err})
	}
	if err := pc.bw.Flush(); err != nil {
		return fail(errWriteFailed{err})
	}
	for {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			return fail(err)
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			resp.Body.Close()
			return fail(errors.New("httpfence: the upstream switched protocols"))
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			// An informational answer (100 Continue, 103 Early Hints):
			// the final one follows.
			continue
		}
		resp.Body = &upstreamBody{rc: resp.Body, t: t, pc: pc, stop: stop,
			keep: !resp.Close && !req.Close && resp.ProtoAtLeast(1, 1)}
		return resp, nil
	}
}

// upstreamBody is an answer's body; it gives its connection back to the
// pool when read to its end and closed, and closes it otherwise.
type upstreamBody struct {
	rc   io.ReadCloser
	t    *upstreamTransport
	pc   *upstreamConn
	stop func() bool
	keep bool

	mu   sync.Mutex
	eof  bool // read to its end
	bad  bool // a read failed (a body cut short): the connection is spent
	done bool
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.mu.Lock()
		if err == io.EOF {
			b.eof = true
		} else {
			b.bad = true
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *upstreamBody) Close() error {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return nil
	}
	b.done = true
	eof, keep := b.eof, b.keep && !b.bad
	b.mu.Unlock()
	if !eof && keep {
		// A short rest (an empty body never read) is read here; a long
		// one is not worth waiting for.
		if _, err := io.CopyN(io.Discard, b.rc, 4<<10); err == io.EOF {
			eof = true
		}
	}
	_ = b.rc.Close()
	// stop reports false if the context already ended: the connection's
	// deadline may then be in the past.
	if b.stop() && eof && keep {
		b.t.put(b.pc)
		return nil
	}
	return b.pc.c.Close()
}
