package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// connPool is how a Client without an HTTPClient calls an http://
// coordinator: HTTP/1.1 over kept-alive connections, the calling goroutine
// writing each request (a POST: the request line, three headers, the JSON
// body) and reading its answer with net/http's http.ReadResponse. An
// http.Transport would hand each request to a writer goroutine and each
// answer back from a reader goroutine, which measured about 140 us of
// latency and 76 us of CPU more per acquire + release cycle here
// (docs/service.md, "The Go client"). For an https:// coordinator each
// connection is a crypto/tls client connection, its handshake made when it
// is opened. Proxies and the rest are left to an HTTPClient.
type connPool struct {
	host       string // host:port to dial
	hostHeader string // the Host header
	prefix     string // the base URL's path ("/prefix"), escaped, without a trailing slash
	tls        *tls.Config
	authLine   string // "Authorization: Bearer ...\r\n", or empty
	dialer     net.Dialer
	mu         sync.Mutex
	idle       []*persistConn // most recently used last
}

type persistConn struct {
	net.Conn
	br  *bufio.Reader
	buf []byte
}

// aLongTimeAgo is a deadline in the past: setting it makes a blocked read
// or write on the connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// call posts body to path and returns the answer's status and body. A
// failure on a kept-alive connection that the server may have closed is
// tried once more on a new connection (calls are safe to repeat: a retry
// carries the same request id); a timeout or the end of ctx is not.
func (p *connPool) call(ctx context.Context, timeout time.Duration, path string, body []byte) (int, []byte, error) {
	for {
		pc, reused, err := p.get(ctx)
		if err != nil {
			return 0, nil, err
		}
		status, data, err := p.exchange(ctx, timeout, pc, path, body)
		if err != nil && reused && ctx.Err() == nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		return status, data, err
	}
}

func (p *connPool) exchange(ctx context.Context, timeout time.Duration, pc *persistConn, path string, body []byte) (int, []byte, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pc.SetDeadline(deadline)
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = pc.SetDeadline(aLongTimeAgo) })
	}
	b := append(pc.buf[:0], "POST "...)
	b = append(append(append(append(b, p.prefix...), path...), " HTTP/1.1\r\nHost: "...), p.hostHeader...)
	b = append(append(b, "\r\n"...), p.authLine...)
	b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
	b = append(append(strconv.AppendInt(b, int64(len(body)), 10), "\r\n\r\n"...), body...)
	pc.buf = b
	_, err := pc.Write(b)
	var resp *http.Response
	var data []byte
	if err == nil {
		resp, err = http.ReadResponse(pc.br, nil)
	}
	if err == nil {
		if n := resp.ContentLength; n >= 0 && n < maxReplyBytes {
			// The answer's length is known (the coordinator always says
			// it): one read into a buffer of that size.
			data = make([]byte, n)
			_, err = io.ReadFull(resp.Body, data)
		} else {
			data, err = io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
		}
		resp.Body.Close()
	}
	if !stop() {
		err = errors.Join(ctx.Err(), err) // the context ended the call
	}
	if err != nil || resp.Close || len(data) == maxReplyBytes {
		pc.Close()
	} else {
		p.put(pc)
	}
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, data, nil
}

func (p *connPool) get(ctx context.Context) (*persistConn, bool, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		pc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return pc, true, nil
	}
	p.mu.Unlock()
	c, err := p.dialer.DialContext(ctx, "tcp", p.host)
	if err != nil {
		return nil, false, err
	}
	if p.tls != nil {
		tc := tls.Client(c, p.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, false, err
		}
		c = tc
	}
	return &persistConn{Conn: c, br: bufio.NewReader(c)}, false, nil
}

func (p *connPool) put(pc *persistConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdleConns {
		pc.Close()
		return
	}
	p.idle = append(p.idle, pc)
}

// closeIdle closes the connections kept for later calls.
func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, pc := range idle {
		pc.Close()
	}
}
