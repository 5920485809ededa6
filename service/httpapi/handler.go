package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/lease-fence/lease-fence/service/wire"
)

// Backend answers decoded calls: the coordinator service (package service)
// or something in front of it (the Worker routes each call to the Durable
// Object of its resource). A Backend returns a *wire.Refusal or a
// *wire.Error for a refused call (see ErrorOf); any other error is
// reported as an internal error.
type Backend interface {
	Call(ctx context.Context, m wire.Message) (wire.Reply, error)
}

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// Logger receives one line per call: the operation, resource, holder,
	// request id, fence and what came of it. Secrets and bodies are never
	// logged. Nil logs nothing.
	Logger *slog.Logger
	// MaxIDBytes bounds the resource, the holder id and the request id, in
	// bytes. Zero means wire.DefaultMaxIDBytes; at most MaxStringBytes.
	MaxIDBytes int
	// MaxBodyBytes bounds a request body. Zero means MaxBodyBytes.
	MaxBodyBytes int
	// MaxWait bounds the waitMillis of a call: a longer wait is refused
	// with invalid_value. Zero means wire.DefaultMaxWait.
	MaxWait time.Duration
	// WaitSlack is how long, beyond its wait, a call that waits may take
	// to be answered: the handler moves the connection's read and write
	// deadlines (http.ResponseController) to the end of the wait plus
	// WaitSlack, so that an http.Server's ReadTimeout and WriteTimeout
	// (which would otherwise cut the call short, or cancel its context)
	// bound only the rest of the call. Zero means 10 seconds. Where
	// deadlines cannot be set (a Worker), nothing is moved.
	WaitSlack time.Duration
	// Authorize, if set, is asked about every call that decoded and passed
	// the handler's checks, before the Backend sees it: it may fill in
	// m.Caller, and a refusal it returns is the answer (the call never
	// reaches the Backend). Package service/auth provides it.
	Authorize func(r *http.Request, m *wire.Message) *wire.Error
	// Answered, if set, is called once for every request the handler
	// answers: the operation (empty when the path is none of the calls),
	// the result (Result) and the refusal, if any. Metrics count here.
	Answered func(op wire.Op, result string, e *wire.Error)
	// Scope, if set, is asked about every list and watch before the
	// Backend sees it: it returns the caller and which resources it may
	// see (nil: all), or the refusal. Package service/auth provides it
	// (Guard.Scope).
	Scope func(r *http.Request) (wire.Caller, func(resource string) bool, *wire.Error)
	// Keepalive is how often a watch with nothing to send writes a
	// comment line. Zero means 15 seconds.
	Keepalive time.Duration
	// Sessions, if set, offers call sessions at wire.SessionPath (see
	// Sessions) and ends them when closed. Nil answers that path 404
	// not_found, as any other path the handler does not serve.
	Sessions *Sessions
}

// The results Answered is given, besides "refused" (with the *Error).
const (
	ResultGranted = "granted" // an acquisition or renewal granted
	ResultDenied  = "denied"  // an acquisition denied: the resource is held
	ResultExpired = "expired" // a renewal or release of a lease no longer current
	ResultOK      = "ok"      // a release done
	ResultHeld    = "held"    // an inspection of a held resource
	ResultFree    = "free"    // an inspection of a free one
	ResultRefused = "refused" // an error answer
)

// defaultWaitSlack is the default HandlerOptions.WaitSlack.
const defaultWaitSlack = 10 * time.Second

type handler struct {
	b         Backend
	authorize func(*http.Request, *wire.Message) *wire.Error
	answered  func(wire.Op, string, *wire.Error)
	log       *slog.Logger
	maxID     int
	maxBody   int64
	maxWait   time.Duration
	slack     time.Duration
	scope     func(*http.Request) (wire.Caller, func(string) bool, *wire.Error)
	keepalive time.Duration
	sessions  *Sessions
}

