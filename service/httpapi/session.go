package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/lease-fence/lease-fence/service/wire"
)

// Sessions are the call sessions of a handler (HandlerOptions.Sessions,
// wire.SessionPath): connections that a client turned, with an HTTP/1.1
// Upgrade, into a sequence of calls and answers without HTTP's headers.
// Each call is decoded, checked, authorized, decided, counted and logged
// as the same call sent as a request would be, on the goroutine that
// reads the connection: there is no request to parse, no background read
// of the connection, and one write per answer. Make them with
// NewSessions.
type Sessions struct {
	opts   SessionOptions
	mu     sync.Mutex
	closed bool
	open   map[net.Conn]bool // every open session's connection: true while it answers a call
	wg     sync.WaitGroup
}

// SessionOptions configures NewSessions.
type SessionOptions struct {
	// Idle bounds how long a session waits for its next call, and the
	// reading of a call; a session idle that long is closed. Zero means
	// 60 seconds.
	Idle time.Duration
	// Write bounds the writing of an answer. Zero means 10 seconds.
	Write time.Duration
	// Timed, if set, is given each call's operation and the time from its
	// frame read to its answer written.
	Timed func(op wire.Op, d time.Duration)
	// ConnState, if set, is told about a session's connection as an
	// http.Server's ConnState is about its own (for which it ended as
	// StateHijacked): StateNew once it is a session, StateActive and
	// StateIdle around each call, StateClosed at its end. A connection
	// limit that closes idle connections closes idle sessions too.
	ConnState func(net.Conn, http.ConnState)
}

// NewSessions returns a set of sessions to give HandlerOptions.Sessions.
func NewSessions(opts SessionOptions) *Sessions {
	if opts.Idle <= 0 {
		opts.Idle = 60 * time.Second
	}
	if opts.Write <= 0 {
		opts.Write = 10 * time.Second
	}
	return &Sessions{opts: opts, open: map[net.Conn]bool{}}
}

// Close ends every session and refuses new ones (503 unavailable): an
// idle session is closed at once, one answering a call once its answer is
// written. It returns when all have ended, or when ctx ends (closing the
// connections of those left, and returning ctx's error).
func (s *Sessions) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for c, busy := range s.open {
		if !busy {
			_ = c.SetReadDeadline(aLongTimeAgo)
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.open {
			_ = c.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// aLongTimeAgo is a deadline in the past: setting it ends a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// mark records c as answering a call (busy) or waiting for one, and runs
// then, unless the sessions are closed; it reports whether they were open.
// Under mu, so that Close either comes first or sees what then did.
func (s *Sessions) mark(c net.Conn, busy bool, then func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.open[c] = busy
	if then != nil {
		then()
	}
	return true
}

// add registers c, unless the sessions are closed.
func (s *Sessions) add(c net.Conn) bool {
	return s.mark(c, false, func() { s.wg.Add(1) })
}

func (s *Sessions) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.open, c)
	s.mu.Unlock()
	s.wg.Done()
}

// idle marks c waiting for its next call, with the deadline of that wait,
// unless the sessions are closing: Close either comes first or ends the
// wait (its deadline set last).
func (s *Sessions) idle(c net.Conn) bool {
	return s.mark(c, false, func() { _ = c.SetReadDeadline(time.Now().Add(s.opts.Idle)) })
}

// busy marks c answering a call, unless the sessions are closing.
func (s *Sessions) busy(c net.Conn) bool {
	return s.mark(c, true, nil)
}

// switching is the answer that turns a connection into a session.
const switching = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + wire.SessionProtocol + "\r\n\r\n"

// serveSession answers POST wire.SessionPath: the upgrade to a session,
// then its calls until the client closes it, it stays idle longer than
// SessionOptions.Idle, a frame is refused (the session is closed after
// the refusal's answer), or the sessions close.
func (h *handler) serveSession(w http.ResponseWriter, r *http.Request) {
	s := h.sessions
	if s == nil {
		h.notFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, "", wire.NewError(wire.CodeMethodNotAllowed, wire.SessionPath+" takes POST, not "+wire.QuoteShort(r.Method)))
		return
	}
	if !httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), wire.SessionProtocol) || r.ContentLength != 0 {
		h.fail(w, r, "", wire.NewError(wire.CodeInvalidValue, "a session is opened with Connection: Upgrade, Upgrade: "+wire.SessionProtocol+" and no body"))
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		h.fail(w, r, "", wire.NewError(wire.CodeNotSupported, "this connection cannot become a session (HTTP/1.1 only): send each call as a request"))
		return
	}
	defer conn.Close()
	if !s.add(conn) {
		_, _ = io.WriteString(conn, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer s.remove(conn)
	state := s.opts.ConnState
	if state == nil {
		state = func(net.Conn, http.ConnState) {}
	}
	state(conn, http.StateNew)
	defer state(conn, http.StateClosed)
	_ = conn.SetWriteDeadline(time.Now().Add(s.opts.Write))
	if _, err := io.WriteString(conn, switching); err != nil {
		return
	}
	var head [wire.SessionCallHead]byte
	var body []byte
	out := new(bytes.Buffer)
	for s.idle(conn) {
		state(conn, http.StateIdle)
		if _, err := io.ReadFull(brw.Reader, head[:]); err != nil {
			return
		}
		start := time.Now()
		if !s.busy(conn) {
			return // closing: the call is not answered, and the client sends it again elsewhere
		}
		state(conn, http.StateActive)
		i, n := int(head[0]), int64(binary.BigEndian.Uint32(head[1:]))
		var op wire.Op
		var reply *wire.Reply
		var e *wire.Error
		last := true // a refused frame: the rest of the connection cannot be read
		switch {
		case i >= len(wire.SessionOps):
			e = wire.NewError(wire.CodeNotFound, "no call numbered "+strconv.Itoa(i)+" on a session")
			h.refused(r, "", e)
		case n > h.maxBody:
			op, e = wire.SessionOps[i], wire.NewError(wire.CodeBodyTooLarge, "the body is larger than "+strconv.FormatInt(h.maxBody, 10)+" bytes")
			h.refused(r, op, e)
		default:
			op, last = wire.SessionOps[i], false
			if int64(cap(body)) < n {
				body = make([]byte, n)
			}
			body = body[:n]
			if _, err := io.ReadFull(brw.Reader, body); err != nil {
				return
			}
			reply, e = h.call(nil, r, op, body)
		}
		status := http.StatusOK
		out.Reset()
		out.Write(make([]byte, wire.SessionAnswerHead))
		var v any = reply
		if e != nil {
			status = e.Status
			var eb wire.ErrorBody
			eb.Error.Code, eb.Error.Message = e.Code, e.Message
			v = &eb
		}
		if err := encodeAnswer(out, v); err != nil {
			status = http.StatusInternalServerError
			out.Truncate(wire.SessionAnswerHead)
			out.WriteString(`{"error":{"code":"internal","message":"encoding the answer failed"}}`)
		}
		a := out.Bytes()
		binary.BigEndian.PutUint16(a, uint16(status))
		binary.BigEndian.PutUint32(a[2:], uint32(len(a)-wire.SessionAnswerHead))
		_ = conn.SetWriteDeadline(time.Now().Add(s.opts.Write))
		if _, err := conn.Write(a); err != nil {
			return
		}
		if s.opts.Timed != nil && op != "" {
			s.opts.Timed(op, time.Since(start))
		}
		if last {
			return
		}
	}
}
