package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/internal/child"
)

// LivePrefix is the URL path of live mode: the playground's page runs its
// agents against real coordinators through these endpoints, on its own
// origin (so it needs no CORS and its Content-Security-Policy stays
// connect-src 'self').
//
//	GET  /live/status                 what is available: {"native": {...}, "worker": {...}}
//	POST /live/native/start           {"ttlMillis": n}: starts a coordinator for one lane, answers {"id"}
//	POST /live/native/{id}/restart    kills it (as a crash would) and starts it again: a -memory
//	                                  coordinator forgets every lease and issues fences from 1
//	POST /live/native/{id}/stop       ends it
//	POST /live/native/{id}/v1/{op}    the coordinator's own protocol (acquire, renew, release)
//	POST /live/worker/v1/{op}         the same, to the Worker under wrangler dev
//
// Each native coordinator is cmd/coordinator -memory on a free 127.0.0.1
// port with the lease length the page asks for, so a page can scale a
// scenario's time; they end when idle, when too many are running, and when
// the server stops.
const LivePrefix = "/live/"

// Bounds of live mode.
const (
	maxLiveCoordinators = 8
	liveIdle            = 2 * time.Minute
	liveStartTimeout    = 15 * time.Second
	maxLiveBody         = 64 << 10
	maxLiveTTL          = 10 * time.Minute
)

// LiveOptions configure live mode. Empty fields leave a backend off.
type LiveOptions struct {
	// Coordinator is the path of cmd/coordinator's binary.
	Coordinator string
	// Wrangler and WorkerDir start the Worker with `wrangler dev` in
	// WorkerDir (its state in a temporary folder, removed at Close), with
	// leases of WorkerTTL.
	Wrangler, WorkerDir string
	// WorkerURL is a Worker already running (instead of Wrangler).
	WorkerURL string
	WorkerTTL time.Duration
	// Log receives one line per coordinator started or stopped, and errors.
	Log io.Writer
	// WorkerLog, if not nil, receives wrangler dev's output, line by line.
	WorkerLog io.Writer
}

// Live serves LivePrefix. Create it with NewLive and Close it when done.
type Live struct {
	opts   LiveOptions
	client *http.Client

	mu     sync.Mutex
	native backendState
	worker backendState
	coords map[string]*liveCoord
	closed bool
	stop   chan struct{}
	done   sync.WaitGroup

	wrangler *child.Server
}

type backendState struct {
	State  string `json:"state"` // "off", "checking", "starting", "ready", "unavailable"
	Reason string `json:"reason,omitempty"`
	url    *url.URL
}

// A coordinator process for one lane of one live run.
type liveCoord struct {
	id  string
	ttl time.Duration

	mu   sync.RWMutex // held for writing across a restart
	proc *coordProc
	last time.Time // guarded by Live.mu
}

type coordProc struct {
	*child.Server
	base *url.URL
}

