// Package httpfence is the fence gate in front of an HTTP API: a reverse
// proxy that admits a write only if the fence it carries is not below the
// highest fence admitted for its resource, raises that floor durably before
// it forwards the write, and refuses and logs a stale one without the
// upstream ever seeing it. cmd/fence-proxy runs it; docs/fencing.md says what
// it guarantees and what it cannot.
//
// A write is any request whose method is not GET, HEAD or OPTIONS. It names
// its token in the Lease-Fence header (see Header, ParseHeader):
//
//	Lease-Fence: resource="deploy-slot", holder="agent-a", fence=7
//
// Clients add it with Transport, an http.RoundTripper. Proxy is the handler
// most callers want (through cmd/fence-proxy); New makes one.
package httpfence

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/internal/prom"
)

// Proxy is the gate: an http.Handler that forwards reads as they are and
// writes under the rules of the package doc. Requests under /.lease-fence/
// are its own (ServeHTTP) and never forwarded. Make one with New.
type Proxy struct {
	store          Store
	rp             *httputil.ReverseProxy
	transport      http.RoundTripper
	timeout        time.Duration
	queueTimeout   time.Duration
	maxBody        int64
	maxQueue       int
	buffers        *semaphore.Weighted
	log            *slog.Logger
	onAdmit        func(context.Context, fence.Token)
	m              *metrics
	feed           *feed
	metricsHandler http.Handler
	now            func() time.Time
	pingInterval   time.Duration

	exclusive bool
	// breakRaise is the deliberate break of the tests (export_test.go): a
	// write whose fence is above the cached floor skips the gate, so a
	// raise does not wait for the writes in flight.
	breakRaise bool

	mu    sync.Mutex
	lanes map[string]*lane

	// floors caches, per resource, a floor the Store has made durable: the
	// highest fence it admitted or reported, never above the Store's own
	// (which only rises, and only through this Proxy). A write whose fence
	// equals it is admitted without a transaction: the Store would find it
	// equal and change nothing. Any other fence goes to the Store.
	floorsMu sync.Mutex
	floors   map[string]uint64
}

// maxCachedFloors bounds the floor cache; when it is full an arbitrary
// entry is dropped (a dropped resource's next write asks the Store).
const maxCachedFloors = 1 << 16

// lane is a resource with writes in progress: the gate that admits them
// (core/fence's admission, its floor kept in step with the Store's by the
// writes it runs), and the count of writes in it, waiting or running. It
// is dropped when the count is back to 0; the next write makes a new one,
// whose gate starts at floor 0 (the Store still refuses what it must).
type lane struct {
	gate    *fence.Gate
	n       int // writes in the lane, under Proxy.mu
	waiting int // of which not yet admitted by the gate, under Proxy.mu
}

// New returns a Proxy in front of opts.Upstream.
func New(opts Options) (*Proxy, error) {
	arg := func(name, reason string) error {
		return &fence.ArgumentError{Pkg: "httpfence", Arg: "options." + name, Reason: reason}
	}
	switch {
	case opts.Upstream == nil || opts.Upstream.Host == "":
		return nil, arg("upstream", "must be an absolute http or https URL")
	case opts.Upstream.Scheme != "http" && opts.Upstream.Scheme != "https":
		return nil, arg("upstream", "must be an http or https URL")
	case opts.Store == nil:
		return nil, arg("store", "must not be nil")
	case opts.UpstreamTimeout < 0, opts.QueueTimeout < 0:
		return nil, arg("upstreamTimeout", "and queueTimeout must not be negative")
	case opts.MaxBodyBytes < 0, opts.MaxBufferBytes < 0, opts.MaxQueue < 0:
		return nil, arg("maxBodyBytes", ", maxBufferBytes and maxQueue must not be negative")
	case opts.RejectionHistory < 0, opts.MaxStreams < 0, opts.StreamBuffer < 0:
		return nil, arg("rejectionHistory", ", maxStreams and streamBuffer must not be negative")
	}
	var first uint64
	if rc, ok := opts.Store.(RejectionCounter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(opts.UpstreamTimeout, DefaultUpstreamTimeout))
		n, err := rc.RejectionTotal(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		first = n
	}
	p := &Proxy{
		store:        opts.Store,
		timeout:      cmp.Or(opts.UpstreamTimeout, DefaultUpstreamTimeout),
		maxBody:      cmp.Or(opts.MaxBodyBytes, DefaultMaxBodyBytes),
		maxQueue:     cmp.Or(opts.MaxQueue, DefaultMaxQueue),
		exclusive:    opts.Exclusive,
		log:          opts.Logger,
		onAdmit:      opts.OnAdmit,
		lanes:        map[string]*lane{},
		floors:       map[string]uint64{},
		transport:    opts.Transport,
		queueTimeout: opts.QueueTimeout,
		m:            newMetrics(),
		feed:         newFeed(first, cmp.Or(opts.RejectionHistory, DefaultRejectionHistory), cmp.Or(opts.StreamBuffer, DefaultStreamBuffer), cmp.Or(opts.MaxStreams, DefaultMaxStreams)),
		now:          opts.Now,
		pingInterval: PingInterval,
	}
	p.queueTimeout = cmp.Or(p.queueTimeout, p.timeout)
	if p.now == nil {
		p.now = time.Now
	}
	p.metricsHandler = prom.Handler(p.m.reg)
	p.buffers = semaphore.NewWeighted(max(cmp.Or(opts.MaxBufferBytes, DefaultMaxBufferBytes), p.maxBody))
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.transport == nil && opts.Upstream.Scheme == "http" {
		p.transport = newUpstreamTransport(upstreamAddr(opts.Upstream))
	}
	if p.transport == nil {
		p.transport = &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: p.timeout,
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     true,
		}
	}
	upstream := *opts.Upstream
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&upstream)
			pr.SetXForwarded()
		},
		Transport:      p.transport,
		BufferPool:     bufferPool{},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamFailed,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// upstreamAddr is the host:port to dial for u (port 80 when u has none).
