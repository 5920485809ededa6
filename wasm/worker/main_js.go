//go:build js && wasm

// Command worker is the lease coordinator as a Cloudflare Worker, built with
// github.com/syumai/workers (its runtime glue, environment and bindings
// access, and readiness signal). The Worker's fetch decodes and checks each
// call with the same httpapi.NewHandler the native server uses, then routes it
// to the Durable Object named after the call's resource (idFromName). Inside
// the object the same handler runs again over the same state machine
// (service.Service over a service.Local) as the native server, whose
// Persister is the object's transactional storage, so the fence counter
// and the lease are written before the grant leaves.
//
// JavaScript cannot be avoided for the Durable Object class itself:
// worker.mjs defines it in a few lines and hands each request and the
// object's storage to the Go functions registered here. worker.mjs also keeps
// one Go instance per isolate, started on the first request, instead of the
// stock glue's fresh instance per request.
package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/syumai/workers"
	"github.com/syumai/workers/cloudflare"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/auth"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// namespaceBinding is the Durable Object binding in wrangler.toml.
const namespaceBinding = "LEASES"

// tokensSecret names the secret that holds the tokens file, the same JSON
// as the native server's -auth (package service/auth): `wrangler secret
// put LEASE_TOKENS < tokens.json`. Unset, the Worker takes calls without
// tokens. originsVar lists the origins whose pages may call the Worker
// (comma-separated, as -cors-origin).
const (
	tokensSecret = "LEASE_TOKENS"
	originsVar   = "LEASE_CORS_ORIGINS"
)

// defaultTTL applies when the LEASE_TTL_MS variable is unset.
const defaultTTL = 30 * time.Second

func main() {
	binding := js.Global().Get("context").Get("binding")
	limits, err := readLimits()
	if err != nil {
		// Every call is refused with the reason: a misconfigured Worker
		// must not serve with other limits than it was given.
		limits.err = err
	}
	front, err := frontHandler(&router{limits: limits}, limits)
	if err != nil {
		// As for the limits: refuse every call with the reason (which
		// never holds a token or its hash).
		limits.err = err
		front = httpapi.NewHandler(&router{limits: limits}, httpapi.HandlerOptions{MaxWait: limits.maxWait})
	}
	// Not workers.ServeNonBlock: its handleRequest converts the request and
	// response bodies through ReadableStreams, which measured 30% slower
	// here than frontFetch, which takes and returns strings.
	binding.Set("frontFetch", js.FuncOf(func(_ js.Value, args []js.Value) (result any) {
		defer recoverTo(&result)
		return serveString(front, args, nil)
	}))
	objects := &objectTable{}
	binding.Set("openObject", js.FuncOf(objects.open))
	binding.Set("closeObject", js.FuncOf(objects.close))
	binding.Set("objectFetch", js.FuncOf(objects.fetch))
	tokens := &tokenTable{}
	binding.Set("openToken", js.FuncOf(tokens.open))
	binding.Set("closeToken", js.FuncOf(tokens.close))
	binding.Set("tokenFetch", js.FuncOf(tokens.fetch))
	// tick(handle) runs the object's wake-ups that are due, in the
	// object's own context (worker.mjs calls it from the object's interval
	// while it has a call open or wake-ups pending).
	binding.Set("tick", js.FuncOf(objects.tick))
	workers.Ready()
	select {} // one instance serves every later request of this isolate
}