// NewLive checks the backends in the background: the native coordinator by
// starting one and stopping it, the Worker by starting wrangler dev.
func NewLive(opts LiveOptions) *Live {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	// Absolute, as wrangler runs in the Worker's folder (a relative path
	// would be looked up from there).
	for _, p := range []*string{&opts.Coordinator, &opts.Wrangler} {
		if *p != "" && strings.ContainsRune(*p, filepath.Separator) {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
	if opts.WorkerTTL <= 0 {
		opts.WorkerTTL = 4 * time.Second
	}
	l := &Live{
		opts:   opts,
		client: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		coords: map[string]*liveCoord{},
		stop:   make(chan struct{}),
		native: backendState{State: "off", Reason: "the server was started without -coordinator"},
		worker: backendState{State: "off", Reason: "the server was started without -wrangler or -worker"},
	}
	if opts.Coordinator != "" {
		l.native = backendState{State: "checking"}
		l.done.Go(l.checkNative)
	}
	switch {
	case opts.WorkerURL != "":
		u, err := url.Parse(opts.WorkerURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			l.worker = backendState{State: "unavailable", Reason: "-worker is not an http URL"}
		} else {
			l.worker = backendState{State: "ready", url: u}
		}
	case opts.Wrangler != "":
		l.worker = backendState{State: "starting"}
		l.done.Go(l.startWorker)
	}
	l.done.Go(l.reap)
	return l
}

func (l *Live) logf(format string, args ...any) {
	fmt.Fprintf(l.opts.Log, "live: "+format+"\n", args...)
}

// checkNative starts a coordinator and stops it: live mode says it is
// unavailable, and why, if that fails.
func (l *Live) checkNative() {
	p, err := startCoordinator(l.opts.Coordinator, time.Second)
	st := backendState{State: "ready"}
	if err != nil {
		st = backendState{State: "unavailable", Reason: err.Error()}
		l.logf("native coordinator unavailable: %v", err)
	} else {
		p.Kill()
	}
	l.mu.Lock()
	l.native = st
	l.mu.Unlock()
}

// startCoordinator runs cmd/coordinator -memory on a free loopback port and
// returns once it prints where it listens.
func startCoordinator(bin string, ttl time.Duration) (*coordProc, error) {
	s, err := child.Start(exec.Command(bin, "-memory", "-quiet", "-addr", "127.0.0.1:0", "-ttl", strconv.FormatInt(ttl.Microseconds(), 10)+"us"),
		child.Options{Timeout: liveStartTimeout})
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(s.URL)
	return &coordProc{Server: s, base: base}, err
}

// startWorker runs wrangler dev (offline, state in a temporary folder) in
// its own process group, so Close ends every process it started.
func (l *Live) startWorker() {
	fail := func(err error) {
		l.logf("Worker unavailable: %v", err)
		l.mu.Lock()
		l.worker = backendState{State: "unavailable", Reason: err.Error()}
		l.mu.Unlock()
	}
	dir, err := os.MkdirTemp("", "lease-fence-playground-worker-")
	if err != nil {
		fail(err)
		return
	}
	cmd := child.Wrangler(l.opts.Wrangler, l.opts.WorkerDir, dir, "--var", "LEASE_TTL_MS:"+strconv.FormatInt(l.opts.WorkerTTL.Milliseconds(), 10))
	if l.isClosed() {
		os.RemoveAll(dir)
		return
	}
	w, err := child.Start(cmd, child.Options{Dir: dir, Log: l.opts.WorkerLog, Timeout: 3 * time.Minute, Cancel: l.stop})
	if err != nil {
		if !l.isClosed() {
			fail(err)
		}
		return
	}
	l.mu.Lock()
	if l.closed { // Close has passed: nobody else stops it
		l.mu.Unlock()
		w.Stop()
		return
	}
	base, _ := url.Parse(w.URL)
	l.wrangler, l.worker = w, backendState{State: "ready", url: base}
	l.mu.Unlock()
	l.logf("Worker ready on %s (leases of %v)", w.URL, l.opts.WorkerTTL)
}

func (l *Live) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Close stops every process live mode started and removes the Worker's state.
func (l *Live) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.stop)
	coords := slices.Collect(maps.Values(l.coords))
	l.coords = map[string]*liveCoord{}
	w := l.wrangler
	l.mu.Unlock()
	for _, c := range coords {
		c.end()
	}
	if w != nil {
		w.Stop() // the whole process group: wrangler and its workerd
	}
	l.done.Wait()
}

func (c *liveCoord) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		c.proc.Kill()
		c.proc = nil
	}
}

// reap ends coordinators nobody has used for liveIdle.
func (l *Live) reap() {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case now := <-t.C:
			l.endIdle(now.Add(-liveIdle))
		}
	}
}

func (l *Live) endIdle(before time.Time) {
	var idle []*liveCoord
	l.mu.Lock()
	for id, c := range l.coords {
		if c.last.Before(before) {
			idle = append(idle, c)
			delete(l.coords, id)
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		l.logf("coordinator %s idle: stopped", c.id)
		c.end()
	}
}

// ServeHTTP answers LivePrefix.
func (l *Live) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, LivePrefix)
	if rest == "status" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			liveError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		l.mu.Lock()
		status := map[string]any{
			"native": l.native,
			"worker": struct {
				backendState
				TTLMillis int64 `json:"ttlMillis"`
			}{l.worker, l.opts.WorkerTTL.Milliseconds()},
		}
		l.mu.Unlock()
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, status)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		liveError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if msg := sameOrigin(r); msg != "" {
		liveError(w, http.StatusForbidden, msg)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLiveBody))
	if err != nil {
		liveError(w, http.StatusRequestEntityTooLarge, "body too large")
		return
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 3 && parts[0] == "worker" && parts[1] == "v1" && isOp(parts[2]):
		l.mu.Lock()
		st := l.worker
		l.mu.Unlock()
		if st.State != "ready" {
			liveError(w, http.StatusServiceUnavailable, "the Worker is not available: "+st.State+" "+st.Reason)
			return
		}
		l.forward(w, r.Context(), st.url, parts[2], body)
	case len(parts) == 2 && parts[0] == "native" && parts[1] == "start":
		l.start(w, body)
	case len(parts) >= 3 && parts[0] == "native":
		c := l.coord(parts[1])
		if c == nil {
			liveError(w, http.StatusNotFound, "no such coordinator (it may have been stopped when idle)")
			return
		}
		switch {
		case len(parts) == 3 && parts[2] == "restart":
			if err := l.restart(c); err != nil {
				liveError(w, http.StatusServiceUnavailable, err.Error())
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"ok": true})
		case len(parts) == 3 && parts[2] == "stop":
			l.mu.Lock()
			delete(l.coords, c.id)
			l.mu.Unlock()
			c.end()
			writeJSON(w, http.StatusOK, map[string]any{"ok": true})
		case len(parts) == 4 && parts[2] == "v1" && isOp(parts[3]):
			c.mu.RLock()
			defer c.mu.RUnlock()
			if c.proc == nil {
				liveError(w, http.StatusServiceUnavailable, "the coordinator is not running")
				return
			}
			l.forward(w, r.Context(), c.proc.base, parts[3], body)
		default:
			liveError(w, http.StatusNotFound, "not found")
		}
	default:
		liveError(w, http.StatusNotFound, "not found")
	}
}