func upstreamAddr(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// bufferPool lends ReverseProxy its 32 KB copy buffers (it allocates one
// per request without a pool).
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }

// CloseIdleConnections closes the idle connections to the upstream (for a
// Transport that has the method).
func (p *Proxy) CloseIdleConnections() {
	if c, ok := p.transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// IsWrite reports whether a request with this method is a write: any method
// but GET, HEAD and OPTIONS.
func IsWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// adminPrefix is the proxy's own path space; nothing under it is forwarded.
const adminPrefix = "/.lease-fence/"

// ServeHTTP forwards a read, gates and forwards a write, or answers one of
// the proxy's own endpoints:
//
//	GET  /.lease-fence/floor?resource=r       {"resource": r, "floor": n}
//	GET  /.lease-fence/floors[?after=r][&limit=n][&prefix=p]
//	                                          {"floors": [...], "next": r} (FloorsPage)
//	GET  /.lease-fence/rejections?resource=r[&after=seq][&limit=n]
//	                                          {"resource": r, "rejections": [...], "more": bool}
//	GET  /.lease-fence/rejections/stream[?after=seq]
//	                                          Server-Sent Events, one per refusal (StreamedRejection)
//	POST /.lease-fence/admit                  raise the floor to the Lease-Fence token without forwarding
//	GET  /.lease-fence/healthz                {"status": "ok"}, or 503 if the Store cannot be read
//	GET  /.lease-fence/metrics                Prometheus text format
//
// The rejections come a page at a time: those whose seq is above after
// (default 0), oldest first, at most limit (1 to MaxRejectionsPage, the
// default); more says whether there are others after them (ask again with
// after set to the last seq). The floors likewise, by resource name, at
// most MaxFloorsPage; next is set when more follow. docs/fencing.md
// describes each.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "fence-proxy does not tunnel (CONNECT)", nil)
		return
	case len(r.URL.Path) >= len(adminPrefix) && r.URL.Path[:len(adminPrefix)] == adminPrefix:
		p.serveAdmin(w, r)
		return
	case r.Header.Get("Upgrade") != "":
		// A switched protocol is a tunnel the proxy cannot fence.
		writeError(w, http.StatusNotImplemented, "upgrade_not_supported", "fence-proxy does not switch protocols (Upgrade: "+r.Header.Get("Upgrade")+")", nil)
		return
	case !IsWrite(r.Method):
		ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
		defer cancel()
		p.rp.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	p.serveWrite(w, r)
}

// serveWrite gates and forwards a write, and counts what became of it.
func (p *Proxy) serveWrite(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := p.write(w, r)
	d := time.Since(start).Seconds()
	switch code {
	case "":
		p.m.forwardedDur.Observe(d)
	case clientLeft:
	default:
		p.m.refusal(code)
		p.m.refusedDur.Observe(d)
	}
}

// clientLeft is write's result when the client left while its write
// waited: nothing was answered or changed.
const clientLeft = "-"