// NewHandler returns the HTTP face of b: POST /v1/acquire, /v1/renew,
// /v1/release, /v1/inspect, /v1/revoke and /v1/proclaim with JSON bodies
// (see DecodeMessage), answered with a Reply as JSON and status 200, or an
// error {"error": {"code", "message"}} with the status of its code; POST
// /v1/renewals (a batch), /v1/list and /v1/watch (streams) and, with
// Sessions, /v1/session. Any other path is 404
// not_found; any other method on those paths is 405 method_not_allowed with
// an Allow header; a body over MaxBodyBytes is 413 body_too_large; a
// Content-Type other than application/json is 415; a waitMillis over
// MaxWait is 400 invalid_value. A refused request never reaches b. A call
// that waits is passed the request's context, which ends when the client
// goes away.
func NewHandler(b Backend, opts HandlerOptions) http.Handler {
	h := &handler{b: b, log: opts.Logger, maxID: opts.MaxIDBytes, maxBody: int64(opts.MaxBodyBytes), maxWait: opts.MaxWait,
		slack: opts.WaitSlack, authorize: opts.Authorize, answered: opts.Answered, scope: opts.Scope, keepalive: opts.Keepalive, sessions: opts.Sessions}
	if h.keepalive <= 0 {
		h.keepalive = defaultKeepalive
	}
	if h.maxWait <= 0 {
		h.maxWait = wire.DefaultMaxWait
	}
	if h.slack <= 0 {
		h.slack = defaultWaitSlack
	}
	if h.maxID <= 0 {
		h.maxID = wire.DefaultMaxIDBytes
	}
	h.maxID = min(h.maxID, wire.MaxStringBytes)
	if h.maxBody <= 0 {
		h.maxBody = wire.MaxBodyBytes
	}
	return h
}

