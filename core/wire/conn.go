package wire

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// connPool is the Client's own HTTP/1.1 transport for a plain http://
// coordinator reached without a proxy: kept-alive connections, each request
// written and its answer read on the calling goroutine. net/http's Transport
// hands every request to two goroutines of the connection and back, which
// costs more than the whole call on a loopback coordinator.
type connPool struct {
	addr   string // host:port to dial
	host   string // the Host header
	prefix string // BaseURL's path, without a trailing slash
	dialer net.Dialer

	mu   sync.Mutex
	idle []*pconn // most recently used last
}

// maxIdleConns bounds the connections a Client keeps open between calls.
const maxIdleConns = 64

type pconn struct {
	nc   net.Conn
	br   *bufio.Reader
	wbuf []byte
}

// proxyFor is the proxy net/http's default Transport would use; tests
// replace it (http.ProxyFromEnvironment reads the environment only once).
var proxyFor = http.ProxyFromEnvironment

// newConnPool returns a pool for base, or nil if base needs net/http: not
// http, a proxy configured for it, user info or a query in it, or a platform
// without sockets.
func newConnPool(base string) *connPool {
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil
	}
	probe := &http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}}
	if p, err := proxyFor(probe); err != nil || p != nil {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return &connPool{
		addr:   net.JoinHostPort(u.Hostname(), port),
		host:   u.Host,
		prefix: u.EscapedPath(),
	}
}

func (p *connPool) get(ctx context.Context, deadline time.Time) (pc *pconn, reused bool, err error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		pc = p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return pc, true, nil
	}
	p.mu.Unlock()
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	nc, err := p.dialer.DialContext(dctx, "tcp", p.addr)
	if err != nil {
		return nil, false, err
	}
	return &pconn{nc: nc, br: bufio.NewReaderSize(nc, 4096)}, false, nil
}

func (p *connPool) put(pc *pconn) {
	p.mu.Lock()
	if len(p.idle) < maxIdleConns {
		p.idle = append(p.idle, pc)
		pc = nil
	}
	p.mu.Unlock()
	if pc != nil {
		pc.nc.Close()
	}
}

func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, pc := range idle {
		pc.nc.Close()
	}
}

// post sends body to path and returns the status and body of the answer.
// Every read and write ends by deadline, or as soon as ctx is done.
//
// A kept-alive connection the server closed while it sat idle fails before
// any answer arrives; the request is then sent once more on a new
// connection, which is safe for this protocol (the same request id is
// answered the same way) and does not count as an attempt.
func (p *connPool) post(ctx context.Context, deadline time.Time, path string, body []byte) (int, []byte, error) {
	for resend := true; ; resend = false {
		pc, reused, err := p.get(ctx, deadline)
		if err != nil {
			return 0, nil, err
		}
		status, data, keep, answered, err := p.roundTrip(ctx, pc, deadline, path, body)
		if err == nil {
			if keep {
				p.put(pc)
			} else {
				pc.nc.Close()
			}
			return status, data, nil
		}
		pc.nc.Close()
		if !(resend && reused && !answered && ctx.Err() == nil && closedByPeer(err)) {
			return 0, nil, err
		}
	}
}

func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// deadlinePast is a deadline that has passed: set on a connection, it makes
// its pending reads and writes return at once.
var deadlinePast = time.Unix(1, 0)

func (p *connPool) roundTrip(ctx context.Context, pc *pconn, deadline time.Time, path string, body []byte) (status int, data []byte, keep, answered bool, err error) {
	if err := pc.nc.SetDeadline(deadline); err != nil {
		return 0, nil, false, false, err
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { _ = pc.nc.SetDeadline(deadlinePast) })
		defer func() {
			if !stop() {
				keep = false // the deadline may be the past one now
			}
		}()
	}
	b := append(pc.wbuf[:0], "POST "...)
	b = append(b, p.prefix...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, p.host...)
	b = append(b, "\r\nUser-Agent: lease-fence-wire\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	pc.wbuf = b
	if _, err := pc.nc.Write(b); err != nil {
		return 0, nil, false, false, err
	}
	if _, err := pc.br.Peek(1); err != nil {
		return 0, nil, false, false, err
	}
	resp, err := http.ReadResponse(pc.br, nil)
	if err != nil {
		return 0, nil, false, true, err
	}
	if n := resp.ContentLength; n >= 0 && n <= maxReplyBytes {
		data = make([]byte, n)
		_, err = io.ReadFull(resp.Body, data)
		keep = err == nil && !resp.Close
	} else {
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
		// Reuse only a connection whose answer was read to its end.
		keep = err == nil && n < 0 && !resp.Close && len(data) < maxReplyBytes
		if keep {
			var one [1]byte
			m, rerr := resp.Body.Read(one[:])
			keep = m == 0 && rerr == io.EOF
		}
	}
	resp.Body.Close()
	if err != nil {
		return 0, nil, false, true, err
	}
	return resp.StatusCode, data, keep, true, nil
}