// write: parse the token, read the body, wait for the resource's turn,
// raise the floor durably (or refuse and log), forward, answer, hand the
// turn on. It returns the code it refused the write with, "" if it
// forwarded it.
func (p *Proxy) write(w http.ResponseWriter, r *http.Request) string {
	tok, err := ParseHeader(r.Header)
	if errors.Is(err, ErrNoHeader) {
		return writeError(w, http.StatusPreconditionRequired, "missing_fence",
			"a write ("+r.Method+") needs a "+Header+` header, e.g. `+Header+`: resource="deploy-slot", holder="agent-a", fence=7`, nil)
	}
	if err != nil {
		return writeError(w, http.StatusBadRequest, "bad_fence_header", err.Error(), nil)
	}
	body, release, rcode := p.readBody(w, r)
	if rcode != "" {
		return rcode
	}
	defer release()

	l, err := p.enter(tok.Resource)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		return writeError(w, http.StatusServiceUnavailable, "queue_full", "more than "+strconv.Itoa(p.maxQueue)+" writes wait for resource "+strconv.Quote(tok.Resource)+"; nothing was changed", nil)
	}
	started := false
	defer func() { p.leave(tok.Resource, l, started) }()

	// The floor is raised durably before anything is forwarded. A client
	// that leaves once the write is admitted cannot undo that, and must not
	// leave the write half-forwarded either: from there on the client's
	// cancellation is ignored, and UpstreamTimeout bounds the rest.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.timeout)
	defer cancel()
	code := clientLeft
	forward := func(context.Context) error {
		started = true
		p.start(l)
		code = p.forward(ctx, w, r, tok, body)
		return nil
	}
	var stale *fence.StaleFenceError
	if cached, ok := p.cachedFloor(tok.Resource); ok && tok.Fence < cached {
		// Below a floor the Store has made durable: the Store refuses it,
		// whatever runs. No turn is needed.
		if err = p.admitted(ctx, tok); err == nil {
			err = errors.New("httpfence: the store admitted a fence below a floor it had made durable")
		}
	} else if p.breakRaise && (!ok || tok.Fence > cached) {
		err = forward(ctx)
	} else {
		// Wait for the turn (a bounded wait the client may end), then
		// admit and forward within it: writes with the fence of the
		// running ones join them; a higher fence waits for them all.
		wait, stop := context.WithTimeout(r.Context(), p.queueTimeout)
		err = l.gate.CommitContext(wait, tok, forward)
		stop()
		if errors.As(err, &stale) {
			err = p.refuseBelow(ctx, l, tok, stale)
		}
	}
	var busy *fence.GateBusyError
	switch {
	case err == nil:
		return code
	case errors.As(err, &stale):
		return p.refused(ctx, w, r, tok, stale)
	case errors.As(err, &busy), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		if r.Context().Err() != nil {
			return clientLeft // the client left while waiting: nothing was changed
		}
		w.Header().Set("Retry-After", "1")
		return writeError(w, http.StatusServiceUnavailable, "queue_timeout", "the write waited "+p.queueTimeout.String()+" for its turn on resource "+strconv.Quote(tok.Resource)+"; nothing was changed", nil)
	default:
		return p.storeFailed(ctx, w, tok, err)
	}
}

// start marks a write of l that the gate just admitted as no longer
// waiting.
func (p *Proxy) start(l *lane) {
	p.mu.Lock()
	l.waiting--
	p.mu.Unlock()
	p.m.waiting.Dec()
}

