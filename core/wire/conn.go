package wire

import (
	"bufio"
	"bytes"
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
	if st, n, closing, ok, err := readHead(pc.br); err != nil {
		return 0, nil, false, true, err
	} else if ok {
		if n > maxReplyBytes {
			return 0, nil, false, true, errors.New("wire: answer of " + strconv.FormatInt(n, 10) + " bytes is too large")
		}
		data = make([]byte, n)
		if _, err := io.ReadFull(pc.br, data); err != nil {
			return 0, nil, false, true, err
		}
		return st, data, !closing, true, nil
	}
	resp, err := http.ReadResponse(pc.br, nil)
	if err != nil {
		return 0, nil, false, true, err
	}
	if resp.StatusCode < 200 {
		// An interim answer nobody asked for (the client never sends
		// Expect): the real one may follow, so the connection cannot be
		// trusted to be in step.
		resp.Body.Close()
		return 0, nil, false, true, errors.New("wire: unexpected interim answer " + strconv.Itoa(resp.StatusCode))
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

// readHead reads the status line and header of an answer in the plain shape
// the handler's server writes: HTTP/1.1, a final status other than 204 and
// 304, one Content-Length, no Transfer-Encoding, no folded lines. It
// returns the status, the body's length and whether the server closes the
// connection after it. For any other answer it returns ok false and
// consumes nothing, and http.ReadResponse reads it instead.
func readHead(br *bufio.Reader) (status int, length int64, closing, ok bool, err error) {
	var head []byte
	for n := 1; ; n++ {
		if b := br.Buffered(); b >= n {
			n = b
		}
		if n > br.Size() {
			return 0, 0, false, false, nil
		}
		buf, err := br.Peek(n)
		if err != nil {
			return 0, 0, false, false, err
		}
		if i := bytes.Index(buf, crlfcrlf); i >= 0 {
			head = buf[:i+4]
			break
		}
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(head) < 14 || string(head[:9]) != "HTTP/1.1 " || !digit(head[9]) || !digit(head[10]) || !digit(head[11]) || (head[12] != ' ' && head[12] != '\r') {
		return 0, 0, false, false, nil
	}
	if bytes.Count(head, crlf) != bytes.Count(head, crlf[1:]) { // a bare LF ends a line too
		return 0, 0, false, false, nil
	}
	for _, c := range head[:bytes.Index(head, crlf)] {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return 0, 0, false, false, nil
		}
	}
	status = int(head[9]-'0')*100 + int(head[10]-'0')*10 + int(head[11]-'0')
	if status < 200 || status == 204 || status == 304 {
		return 0, 0, false, false, nil
	}
	rest := head[bytes.Index(head, crlf)+2 : len(head)-2]
	length = -1
	for len(rest) > 0 {
		i := bytes.Index(rest, crlf)
		line := rest[:i]
		rest = rest[i+2:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || line[0] == ' ' || line[0] == '\t' {
			return 0, 0, false, false, nil
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		for _, c := range name {
			if !tokenByte(c) {
				return 0, 0, false, false, nil
			}
		}
		for _, c := range value {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return 0, 0, false, false, nil
			}
		}
		switch {
		case asciiEqualFold(name, "Content-Length"):
			if length >= 0 || len(value) == 0 || len(value) > 18 {
				return 0, 0, false, false, nil
			}
			length = 0
			for _, c := range value {
				if !digit(c) {
					return 0, 0, false, false, nil
				}
				length = length*10 + int64(c-'0')
			}
		case asciiEqualFold(name, "Transfer-Encoding"):
			return 0, 0, false, false, nil
		case asciiEqualFold(name, "Connection"):
			for _, tok := range bytes.Split(value, []byte(",")) {
				if asciiEqualFold(bytes.Trim(tok, " \t"), "close") {
					closing = true
				}
			}
		}
	}
	if length < 0 {
		return 0, 0, false, false, nil
	}
	if _, err := br.Discard(len(head)); err != nil {
		return 0, 0, false, false, err
	}
	return status, length, closing, true, nil
}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
)

func digit(c byte) bool { return '0' <= c && c <= '9' }

// tokenByte reports whether c may appear in a header name (RFC 9110 tchar).
func tokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', digit(c):
		return true
	}
	return c != 0 && bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}
