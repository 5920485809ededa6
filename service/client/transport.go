package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/service/wire"
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
	// Call sessions (Config.Sessions): whether to open them, whether the
	// coordinator refused one (then no more are tried), and the idle ones.
	sessions  bool
	noSession atomic.Bool  // refused with a 4xx: not offered
	retrySess atomic.Int64 // refused with a 5xx (a draining coordinator): not asked for again before this (UnixNano)
	idleSess  []*persistConn
}

type persistConn struct {
	net.Conn
	br   *bufio.Reader
	buf  []byte
	sess bool // a call session (wire.SessionPath), not HTTP
}

// aLongTimeAgo is a deadline in the past: setting it makes a blocked read
// or write on the connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// call posts body to path and returns the answer's status and body. A
// failure on a kept-alive connection that the server may have closed is
// tried once more on a new connection (calls are safe to repeat: a retry
// carries the same request id); a timeout or the end of ctx is not.
// sess is the call's number on a session, or -1: the call is sent as a
// request.
func (p *connPool) call(ctx context.Context, timeout time.Duration, path string, body []byte, sess int) (int, []byte, error) {
	for {
		if sess >= 0 && (!p.sessions || p.noSession.Load() || time.Now().UnixNano() < p.retrySess.Load()) {
			sess = -1
		}
		pc, reused, err := p.get(ctx, timeout, sess >= 0)
		if err != nil {
			return 0, nil, err
		}
		var status int
		var data []byte
		if pc.sess {
			status, data, err = p.exchangeFrame(ctx, timeout, pc, sess, body)
		} else {
			status, data, err = p.exchange(ctx, timeout, pc, path, body)
		}
		if err != nil && reused && ctx.Err() == nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		return status, data, err
	}
}

func (p *connPool) exchange(ctx context.Context, timeout time.Duration, pc *persistConn, path string, body []byte) (int, []byte, error) {
	stop := p.bound(ctx, timeout, pc)
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

// exchangeFrame sends the call numbered op with body on the session pc
// and reads its answer (wire.SessionPath's frames).
func (p *connPool) exchangeFrame(ctx context.Context, timeout time.Duration, pc *persistConn, op int, body []byte) (int, []byte, error) {
	stop := p.bound(ctx, timeout, pc)
	b := append(pc.buf[:0], byte(op), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[1:], uint32(len(body)))
	b = append(b, body...)
	pc.buf = b
	_, err := pc.Write(b)
	var head [wire.SessionAnswerHead]byte
	var data []byte
	if err == nil {
		_, err = io.ReadFull(pc.br, head[:])
	}
	if err == nil {
		if n := binary.BigEndian.Uint32(head[2:]); n < maxReplyBytes {
			data = make([]byte, n)
			_, err = io.ReadFull(pc.br, data)
		} else {
			err = errors.New("client: an answer on a session longer than " + strconv.Itoa(maxReplyBytes) + " bytes")
		}
	}
	if !stop() {
		err = errors.Join(ctx.Err(), err) // the context ended the call
	}
	if err != nil {
		pc.Close()
		return 0, nil, err
	}
	p.put(pc)
	return int(binary.BigEndian.Uint16(head[:])), data, nil
}

// bound sets pc's deadline for a call (timeout, or ctx's deadline if
// sooner) and makes the end of ctx end the call at once; stop undoes that,
// and returns false if ctx ended the call.
func (p *connPool) bound(ctx context.Context, timeout time.Duration, pc *persistConn) (stop func() bool) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pc.SetDeadline(deadline)
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, func() { _ = pc.SetDeadline(aLongTimeAgo) })
}

// get returns an idle connection, or a new one: a session if sess (and
// the coordinator takes one), else an HTTP/1.1 connection.
func (p *connPool) get(ctx context.Context, timeout time.Duration, sess bool) (*persistConn, bool, error) {
	p.mu.Lock()
	idle := &p.idle
	if sess {
		idle = &p.idleSess
	}
	if n := len(*idle); n > 0 {
		pc := (*idle)[n-1]
		*idle = (*idle)[:n-1]
		p.mu.Unlock()
		return pc, true, nil
	}
	p.mu.Unlock()
	pc, err := p.dial(ctx)
	if err != nil || !sess {
		return pc, false, err
	}
	if err := p.upgrade(ctx, timeout, pc); err != nil {
		pc.Close()
		if ctx.Err() != nil {
			return nil, false, err
		}
		// An upgrade that gets no answer (something between cuts it):
		// requests for a while.
		p.retrySess.Store(time.Now().Add(sessionRetry).UnixNano())
		return p.get(ctx, timeout, false)
	}
	if !pc.sess && pc.Conn == nil {
		return p.get(ctx, timeout, false) // refused, and the connection closed with it
	}
	return pc, false, nil
}

// upgrade asks for a session on the new connection pc. A refusal is
// remembered (a 4xx: no more sessions are asked for; a 5xx: none for
// sessionRetry) and leaves pc an HTTP/1.1 connection, or closed (pc.Conn
// nil) if the answer closed it.
func (p *connPool) upgrade(ctx context.Context, timeout time.Duration, pc *persistConn) error {
	stop := p.bound(ctx, timeout, pc)
	b := append(pc.buf[:0], "POST "...)
	b = append(append(append(append(b, p.prefix...), wire.SessionPath...), " HTTP/1.1\r\nHost: "...), p.hostHeader...)
	b = append(append(b, "\r\n"...), p.authLine...)
	b = append(b, "Connection: Upgrade\r\nUpgrade: "+wire.SessionProtocol+"\r\nContent-Length: 0\r\n\r\n"...)
	pc.buf = b
	_, err := pc.Write(b)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(pc.br, nil)
	}
	if err == nil && resp.StatusCode != http.StatusSwitchingProtocols {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplyBytes))
		resp.Body.Close()
	}
	if !stop() {
		err = errors.Join(ctx.Err(), err)
	}
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols:
		pc.sess = true
	case resp.StatusCode < 500:
		// Sessions are not offered here (not found, not allowed, not
		// supported): every call goes as a request from now on.
		p.noSession.Store(true)
	default:
		// Not now (a coordinator closing its sessions): requests for a
		// while.
		p.retrySess.Store(time.Now().Add(sessionRetry).UnixNano())
	}
	if !pc.sess && resp.Close {
		pc.Conn.Close()
		pc.Conn = nil
	}
	return nil
}

// sessionRetry is how long a client sends requests after a coordinator
// answered a session's upgrade with a temporary refusal.
const sessionRetry = 5 * time.Second

// dial opens a new connection (its TLS handshake made, for https).
func (p *connPool) dial(ctx context.Context) (*persistConn, error) {
	c, err := p.dialer.DialContext(ctx, "tcp", p.host)
	if err != nil {
		return nil, err
	}
	if p.tls != nil {
		tc := tls.Client(c, p.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	return &persistConn{Conn: c, br: bufio.NewReader(c)}, nil
}

func (p *connPool) put(pc *persistConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	idle := &p.idle
	if pc.sess {
		idle = &p.idleSess
	}
	if len(*idle) >= maxIdleConns {
		pc.Close()
		return
	}
	*idle = append(*idle, pc)
}

// closeIdle closes the connections kept for later calls.
func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := append(p.idle, p.idleSess...)
	p.idle, p.idleSess = nil, nil
	p.mu.Unlock()
	for _, pc := range idle {
		pc.Close()
	}
}