// forward admits tok durably and forwards the write, within its turn; it
// returns the code it refused the write with, "" if it forwarded it.
func (p *Proxy) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, tok fence.Token, body []byte) string {
	if err := p.admitted(ctx, tok); err != nil {
		var stale *fence.StaleFenceError
		if errors.As(err, &stale) {
			return p.refused(ctx, w, r, tok, stale)
		}
		return p.storeFailed(ctx, w, tok, err)
	}
	if p.onAdmit != nil {
		p.onAdmit(ctx, tok)
	}
	out := r.WithContext(context.WithValue(ctx, admittedKey{}, tok))
	out.Body = io.NopCloser(bytes.NewReader(body))
	// The upstream transport may send a write again, once, when writing it
	// on a kept-alive connection failed (the upstream did not receive it).
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if len(body) == 0 {
		out.Body, out.GetBody = http.NoBody, nil
	}
	out.ContentLength = int64(len(body))
	out.TransferEncoding = nil
	rec := &statusRecorder{ResponseWriter: w}
	p.m.forwarding.Inc()
	p.m.forwarded.Inc()
	p.rp.ServeHTTP(rec, out)
	p.m.forwarding.Dec()
	p.log.LogAttrs(ctx, slog.LevelInfo, "write forwarded",
		slog.String("resource", tok.Resource), slog.String("holder", tok.HolderID), slog.Uint64("fence", tok.Fence),
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", rec.status))
	return ""
}

// refused answers a stale write with the Store's refusal.
func (p *Proxy) refused(ctx context.Context, w http.ResponseWriter, r *http.Request, tok fence.Token, stale *fence.StaleFenceError) string {
	p.log.LogAttrs(ctx, slog.LevelWarn, "stale write refused",
		slog.String("resource", tok.Resource), slog.String("holder", tok.HolderID), slog.Uint64("fence", tok.Fence),
		slog.Uint64("seq", stale.Seq), slog.String("admittedHolderId", stale.AdmittedHolderID), slog.Uint64("admittedFence", stale.AdmittedFence),
		slog.String("method", r.Method), slog.String("path", r.URL.Path))
	return writeStale(w, stale)
}

func (p *Proxy) storeFailed(ctx context.Context, w http.ResponseWriter, tok fence.Token, err error) string {
	p.log.LogAttrs(ctx, slog.LevelError, "the floor could not be checked; write not forwarded",
		slog.String("resource", tok.Resource), slog.String("holder", tok.HolderID), slog.Uint64("fence", tok.Fence), slog.String("err", err.Error()))
	return writeError(w, http.StatusServiceUnavailable, "store_failed", "the proxy could not check the fence ("+err.Error()+"); the write was not forwarded", nil)
}

// refuseBelow turns the gate's refusal of tok (a higher fence was admitted
// by the gate while tok waited or arrived) into the Store's, which logs it
// durably with its own sequence number. The Store refuses tok once its
// floor is at the gate's; it is, unless the write that raised the gate's
// floor has not raised the Store's yet (it is doing so in its turn, or its
// Store failed). Then the raise is made here, within a turn of the gate's
// fence, where no higher fence can be admitted meanwhile.
func (p *Proxy) refuseBelow(ctx context.Context, l *lane, tok fence.Token, gate *fence.StaleFenceError) error {
	for range 8 {
		if cached, ok := p.cachedFloor(tok.Resource); ok && cached >= gate.AdmittedFence {
			return p.admitted(ctx, tok)
		}
		at := fence.Token{Resource: tok.Resource, HolderID: gate.AdmittedHolderID, Fence: gate.AdmittedFence}
		if at.HolderID == "" {
			at.HolderID = tok.HolderID // not reached: the gate starts unclaimed at 0
		}
		var out error
		err := l.gate.CommitContext(ctx, at, func(context.Context) error {
			f, err := p.store.Floor(ctx, tok.Resource)
			if err != nil {
				return err
			}
			// The write that raised the Store to at may run beside this
			// turn and not have cached its floor yet: cache it here, or
			// admitted would take tok at the old cached floor as admitted.
			p.noteFloor(tok.Resource, f)
			if f < at.Fence {
				if err := p.admitted(ctx, at); err != nil && !fence.IsStale(err) {
					return err
				}
			}
			out = p.admitted(ctx, tok)
			return nil
		})
		if err == nil {
			if out == nil {
				return errors.New("httpfence: the store admitted a fence below one the gate admitted")
			}
			return out
		}
		if !errors.As(err, &gate) {
			return err
		}
		// The gate's floor rose further meanwhile: again, at that one.
	}
	return errors.New("httpfence: the gate's floor kept rising while a stale write was refused")
}

// readBody reads a write's body whole, within MaxBodyBytes and the shared
// buffer budget. On failure it has answered, and returns the code it
// answered with.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), code string) {
	if r.ContentLength > p.maxBody {
		return nil, nil, writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the body is larger than "+strconv.FormatInt(p.maxBody, 10)+" bytes; nothing was changed", nil)
	}
	reserve := p.maxBody
	if r.ContentLength >= 0 {
		reserve = r.ContentLength
	}
	if !p.buffers.TryAcquire(reserve) {
		w.Header().Set("Retry-After", "1")
		return nil, nil, writeError(w, http.StatusServiceUnavailable, "busy", "the proxy holds as many write bodies as it may; nothing was changed", nil)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, p.maxBody))
	if err != nil {
		p.buffers.Release(reserve)
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, nil, writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the body is larger than "+strconv.FormatInt(p.maxBody, 10)+" bytes; nothing was changed", nil)
		}
		return nil, nil, writeError(w, http.StatusBadRequest, "bad_body", "reading the body failed ("+err.Error()+"); nothing was changed", nil)
	}
	if used := int64(buf.Len()); used < reserve {
		p.buffers.Release(reserve - used)
		reserve = used
	}
	return buf.Bytes(), func() { p.buffers.Release(reserve) }, ""
}

