//go:build !js

// Package faultproxy is the Go tests' fault proxy in front of a coordinator
// (the native server or the Worker under wrangler dev): an HTTP server on
// 127.0.0.1 that forwards each request and, as a policy decides per
// request, drops the reply (forwards, then closes the client's connection
// without answering), holds it (forwards, then never answers until the
// client gives up), holds the request (never forwards it), delays the reply
// until the test releases it, or answers on its own. A client that goes
// away has its forwarded request cancelled too, so the coordinator sees the
// disconnect. It is the Go counterpart of the JavaScript tests' proxy in
// test/svcclient.
package faultproxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/wranglerdev"
)

// Call is one request the proxy received.
type Call struct {
	N    int    // 1 for the first request the proxy received
	Path string // /v1/acquire, ...
	Body []byte
	// Status and Reply are the coordinator's answer, once it came (zero
	// while forwarding, or if the request was not forwarded).
	Status int
	Reply  []byte
}

// Action says what to do with one request; the zero Action forwards it and
// answers.
type Action struct {
	// Drop forwards the request, then closes the client's connection
	// instead of answering: a reply lost on the way back (with Release,
	// once Release is closed).
	Drop bool
	// HoldReply forwards the request, then answers nothing until the
	// client goes away: a reply that never arrives.
	HoldReply bool
	// Hold answers nothing and forwards nothing until the client goes
	// away: a request lost on the way.
	Hold bool
	// Release, if not nil, is waited for after forwarding, before
	// answering: a reply delayed until the test closes it (or the client
	// goes away).
	Release <-chan struct{}
	// Before, if not nil, runs before the request is forwarded.
	Before func()
}

// Proxy is a fault proxy. Set Policy before the first request, or change
// it with SetPolicy.
type Proxy struct {
	URL    string // http://127.0.0.1:PORT
	target string
	srv    *http.Server
	hc     *http.Client

	mu     sync.Mutex
	policy func(*Call) Action
	calls  []*Call
	notify []chan *Call
	active int // requests being served
	parked int // of those, requests held or whose reply is held or delayed
}

// Start serves a proxy in front of target (such as "http://127.0.0.1:8787")
// on a free loopback port.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	// wranglerdev.Transport: a call that wrangler dev's own proxy lost is
	// sent again, as the client would, instead of failing a test on a fault
	// of the test harness's runtime that the test did not ask for.
	p := &Proxy{URL: "http://" + ln.Addr().String(), target: target, hc: &http.Client{Transport: wranglerdev.Transport{Base: tr}}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the proxy and closes every connection it holds.
func (p *Proxy) Close() {
	_ = p.srv.Close()
	p.hc.CloseIdleConnections()
}

// SetPolicy decides what happens to every later request; nil forwards
// everything.
func (p *Proxy) SetPolicy(policy func(*Call) Action) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.policy = policy
}

// Calls returns the requests received so far, in order.
func (p *Proxy) Calls() []*Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Call, len(p.calls))
	for i, c := range p.calls {
		cp := *c
		out[i] = &cp
	}
	return out
}

// InFlight returns how many requests the proxy is serving (received, and
// neither answered nor ended by their client yet) and how many of those are
// parked: held, or with their reply held back or delayed, waiting for the
// test or their client. A test whose holder runs on a manual clock waits
// for active == parked before moving the clock: every other request is
// still on its way.
func (p *Proxy) InFlight() (active, parked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active, p.parked
}

// park counts a request as parked until the returned function is called.
func (p *Proxy) park() func() {
	p.mu.Lock()
	p.parked++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.parked--
		p.mu.Unlock()
	}
}

// Next returns a channel that receives the next request the proxy
// receives, before it is forwarded.
func (p *Proxy) Next() <-chan *Call {
	ch := make(chan *Call, 1)
	p.mu.Lock()
	p.notify = append(p.notify, ch)
	p.mu.Unlock()
	return ch
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	p.mu.Lock()
	c := &Call{N: len(p.calls) + 1, Path: r.URL.Path, Body: body}
	p.calls = append(p.calls, c)
	p.active++
	policy := p.policy
	notify := p.notify
	p.notify = nil
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.active--
		p.mu.Unlock()
	}()
	for _, ch := range notify {
		cp := *c
		ch <- &cp
	}
	var act Action
	if policy != nil {
		act = policy(c)
	}
	ctx := r.Context()
	if act.Hold {
		unpark := p.park()
		<-ctx.Done()
		unpark()
		return
	}
	if act.Before != nil {
		act.Before()
	}
	// The forwarded request ends when the client goes away, so the
	// coordinator sees the disconnect.
	req, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
		return
	}
	reply, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	p.mu.Lock()
	c.Status, c.Reply = resp.StatusCode, reply
	p.mu.Unlock()
	switch {
	case act.HoldReply:
		unpark := p.park()
		<-ctx.Done()
		unpark()
		return
	case act.Release != nil:
		unpark := p.park()
		select {
		case <-act.Release:
			unpark()
		case <-ctx.Done():
			unpark()
			return
		}
	}
	if act.Drop {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(reply)
}

// Wait blocks until ctx ends or cond holds for the calls received so far,
// checking again whenever a request arrives or every 10 ms.
func (p *Proxy) Wait(ctx context.Context, cond func([]*Call) bool) bool {
	for {
		next := p.Next()
		if cond(p.Calls()) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-next:
		case <-time.After(10 * time.Millisecond):
		}
	}
}