// frontHandler is the Worker's own handler: the calls checked and routed
// to their objects, behind the tokens of LEASE_TOKENS and the origins of
// LEASE_CORS_ORIGINS, if set. The router hands each object the caller (the
// token's name and limits): the object keeps the token's maxWaiters for
// its resource, and its maxLeases through the token's own object
// (tokens_js.go).
func frontHandler(r *router, l limits) (http.Handler, error) {
	opts := httpapi.HandlerOptions{MaxWait: l.maxWait}
	var guard *auth.Guard
	set, err := tokenSet()
	if err != nil {
		return nil, err
	}
	if set != nil {
		guard = auth.NewGuard(set, auth.Options{})
		opts.Authorize = guard.Authorize
	}
	h := httpapi.NewHandler(r, opts)
	if guard != nil {
		h = guard.Middleware(h)
	}
	if v := cloudflare.Getenv(originsVar); v != "" {
		var origins []string
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				origins = append(origins, o)
			}
		}
		if err := httpapi.CheckOrigins(origins); err != nil {
			return nil, errors.New(originsVar + ": " + err.Error())
		}
		h = httpapi.CORS(origins, h)
	}
	return h, nil
}

// limits are the Worker's settings from its environment: LEASE_TTL_MS,
// LEASE_MAX_WAIT_MS and LEASE_MAX_WAITERS (each Durable Object's bound: an
// object serves one resource).
type limits struct {
	ttl        time.Duration
	maxWait    time.Duration
	maxWaiters int
	err        error
}

func readLimits() (limits, error) {
	l := limits{ttl: defaultTTL, maxWait: wire.DefaultMaxWait, maxWaiters: service.DefaultMaxWaiters}
	for _, v := range []struct {
		name string
		set  func(float64)
		intg bool
	}{
		{"LEASE_TTL_MS", func(ms float64) { l.ttl = clock.FromMillis(ms) }, false},
		{"LEASE_MAX_WAIT_MS", func(ms float64) { l.maxWait = clock.FromMillis(ms) }, true},
		{"LEASE_MAX_WAITERS", func(n float64) { l.maxWaiters = int(n) }, true},
	} {
		s := cloudflare.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || !(n > 0) || math.IsInf(n, 0) || (v.intg && (n != math.Trunc(n) || n > 1<<31)) {
			return l, errors.New(v.name + " must be a positive number, got " + strconv.Quote(s))
		}
		v.set(n)
	}
	return l, nil
}

// router is the Worker's backend: it forwards a checked call to the Durable
// Object of its resource and returns the object's answer. It calls the stub
// with a string body and reads the answer as a string: the stream
// conversions of a general-purpose fetch cost more than the call itself. A
// call that waits stays open in the object until it is answered: the
// object holds it, and its own timers and the calls it serves wake it.
type router struct {
	limits limits
	once   sync.Once
	ns     js.Value
	err    error
}

func (r *router) Call(_ context.Context, m wire.Message) (wire.Reply, error) {
	if r.limits.err != nil {
		return wire.Reply{}, &wire.Error{Status: 500, Code: wire.CodeInternal, Message: r.limits.err.Error()}
	}
	r.once.Do(func() {
		r.ns = cloudflare.GetBinding(namespaceBinding)
		if r.ns.IsUndefined() {
			r.err = errors.New("no Durable Object binding " + namespaceBinding)
		}
	})
	if r.err != nil {
		return wire.Reply{}, &wire.Error{Status: 500, Code: wire.CodeInternal, Message: r.err.Error()}
	}
	body, err := wire.EncodeMessage(m)
	if err != nil {
		return wire.Reply{}, err
	}
	stub := r.ns.Call("get", r.ns.Call("idFromName", m.Request.Resource))
	init := js.Global().Get("Object").New()
	init.Set("method", http.MethodPost)
	headers := js.Global().Get("Object").New()
	headers.Set("content-type", "application/json")
	if m.Caller.Name != "" {
		headers.Set(callerHeader, encodeCaller(m.Caller))
	}
	init.Set("headers", headers)
	init.Set("body", string(body))
	resp, err := await(stub.Call("fetch", "https://lease-object"+m.Op.Path(), init))
	if err != nil {
		return wire.Reply{}, &wire.Error{Status: 503, Code: wire.CodeUnavailable, Message: "the resource's object did not answer: " + err.Error()}
	}
	text, err := await(resp.Call("text"))
	if err != nil {
		return wire.Reply{}, &wire.Error{Status: 503, Code: wire.CodeUnavailable, Message: "reading the object's answer: " + err.Error()}
	}
	data := []byte(text.String())
	status := resp.Get("status").Int()
	if status != http.StatusOK {
		if e := wire.ParseError(status, data); e != nil {
			return wire.Reply{}, e
		}
		return wire.Reply{}, &wire.Error{Status: 502, Code: wire.CodeInternal, Message: "the object answered " + strconv.Itoa(status)}
	}
	var reply wire.Reply
	if err := json.Unmarshal(data, &reply); err != nil {
		return wire.Reply{}, &wire.Error{Status: 502, Code: wire.CodeInternal, Message: "the object's answer is unreadable"}
	}
	return reply, nil
}