// notFound answers a path the handler does not serve: 404 not_found,
// naming those it does.
func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, "", wire.NewError(wire.CodeNotFound, "no endpoint at "+wire.QuoteShort(r.URL.Path)+
		"; use POST /v1/acquire, renew, release, inspect, revoke, proclaim, renewals, list or watch"))
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == wire.ListPath || r.URL.Path == wire.WatchPath {
		h.serveStream(w, r)
		return
	}
	if r.URL.Path == wire.RenewalsPath {
		h.serveRenewals(w, r)
		return
	}
	if r.URL.Path == wire.SessionPath {
		h.serveSession(w, r)
		return
	}
	op := wire.Op(r.URL.Path[min(len(r.URL.Path), len("/v1/")):])
	if !op.Known() || op.Path() != r.URL.Path {
		h.notFound(w, r)
		return
	}
	data, ok := h.body(w, r, op, h.maxBody)
	if !ok {
		return
	}
	reply, e := h.call(w, r, op, data)
	if e != nil {
		WriteError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// call decodes, checks and answers the body data of a call to op: the
// reply, or the refusal to write. Both are counted and logged. w, if not
// nil, is the call's own request's: a call that waits moves its deadlines
// there. A call on a session (w nil) may not wait.
func (h *handler) call(w http.ResponseWriter, r *http.Request, op wire.Op, data []byte) (*wire.Reply, *wire.Error) {
	m, derr := wire.DecodeMessage(op, data)
	if derr != nil {
		h.refused(r, op, derr)
		return nil, derr
	}
	if e := h.checkIDs(&m); e != nil {
		h.refused(r, op, e)
		return nil, e
	}
	if m.Wait > h.maxWait {
		e := wire.InvalidField("waitMillis", "must be at most "+strconv.FormatInt(h.maxWait.Milliseconds(), 10)+
			" (this coordinator's longest wait), got "+strconv.FormatInt(m.Wait.Milliseconds(), 10))
		h.refused(r, op, e)
		return nil, e
	}
	if m.Wait > 0 && w == nil {
		e := wire.InvalidField("waitMillis", "a call that waits is sent as a request of its own, not on a session")
		h.refused(r, op, e)
		return nil, e
	}
	if h.authorize != nil {
		if e := h.authorize(r, &m); e != nil {
			h.logCall(r, m, e, wire.Reply{})
			return nil, e
		}
	} else if e := RevokeAllowed(m.Op, r.RemoteAddr); e != nil {
		h.logCall(r, m, e, wire.Reply{})
		return nil, e
	}
	if m.Wait > 0 {
		// Errors are ignored: a writer without deadlines (a Worker's, a
		// test recorder) has nothing to move.
		rc := http.NewResponseController(w)
		end := time.Now().Add(m.Wait + h.slack)
		_ = rc.SetReadDeadline(end)
		_ = rc.SetWriteDeadline(end)
	}
	reply, err := h.b.Call(r.Context(), m)
	if err != nil {
		we := ErrorOf(err)
		h.logCall(r, m, we, reply)
		return nil, we
	}
	h.logCall(r, m, nil, reply)
	return &reply, nil
}

// checkIDs refuses ids longer than MaxIDBytes.
func (h *handler) checkIDs(m *wire.Message) *wire.Error {
	for _, f := range [...]struct{ name, v string }{
		{"requestId", m.Request.RequestID}, {"resource", m.Request.Resource}, {"holderId", m.Request.HolderID},
	} {
		if len(f.v) > h.maxID {
			return wire.InvalidField(f.name, "is longer than "+strconv.Itoa(h.maxID)+" bytes")
		}
	}
	return nil
}

// RevokeAllowed is the rule of a server without authentication
// (HandlerOptions.Authorize nil): a revoke (wire.OpRevoke) is taken only
// from a loopback address (remoteAddr is an http.Request's RemoteAddr,
// host:port), anything else is refused with 403 forbidden; other calls
// are allowed (nil). With Authorize, the authorization decides instead
// (package service/auth: a token with "admin": true).
func RevokeAllowed(op wire.Op, remoteAddr string) *wire.Error {
	if op != wire.OpRevoke {
		return nil
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return wire.NewError(wire.CodeForbidden, "a revoke is taken only from a loopback address on a coordinator without -auth (or with an admin token under -auth), not from "+
		wire.QuoteShort(remoteAddr))
}

// Result names what came of a call answered with reply (see Answered).
func Result(reply wire.Reply) string {
	switch {
	case reply.Held != nil && *reply.Held:
		return ResultHeld
	case reply.Held != nil:
		return ResultFree
	case reply.Grant != nil:
		return ResultGranted
	case reply.HeldBy != "":
		return ResultDenied
	case reply.Reason != "":
		return ResultExpired
	}
	return ResultOK
}

// logCall logs one decoded call with what came of it: a refusal e, or
// reply, and tells Answered. Secrets, tokens and bodies are never logged;
// the caller's token is logged by its name.
func (h *handler) logCall(r *http.Request, m wire.Message, e *wire.Error, reply wire.Reply) {
	if h.answered != nil {
		if e != nil {
			h.answered(m.Op, ResultRefused, e)
		} else {
			h.answered(m.Op, Result(reply), nil)
		}
	}
	if h.log == nil {
		return
	}
	level := slog.LevelInfo
	attrs := []slog.Attr{slog.String("op", string(m.Op)), slog.String("resource", m.Request.Resource)}
	if m.Caller.Name != "" {
		attrs = append(attrs, slog.String("token", m.Caller.Name))
	}
	if m.Op != wire.OpInspect {
		attrs = append(attrs, slog.String("holderId", m.Request.HolderID), slog.String("requestId", m.Request.RequestID),
			slog.Uint64("fence", m.Request.Fence))
	}
	if m.HasAfter {
		attrs = append(attrs, slog.Uint64("afterFence", m.After))
	}
	if m.Wait > 0 {
		attrs = append(attrs, slog.Int64("waitMillis", m.Wait.Milliseconds()))
	}
	switch {
	case e != nil && e.Status >= 500:
		level, attrs = slog.LevelError, append(attrs, slog.String("code", e.Code))
	case e != nil:
		level, attrs = slog.LevelWarn, append(attrs, slog.String("code", e.Code))
	case reply.Held != nil && *reply.Held:
		attrs = append(attrs, slog.String("result", "held"), slog.String("heldBy", reply.HolderID), slog.Uint64("heldFence", reply.Fence))
	case reply.Held != nil:
		attrs = append(attrs, slog.String("result", "free"))
	case reply.Grant != nil:
		attrs = append(attrs, slog.String("result", "granted"), slog.Uint64("grantedFence", reply.Grant.Fence))
	case reply.HeldBy != "":
		attrs = append(attrs, slog.String("result", "denied"), slog.String("heldBy", reply.HeldBy))
	case reply.Reason != "":
		attrs = append(attrs, slog.String("result", reply.Reason))
	default:
		attrs = append(attrs, slog.String("result", "ok"))
	}
	h.log.LogAttrs(r.Context(), level, "lease call", attrs...)
}

// fail answers a request refused before it was decoded.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, op wire.Op, e *wire.Error) {
	h.refused(r, op, e)
	WriteError(w, e)
}

// refused counts and logs a call refused before it was decoded.
func (h *handler) refused(r *http.Request, op wire.Op, e *wire.Error) {
	if h.answered != nil {
		h.answered(op, ResultRefused, e)
	}
	if h.log != nil {
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "lease call refused",
			slog.String("op", string(op)), slog.String("method", r.Method), slog.String("path", wire.QuoteShort(r.URL.Path)),
			slog.String("code", e.Code))
	}
}