func isOp(s string) bool { return s == "acquire" || s == "renew" || s == "release" }

// sameOrigin refuses requests a page of another origin could make: a body
// that is not JSON (a cross-origin page can send JSON only after a
// preflight, which this server never answers), another Origin, a
// cross-site fetch, or a Host that is not this loopback server (DNS
// rebinding).
func sameOrigin(r *http.Request) string {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return "live mode takes application/json"
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil || (host != "127.0.0.1" && host != "localhost" && host != "[::1]" && host != "::1") {
		return "live mode answers only on its loopback address"
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return "live mode answers only its own page"
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return "live mode answers only its own page"
	}
	return ""
}

func (l *Live) coord(id string) *liveCoord {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.coords[id]
	if c != nil {
		c.last = time.Now()
	}
	return c
}

func (l *Live) start(w http.ResponseWriter, body []byte) {
	var req struct {
		TTLMillis float64 `json:"ttlMillis"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.TTLMillis < 1 || req.TTLMillis > float64(maxLiveTTL/time.Millisecond) {
		liveError(w, http.StatusBadRequest, fmt.Sprintf(`the body must be {"ttlMillis": n} with n from 1 to %d`, maxLiveTTL/time.Millisecond))
		return
	}
	l.mu.Lock()
	st := l.native
	closed := l.closed
	l.mu.Unlock()
	if closed || st.State != "ready" {
		liveError(w, http.StatusServiceUnavailable, "the native coordinator is not available: "+st.State+" "+st.Reason)
		return
	}
	ttl := time.Duration(req.TTLMillis * float64(time.Millisecond))
	p, err := startCoordinator(l.opts.Coordinator, ttl)
	if err != nil {
		l.logf("%v", err)
		liveError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	c := &liveCoord{id: hex.EncodeToString(raw[:]), ttl: ttl, proc: p, last: time.Now()}
	var evicted *liveCoord
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		p.Kill()
		liveError(w, http.StatusServiceUnavailable, "the server is stopping")
		return
	}
	if len(l.coords) >= maxLiveCoordinators {
		for _, o := range l.coords {
			if evicted == nil || o.last.Before(evicted.last) {
				evicted = o
			}
		}
		delete(l.coords, evicted.id)
	}
	l.coords[c.id] = c
	l.mu.Unlock()
	if evicted != nil {
		l.logf("coordinator %s stopped: more than %d running", evicted.id, maxLiveCoordinators)
		evicted.end()
	}
	l.logf("coordinator %s on %s (ttl %v)", c.id, p.base, ttl)
	writeJSON(w, http.StatusOK, map[string]any{"id": c.id, "ttlMillis": req.TTLMillis})
}

// restart kills c's process and starts another with the same lease length;
// requests wait for it.
func (l *Live) restart(c *liveCoord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		c.proc.Kill()
		c.proc = nil
	}
	p, err := startCoordinator(l.opts.Coordinator, c.ttl)
	if err != nil {
		return err
	}
	c.proc = p
	l.logf("coordinator %s restarted on %s", c.id, p.base)
	return nil
}

// forward posts body to base's /v1/op and copies the answer back.
func (l *Live) forward(w http.ResponseWriter, ctx context.Context, base *url.URL, op string, body []byte) {
	target := base.JoinPath("v1", op)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		liveError(w, http.StatusInternalServerError, err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := l.client.Do(req)
	if err != nil {
		liveError(w, http.StatusBadGateway, "the coordinator did not answer: "+err.Error())
		return
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		liveError(w, http.StatusBadGateway, "the coordinator's answer broke off")
		return
	}
	if ct := res.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(data)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// liveError answers in the coordinator's error shape, which the service
// client reads: {"error": {"code", "message"}}.
func liveError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": "live_" + strconv.Itoa(status), "message": msg}})
}