// object is the Go side of one Durable Object instance.
type object struct {
	handler http.Handler
	svc     *service.Service
	ttl     time.Duration
	swept   time.Time // when expired records were last deleted
	timers  *objectTimers
}

// objectTable holds the Go side of the resources' objects of this isolate.
type objectTable struct{ handles[*object] }

// handles numbers the Go side of each Durable Object instance of one class,
// for worker.mjs, which passes the number back with each call.
type handles[T any] struct {
	mu   sync.Mutex
	next int
	by   map[int]T
}

// add keeps v and returns its handle.
func (h *handles[T]) add(v T) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[int]T{}
	}
	h.next++
	h.by[h.next] = v
	return h.next
}

// get is the instance whose handle is arg, if arg is the number of one.
func (h *handles[T]) get(arg js.Value) (v T, ok bool) {
	if arg.Type() != js.TypeNumber {
		return v, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok = h.by[arg.Int()]
	return v, ok
}

// close(handle) forgets an instance the runtime has let go of.
func (h *handles[T]) close(_ js.Value, args []js.Value) any {
	if len(args) == 1 && args[0].Type() == js.TypeNumber {
		h.mu.Lock()
		delete(h.by, args[0].Int())
		h.mu.Unlock()
	}
	return nil
}

// open(storage) makes the Go side of a new object instance and returns its
// handle. State is loaded from storage on the first call for a resource.
func (t *objectTable) open(_ js.Value, args []js.Value) (result any) {
	defer recoverTo(&result)
	if len(args) != 1 || args[0].Type() != js.TypeObject {
		return js.Global().Get("Error").New("openObject(storage) takes the object's storage")
	}
	l, err := readLimits()
	if err != nil {
		return js.Global().Get("Error").New(err.Error())
	}
	// The mark is written with each grant (no reserve): a Durable
	// Object's storage never loses an acknowledged write. The leases of
	// tokens with a maxLeases are counted in the tokens' objects.
	cfg := service.LocalConfig{Clock: newDateClock("coordinator"), TTL: l.ttl, Persist: &objectStore{storage: args[0]}}
	set, err := tokenSet()
	if err != nil {
		return js.Global().Get("Error").New(err.Error())
	}
	if set != nil {
		if led := newTokenLedger(set); led != nil {
			cfg.Ledger = led
		}
	}
	store, err := service.NewLocal(cfg)
	if err != nil {
		return js.Global().Get("Error").New(err.Error())
	}
	// Wake-ups (an expiry with waiters, the end of a wait) are the
	// object's own timers, run only when the object itself enters Go
	// (objectTimers): not Go timers, which the runtime fires in whichever
	// request or object is running Go at the time, where the object's
	// storage refuses every call.
	timers := &objectTimers{}
	svc, err := service.New(service.Config{TTL: l.ttl, Store: store, MaxWait: l.maxWait, MaxWaiters: l.maxWaiters, AfterFunc: timers.after})
	if err != nil {
		return js.Global().Get("Error").New(err.Error())
	}
	// The caller comes from the front, the only one that calls an object.
	caller := func(r *http.Request, m *wire.Message) *wire.Error {
		if v := r.Header.Get(callerHeader); v != "" {
			c, ok := decodeCaller(v)
			if !ok {
				return wire.NewError(wire.CodeInternal, "the front handed the object an unreadable caller")
			}
			m.Caller = c
		}
		return nil
	}
	return t.add(&object{handler: httpapi.NewHandler(svc, httpapi.HandlerOptions{MaxWait: l.maxWait, Authorize: caller}), svc: svc, ttl: l.ttl, timers: timers})
}

// fetch(handle, method, url, contentType, contentLength, body) answers one
// request to an object with a promise of {status, body, headers}.
func (t *objectTable) fetch(_ js.Value, args []js.Value) (result any) {
	defer recoverTo(&result)
	if (len(args) != 6 && len(args) != 7) || args[0].Type() != js.TypeNumber {
		return rejected(errors.New("objectFetch(handle, method, url, contentType, contentLength, body[, headers])"))
	}
	o, ok := t.get(args[0])
	if !ok {
		return rejected(errors.New("objectFetch: unknown object handle"))
	}
	o.timers.run()
	return serveString(o.handler, args[1:], o.sweep)
}

// tick(handle) runs the due wake-ups of an object (worker.mjs calls it
// from the object's own interval) and answers whether the object still has
// wake-ups pending: its interval goes on until it has none and no call open.
func (t *objectTable) tick(_ js.Value, args []js.Value) any {
	if len(args) != 1 {
		return false
	}
	o, ok := t.get(args[0])
	return ok && o.timers.run()
}

// objectTimers are the wake-ups of one object's Service (its
// clock.AfterFunc). A Go timer would fire in whichever JavaScript context
// happens to be running Go when it is due (another object's, or a
// stateless request's), and the storage calls of the decision it starts
// would be refused there ("Cannot perform I/O on behalf of a different
// Durable Object"): the decision fails, and the fence it took is lost.
// These run only from run, which the object calls from its own context
// (its interval, its requests), in a goroutine that the Go runtime runs,
// with those it starts, up to their first wait before it returns to
// JavaScript, so their storage calls are made in that context, and their
// awaits resume from the object's own promises.
type objectTimers struct {
	mu   sync.Mutex
	list []*objectTimer
}

type objectTimer struct {
	ts   *objectTimers
	at   time.Time
	f    func()
	done bool
}

func (ts *objectTimers) after(d time.Duration, f func()) clock.Timer {
	ot := &objectTimer{ts: ts, at: time.Now().Add(d), f: f}
	ts.mu.Lock()
	ts.list = append(ts.list, ot)
	ts.mu.Unlock()
	return ot
}

func (ot *objectTimer) Stop() bool {
	ot.ts.mu.Lock()
	defer ot.ts.mu.Unlock()
	if ot.done {
		return false
	}
	ot.done = true
	if i := slices.Index(ot.ts.list, ot); i >= 0 {
		ot.ts.list = slices.Delete(ot.ts.list, i, i+1)
	}
	return true
}

// run runs the functions of the timers that are due, in the order they
// were due, one after the other in one goroutine (a Service's wake-up
// functions only take its lock or start goroutines of their own, so none
// holds up the next for long), and says whether timers are still pending.
// In that order a kept place that ran out is forgotten before an expiry due
// later serves the queue, as Go timers would have done on time.
func (ts *objectTimers) run() (pending bool) {
	now := time.Now()
	var due []*objectTimer
	ts.mu.Lock()
	for i := 0; i < len(ts.list); {
		if ot := ts.list[i]; !now.Before(ot.at) {
			ot.done = true
			due = append(due, ot)
			ts.list = slices.Delete(ts.list, i, i+1)
			continue
		}
		i++
	}
	pending = len(ts.list) > 0
	ts.mu.Unlock()
	if len(due) > 0 {
		slices.SortStableFunc(due, func(a, b *objectTimer) int { return a.at.Compare(b.at) })
		go func() {
			for _, ot := range due {
				ot.f()
			}
		}()
	}
	return pending
}

// sweep deletes the object's record if its lease expired, at most once per
// TTL, before the object answers a request: an object has no timer of its
// own here, so an expired record stays until the object's next request.
func (o *object) sweep() {
	if now := time.Now(); now.Sub(o.swept) >= o.ttl {
		o.swept = now
		_, _ = o.svc.Sweep(context.Background())
	}
}

// serveString runs h on a request given as (method, url, contentType,
// contentLength, body[, headers]) strings, a number and an object of the
// other headers the handler reads (authorization, origin, the preflight's),
// and returns a promise of {status, body, headers}. contentLength is -1
// when unknown; the body may be empty when the declared length is already
// over the limit.
func serveString(h http.Handler, args []js.Value, before func()) js.Value {
	if (len(args) != 5 && len(args) != 6) || args[3].Type() != js.TypeNumber {
		return rejected(errors.New("serve(method, url, contentType, contentLength, body[, headers])"))
	}
	extra := http.Header{}
	if len(args) == 6 && args[5].Type() == js.TypeObject {
		for _, name := range forwardedHeaders {
			if v := args[5].Get(name); v.Type() == js.TypeString {
				extra.Set(name, v.String())
			}
		}
	}
	method, url, ctype, clen, body := args[0].String(), args[1].String(), args[2].String(), args[3].Int(), args[4].String()
	return promise(func() (js.Value, error) {
		if before != nil {
			before()
		}
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			return js.Value{}, err
		}
		req.ContentLength = int64(clen)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for k, v := range extra {
			req.Header[k] = v
		}
		w := &recorder{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(w, req)
		out := js.Global().Get("Object").New()
		out.Set("status", w.status)
		out.Set("body", w.body.String())
		headers := js.Global().Get("Object").New()
		for k, vs := range w.header {
			if k != "Content-Length" { // the runtime sets it from the body
				headers.Set(strings.ToLower(k), strings.Join(vs, ", "))
			}
		}
		out.Set("headers", headers)
		return out, nil
	})
}

// forwardedHeaders are the request headers worker.mjs hands to Go besides
// the content type and length: the token, and what CORS reads.
var forwardedHeaders = []string{"authorization", "origin", "access-control-request-method", "access-control-request-headers", callerHeader}

// recorder is the ResponseWriter the object's handler writes to.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// objectStore is the service.Persister of one Durable Object: the fence
// mark under one key and the entry of the object's resource under another
// (as service.EncodeEntry writes it), in the object's transactional
// storage. Writes issued without an await between them are committed
// together by the runtime, which also holds the object's outgoing messages
// until they are durable, so every write is synced.
type objectStore struct {
	storage js.Value
}

const (
	markKey     = "lease-fence/fence-mark"
	entryPrefix = "lease-fence/entry/"
)

func (s *objectStore) Load(context.Context) (service.Stored, error) {
	opts := js.Global().Get("Object").New()
	opts.Set("prefix", "lease-fence/")
	m, err := await(s.storage.Call("list", opts))
	if err != nil {
		return service.Stored{}, err
	}
	var st service.Stored
	var bad []error
	hasMark := false
	each := js.FuncOf(func(_ js.Value, args []js.Value) any {
		key := args[1].String()
		if args[0].Type() != js.TypeString {
			bad = append(bad, errors.New("the stored "+strconv.Quote(key)+" is not a string"))
			return nil
		}
		switch v := args[0].String(); {
		case key == markKey:
			hasMark = true
			if st.Mark, err = strconv.ParseUint(v, 10, 64); err != nil {
				bad = append(bad, errors.New("the stored fence mark is unreadable"))
			}
		case strings.HasPrefix(key, entryPrefix):
			e, err := service.DecodeEntry(strings.TrimPrefix(key, entryPrefix), []byte(v))
			if err != nil {
				bad = append(bad, err)
			}
			st.Entries = append(st.Entries, e)
		default:
			bad = append(bad, errors.New("unexpected stored key "+strconv.Quote(key)))
		}
		return nil
	})
	m.Call("forEach", each)
	each.Release()
	if !hasMark && len(st.Entries) > 0 {
		bad = append(bad, errors.New("a lease is stored without the fence mark"))
	}
	if len(bad) > 0 {
		return service.Stored{}, errors.Join(append([]error{service.ErrInconsistent}, bad...)...)
	}
	return st, nil
}

func (s *objectStore) Write(_ context.Context, b service.Batch, _ bool) error {
	entries := map[string]any{}
	if b.Mark != 0 {
		entries[markKey] = strconv.FormatUint(b.Mark, 10)
	}
	for _, e := range b.Put {
		data, err := service.EncodeEntry(e)
		if err != nil {
			return err
		}
		entries[entryPrefix+e.Resource] = string(data)
	}
	keys := make([]any, len(b.Delete))
	for i, name := range b.Delete {
		keys[i] = entryPrefix + name
	}
	return storageWrite(s.storage, entries, keys)
}

// storageWrite puts entries and deletes keys in a Durable Object's storage
// as one write: both calls are made before either is awaited, so the
// runtime commits them together.
func storageWrite(storage js.Value, entries map[string]any, keys []any) error {
	var calls []js.Value
	if len(entries) > 0 {
		calls = append(calls, storage.Call("put", js.ValueOf(entries)))
	}
	if len(keys) > 0 {
		calls = append(calls, storage.Call("delete", js.ValueOf(keys)))
	}
	for _, p := range calls {
		if _, err := await(p); err != nil {
			return err
		}
	}
	return nil
}

// newDateClock reads Date.now(), never lower than a reading it already gave.
func newDateClock(domain string) clock.Clock {
	var mu sync.Mutex
	last := math.Inf(-1)
	date := js.Global().Get("Date")
	c, _ := clock.New(domain, func() float64 {
		v := date.Call("now").Float()
		mu.Lock()
		defer mu.Unlock()
		if v < last {
			v = last
		}
		last = v
		return v
	})
	return c
}

// await waits for a JavaScript promise.
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	var then, catch js.Func
	then = js.FuncOf(func(_ js.Value, args []js.Value) any {
		v := js.Undefined()
		if len(args) > 0 {
			v = args[0]
		}
		ch <- result{v: v}
		return nil
	})
	catch = js.FuncOf(func(_ js.Value, args []js.Value) any {
		msg := "promise rejected"
		if len(args) > 0 {
			msg = args[0].Call("toString").String()
		}
		ch <- result{err: errors.New(msg)}
		return nil
	})
	p.Call("then", then, catch)
	r := <-ch
	then.Release()
	catch.Release()
	return r.v, r.err
}

// promise runs fn on a goroutine and returns a promise of its result. A
// panic in fn rejects the promise instead of killing the instance.
func promise(fn func() (js.Value, error)) js.Value {
	var executor js.Func
	executor = js.FuncOf(func(_ js.Value, args []js.Value) any {
		executor.Release()
		resolve, reject := args[0], args[1]
		go func() {
			defer func() {
				if p := recover(); p != nil {
					reject.Invoke(js.Global().Get("Error").New("lease-fence worker: panic: " + panicText(p)))
				}
			}()
			v, err := fn()
			if err != nil {
				reject.Invoke(js.Global().Get("Error").New(err.Error()))
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	return js.Global().Get("Promise").New(executor)
}

func rejected(err error) js.Value {
	return js.Global().Get("Promise").Call("reject", js.Global().Get("Error").New(err.Error()))
}

func recoverTo(result *any) {
	if p := recover(); p != nil {
		*result = rejected(errors.New("lease-fence worker: panic: " + panicText(p)))
	}
}

func panicText(p any) string {
	switch v := p.(type) {
	case error:
		return v.Error()
	case string:
		return v
	}
	return "unknown"
}