// admitted admits tok durably or returns the Store's refusal: a fence equal to
// the cached floor needs nothing written; any other goes to the Store, and
// what the Store answers updates the cache.
func (p *Proxy) admitted(ctx context.Context, tok fence.Token) error {
	p.floorsMu.Lock()
	cached, ok := p.floors[tok.Resource]
	p.floorsMu.Unlock()
	if ok && tok.Fence == cached {
		p.m.admitted.Inc()
		return nil
	}
	err := p.store.Admit(ctx, tok)
	var stale *fence.StaleFenceError
	switch {
	case err == nil:
		p.m.admitted.Inc()
		if !ok || tok.Fence > cached {
			p.m.raised.Inc()
		}
		p.noteFloor(tok.Resource, tok.Fence)
	case errors.As(err, &stale):
		p.noteFloor(tok.Resource, stale.AdmittedFence)
		p.feed.publish(streamed(stale.Rejection, p.now()))
	}
	return err
}

// cachedFloor returns the cached floor of resource, if there is one.
func (p *Proxy) cachedFloor(resource string) (uint64, bool) {
	p.floorsMu.Lock()
	defer p.floorsMu.Unlock()
	f, ok := p.floors[resource]
	return f, ok
}

// noteFloor records that the Store's floor of resource is at least f.
func (p *Proxy) noteFloor(resource string, f uint64) {
	p.floorsMu.Lock()
	defer p.floorsMu.Unlock()
	if old, ok := p.floors[resource]; ok {
		p.floors[resource] = max(old, f)
		return
	}
	if len(p.floors) >= maxCachedFloors {
		for k := range p.floors {
			delete(p.floors, k)
			break
		}
	}
	p.floors[resource] = f
}

var errQueueFull = errors.New("httpfence: queue full")

// enter puts a write in resource's lane (making the lane if there is none),
// or returns errQueueFull if MaxQueue writes already wait in it.
func (p *Proxy) enter(resource string) (*lane, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lanes[resource]
	if l == nil {
		g, err := fence.NewGate(resource, fence.Options{Exclusive: p.exclusive, MaxRejections: 1})
		if err != nil {
			return nil, err // not reached: ParseHeader checked the name
		}
		l = &lane{gate: g}
		p.lanes[resource] = l
	}
	if l.waiting >= p.maxQueue {
		return nil, errQueueFull // l has a write, or it would have none waiting
	}
	l.n++
	l.waiting++
	p.m.waiting.Inc()
	return l, nil
}

// leave takes a write out of resource's lane (started: the gate admitted it
// to run), and drops the lane when it was the last.
func (p *Proxy) leave(resource string, l *lane, started bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.n--
	if !started {
		l.waiting--
		p.m.waiting.Dec()
	}
	if l.n == 0 {
		delete(p.lanes, resource)
	}
}

type admittedKey struct{}

// modifyResponse marks an upstream answer to an admitted write with the
// floor, and removes a Lease-Fence-Error the upstream may have set, so the
// header only ever comes from the proxy.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	resp.Header.Del(ErrorHeader)
	resp.Header.Del(FloorHeader)
	if tok, ok := resp.Request.Context().Value(admittedKey{}).(fence.Token); ok {
		resp.Header.Set(FloorHeader, strconv.FormatUint(tok.Fence, 10))
	}
	return nil
}

// upstreamFailed answers 502 when the upstream could not be reached or gave
// no whole answer. For a write the floor stays raised: the upstream may hold
// part of it.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := "upstream_failed", "the upstream did not answer: "+err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		code, msg = "upstream_timeout", "the upstream did not answer within "+p.timeout.String()
	}
	tok, admitted := r.Context().Value(admittedKey{}).(fence.Token)
	if admitted {
		p.m.upstreamWrit.Inc()
		msg += "; the write may have reached it, and the floor stays at " + strconv.FormatUint(tok.Fence, 10)
		w.Header().Set(FloorHeader, strconv.FormatUint(tok.Fence, 10))
		p.log.LogAttrs(r.Context(), slog.LevelError, "write forwarded, upstream failed",
			slog.String("resource", tok.Resource), slog.String("holder", tok.HolderID), slog.Uint64("fence", tok.Fence),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("err", err.Error()))
	} else {
		p.m.upstreamRead.Inc()
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "read forwarded, upstream failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("err", err.Error()))
	}
	writeError(w, http.StatusBadGateway, code, msg, nil)
}

// statusRecorder notes the status written through it, for the log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (ReverseProxy
// flushes through it).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