// WriteError writes e as the JSON error body with its status.
func WriteError(w http.ResponseWriter, e *wire.Error) {
	var b wire.ErrorBody
	b.Error.Code, b.Error.Message = e.Code, e.Message
	writeJSON(w, e.Status, &b)
}

// The values of the headers of every answer, shared: net/http only reads
// them.
var (
	contentTypeJSON = []string{"application/json"}
	cacheNoStore    = []string{"no-store"}
)

// answerOpts are the options of every answer's encoding: strings that are
// not valid UTF-8 (a message quoting bad input) are written with U+FFFD in
// their place.
var answerOpts = jsontext.AllowInvalidUTF8(true)

// encodeAnswer writes v to buf: a call's Reply by hand when it is a
// cycle's answer (wire.AppendReply: 0.27 µs a grant against 0.74 through
// the encoder), anything else with the encoder.
func encodeAnswer(buf *bytes.Buffer, v any) error {
	if r, ok := v.(*wire.Reply); ok && r != nil {
		if b, ok := wire.AppendReply(buf.AvailableBuffer(), r); ok {
			buf.Write(b)
			return nil
		}
	}
	return json.MarshalWrite(buf, v, answerOpts)
}

// answerBufs holds the buffers answers are encoded into: a Write does not
// keep what it is given, so each is reused once the answer is written.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledAnswer bounds the buffers kept in answerBufs (a long list page
// is not kept).
const maxPooledAnswer = 16 << 10

// writeJSON writes v as the answer, with its Content-Length: net/http sends
// the head and the body in one write when the handler returns.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := answerBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledAnswer {
			buf.Reset()
			answerBufs.Put(buf)
		}
	}()
	buf.Reset()
	var out []byte
	if err := encodeAnswer(buf, v); err != nil {
		status = http.StatusInternalServerError
		out = []byte(`{"error":{"code":"internal","message":"encoding the answer failed"}}`)
	} else {
		out = buf.Bytes()
	}
	hd := w.Header()
	hd["Content-Type"] = contentTypeJSON
	hd["Cache-Control"] = cacheNoStore
	hd["Content-Length"] = []string{strconv.Itoa(len(out))}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// body reads the body of a POST to op, or answers the refusal (a method
// other than POST, a content type other than JSON, a body too large).
func (h *handler) body(w http.ResponseWriter, r *http.Request, op wire.Op, limit int64) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, op, wire.NewError(wire.CodeMethodNotAllowed, op.Path()+" takes POST, not "+wire.QuoteShort(r.Method)))
		return nil, false
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			h.fail(w, r, op, wire.NewError(wire.CodeUnsupportedMedia, "the body must be application/json, not "+wire.QuoteShort(ct)))
			return nil, false
		}
	}
	tooLarge := func() *wire.Error {
		return wire.NewError(wire.CodeBodyTooLarge, "the body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
	}
	if r.ContentLength > limit {
		h.fail(w, r, op, tooLarge())
		return nil, false
	}
	var data []byte
	var err error
	if n := r.ContentLength; n >= 0 {
		// The declared length, at most limit: one buffer of that size,
		// read exactly (net/http's body ends there; the read that fills the
		// buffer is the one that reaches that end, and nothing is read
		// after it).
		data = make([]byte, n)
		_, err = io.ReadFull(r.Body, data)
	} else {
		data, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if !errors.As(err, &mbe) {
			h.fail(w, r, op, wire.NewError(wire.CodeMalformedJSON, "reading the body: "+err.Error()))
			return nil, false
		}
		h.fail(w, r, op, tooLarge())
		return nil, false
	}
	return data, true
}
