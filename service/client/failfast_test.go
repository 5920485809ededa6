//go:build !js

package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/faultproxy"
	"github.com/lease-fence/lease-fence/test/rig/testpki"
)

// Issue #26's fail-fast items, as test/svcclient/failfast.test.mjs checks
// them for lease-fence/service-client.

// serveCoordinator serves an in-memory coordinator with the TTL ttl on
// real time, and returns its URL.
func serveCoordinator(t *testing.T, ttl time.Duration) string {
	t.Helper()
	clk, err := service.WallClock("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	store, err := service.NewLocal(service.LocalConfig{Clock: clk, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{TTL: ttl, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.NewHandler(svc, httpapi.HandlerOptions{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// startProxy starts a fault proxy in front of target.
func startProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	px, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	return px
}

// freeze makes px a frozen coordinator from now on: it accepts every
// request and never answers.
func freeze(px *faultproxy.Proxy) {
	px.SetPolicy(func(*faultproxy.Call) faultproxy.Action { return faultproxy.Action{Hold: true} })
}

// leaseClient is a lease.Client of holder id on clk (a real clock if nil).
// newClient is client.New(cfg), failing t on its error.
func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func leaseClient(t *testing.T, id string, clk clock.Clock) *lease.Client {
	t.Helper()
	if clk == nil {
		var err error
		if clk, err = clock.NewMonotonic(id); err != nil {
			t.Fatal(err)
		}
	}
	lc, err := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: id, ClockSkew: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// TestBaseURLPrefix: behind a reverse proxy that serves the coordinator
// under /leases/ (and strips it), a BaseURL with that path reaches it, with
// or without a trailing slash, on the client's own connections and
// through an HTTPClient; every call goes to /leases/v1/<op>.
func TestBaseURLPrefix(t *testing.T) {
	target, err := url.Parse(serveCoordinator(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var seen atomic.Int32
	mux := http.NewServeMux()
	rp := httputil.NewSingleHostReverseProxy(target)
	mux.Handle("/leases/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		paths = append(paths, r.URL.Path) // one call at a time
		http.StripPrefix("/leases", rp).ServeHTTP(w, r)
	}))
	front := httptest.NewServer(mux) // anything else: 404
	defer front.Close()
	for _, tc := range []struct {
		name, base string
		hc         *http.Client
	}{
		{"own connections", front.URL + "/leases", nil},
		{"trailing slash", front.URL + "/leases/", nil},
		{"HTTPClient", front.URL + "/leases", front.Client()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paths = nil
			c := newClient(t, client.Config{BaseURL: tc.base, Lease: leaseClient(t, "a", nil), HTTPClient: tc.hc, Attempts: 1})
			ctx := context.Background()
			l, err := c.Acquire(ctx, "r-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if l, err = c.Renew(ctx, l); err != nil {
				t.Fatal(err)
			}
			if st, err := c.Inspect(ctx, "r-"+tc.name); err != nil || !st.Held || st.Fence != l.Token().Fence {
				t.Fatalf("inspect: %+v %v", st, err)
			}
			if err := c.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			want := []string{"/leases/v1/acquire", "/leases/v1/renew", "/leases/v1/inspect", "/leases/v1/release"}
			if strings.Join(paths, " ") != strings.Join(want, " ") {
				t.Fatalf("the proxy saw %v, want %v", paths, want)
			}
		})
	}
}

// TestNewChecksBaseURLs: each base URL that is not an http:// or
// https:// URL with a host and at most a path is refused by New,
// with a message naming the field and the mistake (and not showing a
// password); good ones are taken.
func TestNewChecksBaseURLs(t *testing.T) {
	lc := leaseClient(t, "a", nil)
	for _, tc := range []struct{ url, want string }{
		{"localhost:8787", `BaseURL "localhost:8787" has no scheme: write it with http:// or https:// in front`},
		{"127.0.0.1:8787", `BaseURL "127.0.0.1:8787" has no scheme`},
		{"ftp://h/x", `BaseURL "ftp://h/x" has the scheme "ftp": it must be http or https`},
		{"http://", `BaseURL "http://" has no host`},
		{"http:/x", `BaseURL "http:/x" has no host`},
		{"https://:8787", `BaseURL "https://:8787" has no host`},
		{"http://bad host", `BaseURL "http://bad host" is not a URL (invalid character " " in host name)`},
		{"http://h:99999", `BaseURL "http://h:99999" has the port 99999: a port is from 1 to 65535`},
		{"http://h:0", `has the port 0`},
		{"http://h:", `has an empty port`},
		{"http://h/p?x=1", `BaseURL "http://h/p?x=1" has a query or a fragment`},
		{"http://h/p#top", `has a query or a fragment`},
		{"http://h/p?", `has a query or a fragment`},
		{"http://user:hunter2@h", `BaseURL has a user name or password in it`},
		{"http://user:hunter2@bad host", `BaseURL is not a URL`},
		{"", `BaseURL is required`},
	} {
		_, err := client.New(client.Config{BaseURL: tc.url, Lease: lc})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: %v, want %q", tc.url, err, tc.want)
		}
	}
	_, err := client.New(client.Config{BaseURLs: []string{"http://a", "a:1"}, Lease: lc})
	if err == nil || !strings.Contains(err.Error(), `Config.BaseURLs[1] "a:1" has no scheme`) {
		t.Errorf("BaseURLs: %v", err)
	}
	for _, good := range []string{"http://127.0.0.1:1", "https://leases.example.com/prefix/", "http://[::1]:8787/a/b", "HTTP://h"} {
		if _, err := client.New(client.Config{BaseURL: good, Lease: lc}); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

// TestCertificateErrorsAreFinal: a coordinator whose TLS certificate is of
// an unknown CA, or not for the name the client asks for, fails the call at
// the first attempt with a *client.CertificateError saying so on its first
// line, on the client's own connections and through an HTTPClient; with
// the CA and the right name, the same server answers.
func TestCertificateErrorsAreFinal(t *testing.T) {
	pki, err := testpki.New(t.TempDir(), "failfast")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(pki.Server, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.NotFound(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()
	lc := leaseClient(t, "a", nil)
	for _, tc := range []struct {
		name     string
		tls      *tls.Config
		hc       *http.Client
		mismatch bool
	}{
		{"unknown CA", nil, nil, false},
		{"unknown CA, HTTPClient", nil, &http.Client{}, false},
		{"name mismatch", &tls.Config{RootCAs: pki.CAPool, ServerName: "other.test"}, nil, true},
		{"name mismatch, HTTPClient", nil, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.CAPool, ServerName: "other.test"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, client.Config{BaseURL: srv.URL, Lease: lc, TLS: tc.tls, HTTPClient: tc.hc,
				Backoff: func(n int) time.Duration { t.Errorf("attempt %d", n); return 0 }})
			_, err = c.Acquire(context.Background(), "r")
			var ce *client.CertificateError
			if !errors.As(err, &ce) || ce.NameMismatch != tc.mismatch || ce.BaseURL != srv.URL {
				t.Fatalf("%#v", err)
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			want := "client: acquire: the TLS certificate of " + srv.URL + " cannot be verified (x509: certificate signed by unknown authority"
			if tc.mismatch {
				want = "client: acquire: the TLS certificate of " + srv.URL + " is not for its host (x509: certificate is valid for"
			}
			if !strings.HasPrefix(first, want) || !strings.Contains(first, "not retried") {
				t.Fatalf("first line %q, want %q...", first, want)
			}
		})
	}
	if calls.Load() != 0 {
		t.Fatalf("the server got %d requests", calls.Load())
	}
	// The same server, trusted: its answer (404) comes through.
	c := newClient(t, client.Config{BaseURL: srv.URL, Lease: lc, TLS: &tls.Config{RootCAs: pki.CAPool}})
	if _, err := c.Acquire(context.Background(), "r"); !isCode(err, "http_404") || calls.Load() != 1 {
		t.Fatalf("trusted: %v after %d requests", err, calls.Load())
	}
}

func isCode(err error, code string) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Code == code
}

// TestStatusesRetriedOrFinal: a 4xx other than 408 and 429 is final at the
// first attempt, and so are the refusals of a full coordinator or token
// (too_many_leases, too_many_token_leases, too_many_token_waiters); a 408,
// a 429 and a 5xx are sent again, up to Attempts.
func TestStatusesRetriedOrFinal(t *testing.T) {
	var status atomic.Int32
	var code atomic.Value
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if c := code.Load().(string); c != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(status.Load()))
			_, _ = w.Write([]byte(`{"error":{"code":"` + c + `","message":"m"}}`))
			return
		}
		http.Error(w, "no", int(status.Load()))
	}))
	defer srv.Close()
	c := newClient(t, client.Config{BaseURL: srv.URL, Lease: leaseClient(t, "a", nil), Attempts: 3,
		Backoff: func(int) time.Duration { return 0 }})
	for _, tc := range []struct {
		status int
		code   string
		sent   int32
	}{
		{400, "", 1}, {401, "unauthorized", 1}, {403, "", 1}, {404, "", 1}, {409, "request_id_reused", 1}, {422, "rejected", 1},
		{408, "", 3}, {429, "", 3}, {500, "internal", 3}, {502, "", 3}, {503, "unavailable", 3},
		{503, wire.CodeTooManyLeases, 1}, {429, wire.CodeTooManyTokenLeases, 1}, {429, wire.CodeTooManyTokenWaiters, 1},
	} {
		status.Store(int32(tc.status))
		code.Store(tc.code)
		calls.Store(0)
		_, err := c.Acquire(context.Background(), "r")
		var we *wire.Error
		if !errors.As(err, &we) || we.Status != tc.status || calls.Load() != tc.sent {
			t.Errorf("%d %s: sent %d times (want %d): %v", tc.status, tc.code, calls.Load(), tc.sent, err)
		}
		if first, _, _ := strings.Cut(err.Error(), "\n"); tc.sent == 1 && !strings.HasPrefix(first, "coordinator: ") || strings.Contains(first, "no answer") != (tc.sent > 1) {
			t.Errorf("%d %s: first line %q", tc.status, tc.code, first)
		}
	}
}

// TestRenewalOutlivesALostReply: TTL 2 s, real timers; the first renewal's
// first attempt is never answered (the proxy holds its reply until the
// client gives up). After half the time left before the lease would count
// as lost, not AttemptTimeout (5 s, more than the TTL), a hedge is sent
// beside it, in time, and the lease is kept, with the same request.
func TestRenewalOutlivesALostReply(t *testing.T) {
	t.Parallel()
	px := startProxy(t, serveCoordinator(t, 2*time.Second))
	// The fault is armed once Hold has returned: an acquisition that took
	// the lease's whole time (a loaded machine) makes Hold renew at once
	// with no loss to hedge on (Client.Hold), and a held reply there would
	// fail Hold itself. Only renewals after arming are counted.
	var armed atomic.Bool
	var mu sync.Mutex
	var bodies []string
	px.SetPolicy(func(call *faultproxy.Call) faultproxy.Action {
		if call.Path != "/v1/renew" || !armed.Load() {
			return faultproxy.Action{}
		}
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(call.Body))
		if len(bodies) == 1 {
			return faultproxy.Action{HoldReply: true}
		}
		return faultproxy.Action{}
	})
	c := newClient(t, client.Config{BaseURL: px.URL, Lease: leaseClient(t, "a", nil)})
	ctx := context.Background()
	h, err := c.Hold(ctx, "r", client.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	from := h.Renewals()
	tok := h.Token()
	deadline := time.After(30 * time.Second)
	// Two renewals kept the lease since arming, and the renewal after the
	// held one was sent (one sent before arming may count as the first).
	var sent []string
	for {
		mu.Lock()
		sent = append(sent[:0], bodies...)
		mu.Unlock()
		if h.Renewals() >= from+2 && len(sent) >= 3 {
			break
		}
		select {
		case <-h.Context().Done():
			t.Fatalf("the hold was lost after %d renewals: %v", h.Renewals(), context.Cause(h.Context()))
		case <-deadline:
			t.Fatal("no two renewals in 30 s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if len(sent) < 3 || sent[0] != sent[1] || sent[1] == sent[2] {
		t.Fatalf("renewals sent: %q", sent)
	}
	if st, err := c.Inspect(ctx, "r"); err != nil || !st.Held || st.Fence != tok.Fence || h.Token() != tok {
		t.Fatalf("the coordinator has %+v (%v), the hold %v", st, err, h.Token())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLossBeforeTheDeadlineRealTimers: real timers, TTL 5 s, and a
// coordinator that freezes once the lease is granted. The hold counts its
// lease lost a margin (250 ms) before the holder's deadline, so its
// context ends before the deadline even if the timer fires late by less
// than that: the *LostError found it before the deadline by the holder's
// clock. Do then settles within 2 s of the loss, although AttemptTimeout
// is 30 s: the release the hold sends itself is bounded.
func TestLossBeforeTheDeadlineRealTimers(t *testing.T) {
	t.Parallel()
	px := startProxy(t, serveCoordinator(t, 5*time.Second))
	clk, err := clock.NewMonotonic("a")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, client.Config{BaseURL: px.URL, Lease: leaseClient(t, "a", clk), AttemptTimeout: 30 * time.Second})
	var lostAt time.Time
	var deadline clock.Instant
	// A probe timer set for the moment the loss is due (250 ms, the
	// margin at TTL 5 s, before the deadline) measures how late this
	// process's timers fire: on a machine loaded enough to make the probe
	// late by more than the margin, a loss found after the deadline is
	// the documented limit (Held), not a fault of the hold.
	const margin = 250 * time.Millisecond
	probeLate := make(chan time.Duration, 1)
	start := time.Now()
	err = c.Do(context.Background(), "r", client.HoldOptions{}, func(ctx context.Context, h *client.Held) error {
		deadline = h.Lease().Deadline()
		if now, err := clk.Now(); err == nil {
			due := time.Duration((deadline.Millis-now.Millis)*float64(time.Millisecond)) - margin
			at := time.Now().Add(due)
			time.AfterFunc(due, func() { probeLate <- time.Since(at) })
		}
		freeze(px)
		<-ctx.Done()
		lostAt = time.Now()
		return context.Cause(ctx)
	})
	settled := time.Since(lostAt)
	var lost *client.LostError
	if !errors.As(err, &lost) || !errors.Is(err, client.ErrLeaseLost) || lost.Refused || !lost.Known {
		t.Fatalf("Do: %v", err)
	}
	t.Logf("lost %v after the start, %v before the deadline (%v); Do settled %v after the loss: %v", lostAt.Sub(start), lost.Left, deadline, settled, err)
	if lost.Left <= 0 {
		select {
		case late := <-probeLate:
			if late < margin {
				t.Errorf("the loss was found %v after the holder's deadline, while a timer set for the same moment fired %v late", -lost.Left, late)
			} else {
				t.Logf("the loss was found %v after the deadline: this process's timers fired %v late (more than the margin)", -lost.Left, late)
			}
		default:
			t.Errorf("the loss was found %v after the holder's deadline, before a timer set for when it was due", -lost.Left)
		}
	}
	// The release the hold sent itself got no answer: Do says so.
	if !strings.Contains(err.Error(), "\nclient: release got no answer") && !strings.Contains(err.Error(), "\nclient: the release of a lost hold got no answer within 2s") {
		t.Errorf("Do: %v", err)
	}
	// Bounded to 2 s; the rest is room for a loaded machine (the release
	// would take AttemptTimeout, 30 s, unbounded).
	if settled > 10*time.Second {
		t.Errorf("Do settled %v after the loss", settled)
	}
	var releases int
	for _, call := range px.Calls() {
		if call.Path == "/v1/release" {
			releases++
		}
	}
	if releases < 2 {
		t.Errorf("%d release attempts, want one cut at half the time and another", releases)
	}
}

// TestLossAndReleaseManualClock: the same on the holder's manual clock,
// to the microsecond. TTL 1 s, skew 20 ms: the deadline is 980 ms after
// the acquisition's send, the loss 50 ms (5 % of the TTL) before it; the
// loss's message gives those durations. Once lost, the release the hold
// sends to the frozen coordinator is hedged at half the time left of its
// 2 s, hedged again, and so on (Attempts is 100) until, 2 s after the
// loss, it is given up: Release (as Do) returns then, and not before.
func TestLossAndReleaseManualClock(t *testing.T) {
	px := startProxy(t, serveCoordinator(t, time.Second))
	agent, err := clock.NewManual("agent-a", clock.ManualOptions{Start: 5000})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, client.Config{BaseURL: px.URL, Lease: leaseClient(t, "agent-a", agent), AttemptTimeout: time.Hour,
		Attempts: 100, Backoff: func(int) time.Duration { return 0 }, AfterFunc: agent.AfterFunc})
	ctx := context.Background()
	h, err := c.Hold(ctx, "r", client.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Lease().Deadline(); got.Millis != 5980 {
		t.Fatalf("deadline %v", got)
	}
	freeze(px)
	done := make(chan error, 1)
	go func() {
		<-h.Context().Done()
		done <- h.Release(ctx)
	}()
	// step waits until a new request reached the proxy and is parked
	// there, all parked (or the release returned), then moves the
	// holder's clock to its next timer, which must not be past limit. It
	// reports whether the release returned. Every step after the first
	// sends one request: the hedge of the attempts, or at the loss the
	// release.
	sent := len(px.Calls())
	first := true
	step := func(limit float64) (bool, error) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for !first {
			select {
			case err := <-done:
				return true, err
			default:
			}
			// Two timers: the loss (or the release's bound) and the hedge
			// of the attempts, all parked (they are kept open).
			active, parked := px.InFlight()
			if n := len(px.Calls()); active == parked && active >= 1 && n > sent && agent.Timers() == 2 {
				sent = n
				break
			}
			if wctx.Err() != nil {
				t.Fatalf("at %v: %d requests at the proxy, %d parked, %d timers", agent.Peek(), active, parked, agent.Timers())
			}
			time.Sleep(100 * time.Microsecond)
		}
		first = false
		next, ok := agent.NextTimer()
		if !ok || next.Millis > limit {
			t.Fatalf("at %v the next timer is %v (%v), past %v", agent.Peek(), next, ok, limit)
		}
		return false, agent.Set(next.Millis)
	}
	// The renewals: every attempt held, each hedged at half the time left,
	// until the loss.
	for h.Context().Err() == nil {
		if _, err := step(5930); err != nil {
			t.Fatal(err)
		}
	}
	// At the loss, within the microsecond its timer is set early.
	var lost *client.LostError
	lossAt := agent.Peek()
	if lossAt.Millis > 5930 || lossAt.Millis < 5929.999 || !errors.As(context.Cause(h.Context()), &lost) ||
		!nearDuration(lost.Left, 50*time.Millisecond) || !nearDuration(lost.SinceSent, 930*time.Millisecond) {
		t.Fatalf("lost at %v: %#v", lossAt, context.Cause(h.Context()))
	}
	want := `client: the lease on "r" (fence 1) was lost: no renewal succeeded in time; given up 930 ms after the send of the call that last extended it, 50 ms before the holder's deadline`
	if lost.Error() != want {
		t.Fatalf("message %q, want %q", lost.Error(), want)
	}
	releases := 0
	for {
		returned, err := step(lossAt.Millis + 2000)
		if returned {
			if err != context.Cause(h.Context()) {
				t.Fatalf("Release: %v", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		releases++
	}
	if now := agent.Peek(); now.Millis != lossAt.Millis+2000 || releases < 8 {
		t.Fatalf("the release ended at %v after %d attempts", agent.Peek(), releases)
	}
}

// TestRenewalOutlivesALostReplyManualClock: TestRenewalOutlivesALostReply
// on the holder's manual clock, to the instant. TTL 1 s, skew 20 ms: the
// first renewal is begun a third of the TTL after the acquisition's send,
// with 596.67 ms left before the loss (50 ms before the deadline); its
// first attempt, never answered, gets a hedge half of that later; the
// hedge, the same body, is answered; the lease is kept, its deadline anchored at
// the renewal's first send.
func TestRenewalOutlivesALostReplyManualClock(t *testing.T) {
	px := startProxy(t, serveCoordinator(t, time.Second))
	var renewals atomic.Int32
	px.SetPolicy(func(call *faultproxy.Call) faultproxy.Action {
		if call.Path == "/v1/renew" && renewals.Add(1) == 1 {
			return faultproxy.Action{HoldReply: true}
		}
		return faultproxy.Action{}
	})
	agent, err := clock.NewManual("agent-a", clock.ManualOptions{Start: 5000})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, client.Config{BaseURL: px.URL, Lease: leaseClient(t, "agent-a", agent), AttemptTimeout: time.Hour,
		Backoff: func(int) time.Duration { return 0 }, AfterFunc: agent.AfterFunc})
	ctx := context.Background()
	h, err := c.Hold(ctx, "r", client.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := h.Token()
	renewAt, ok := agent.NextTimer()
	if !ok || !nearMillis(renewAt, 5000+1000.0/3) || !nearMillis(h.Lease().Deadline(), 5980) {
		t.Fatalf("next timer %v, deadline %v", renewAt, h.Lease().Deadline())
	}
	if err := agent.Set(renewAt.Millis); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !px.Wait(wctx, func([]*faultproxy.Call) bool { a, p := px.InFlight(); return renewals.Load() == 1 && a == 1 && p == 1 }) {
		t.Fatal("the first renewal did not reach the proxy")
	}
	hedge, ok := agent.NextTimer()
	if want := renewAt.Millis + (5930-renewAt.Millis)/2; !ok || !nearMillis(hedge, want) {
		t.Fatalf("the attempt's hedge at %v, want %v", hedge, want)
	}
	if err := agent.Set(hedge.Millis); err != nil {
		t.Fatal(err)
	}
	for h.Renewals() != 1 {
		if h.Context().Err() != nil || wctx.Err() != nil {
			t.Fatalf("not renewed: %v", context.Cause(h.Context()))
		}
		time.Sleep(100 * time.Microsecond)
	}
	if bodies := renewBodies(px); len(bodies) != 2 || bodies[0] != bodies[1] {
		t.Fatalf("renewals sent: %q", bodies)
	}
	if !nearMillis(h.Lease().Deadline(), renewAt.Millis+980) || h.Token() != tok || h.Context().Err() != nil {
		t.Fatalf("after the renewal: deadline %v, token %v, %v", h.Lease().Deadline(), h.Token(), context.Cause(h.Context()))
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// slowAcquisition is the rig of the slow-acquisition tests: a coordinator
// with a TTL of 1 s behind a proxy, and a client on the holder's manual
// clock (started at 5000, skew 20 ms, attempts that never time out, no
// backoff) whose acquisition is answered slow ms after its send; a renewal
// gets what renew says (nil: it is answered).
func slowAcquisition(t *testing.T, slow float64, renew func() faultproxy.Action) (*faultproxy.Proxy, *clock.Manual, *client.Client) {
	t.Helper()
	px := startProxy(t, serveCoordinator(t, time.Second))
	agent, err := clock.NewManual("agent-a", clock.ManualOptions{Start: 5000})
	if err != nil {
		t.Fatal(err)
	}
	px.SetPolicy(func(call *faultproxy.Call) faultproxy.Action {
		switch {
		case call.Path == "/v1/acquire":
			return faultproxy.Action{Before: func() { _ = agent.Advance(slow) }}
		case call.Path == "/v1/renew" && renew != nil:
			return renew()
		}
		return faultproxy.Action{}
	})
	c := newClient(t, client.Config{BaseURL: px.URL, Lease: leaseClient(t, "agent-a", agent), AttemptTimeout: time.Hour,
		Backoff: func(int) time.Duration { return 0 }, AfterFunc: agent.AfterFunc})
	return px, agent, c
}

// renewBodies returns the bodies of the renewals the proxy saw, in order.
func renewBodies(px *faultproxy.Proxy) []string {
	var bodies []string
	for _, call := range px.Calls() {
		if call.Path == "/v1/renew" {
			bodies = append(bodies, string(call.Body))
		}
	}
	return bodies
}

// heldOrErr is what a Hold returned.
type heldOrErr struct {
	h   *client.Held
	err error
}

// holdAsync runs c.Hold(ctx, "r", opts) and sends what it returned.
func holdAsync(ctx context.Context, c *client.Client, opts client.HoldOptions) <-chan heldOrErr {
	got := make(chan heldOrErr, 1)
	go func() {
		h, err := c.Hold(ctx, "r", opts)
		got <- heldOrErr{h, err}
	}()
	return got
}

// heldFrom waits for what holdAsync sends, and fails t if Hold did not
// return (after what) before wctx ended, naming the calls the proxy saw,
// or returned an error.
func heldFrom(wctx context.Context, t *testing.T, got <-chan heldOrErr, px *faultproxy.Proxy, agent *clock.Manual, what string) *client.Held {
	t.Helper()
	var r heldOrErr
	select {
	case r = <-got:
	case <-wctx.Done():
		var calls []string
		for _, call := range px.Calls() {
			calls = append(calls, fmt.Sprintf("%s %d", call.Path, call.Status))
		}
		t.Fatalf("Hold did not return after %s: at %v, calls %v", what, agent.Peek(), calls)
	}
	if r.err != nil {
		t.Fatalf("Hold: %v", r.err)
	}
	return r.h
}

// nearMillis says whether got is want, in ms of the holder's clock, to the
// µs.
func nearMillis(got clock.Instant, want float64) bool {
	return got.Millis >= want-0.001 && got.Millis <= want+0.001
}

// nearDuration says whether d is want to the µs.
func nearDuration(d, want time.Duration) bool {
	return d >= want-time.Microsecond && d <= want+time.Microsecond
}

// awaitFirstRenewalParked waits until the first attempt of a slow
// acquisition's first renewal is parked at the proxy, and the holder has
// two timers: the attempt's hedge and the loss.
func awaitFirstRenewalParked(ctx context.Context, t *testing.T, px *faultproxy.Proxy, agent *clock.Manual) {
	t.Helper()
	if !px.Wait(ctx, func(calls []*faultproxy.Call) bool {
		a, p := px.InFlight()
		return len(calls) == 2 && a == 1 && p == 1 && agent.Timers() == 2
	}) {
		t.Fatalf("at %v: %d timers of the holder, want the renewal's hedge and the loss", agent.Peek(), agent.Timers())
	}
}

// pastTheLoss moves the holder's clock past the loss of a slow
// acquisition's lease (5930), its first renewal's first attempt parked at
// the proxy: to 5925, where the first and its hedge (sent at 5665) are
// parked and the last hedge before the loss is set for MinRetry later
// (5935), then to 5935. It checks that Hold, its renewal in flight, has
// not returned, that the hedge firing past the loss sent nothing (the
// inspection is a barrier: a third attempt would be at the proxy before
// it), and that the holder has no timer left: no loss to count again.
func pastTheLoss(ctx context.Context, t *testing.T, c *client.Client, px *faultproxy.Proxy, agent *clock.Manual, got <-chan heldOrErr) {
	t.Helper()
	inFlight := func(want int) func([]*faultproxy.Call) bool {
		return func([]*faultproxy.Call) bool {
			a, p := px.InFlight()
			return a == 2 && p == 2 && agent.Timers() == want
		}
	}
	if err := agent.Set(5925); err != nil {
		t.Fatal(err)
	}
	if !px.Wait(ctx, inFlight(2)) {
		a, p := px.InFlight()
		t.Fatalf("at 5925: %d requests at the proxy, %d parked, %d timers of the holder (want 2, 2, 2)", a, p, agent.Timers())
	}
	if next, ok := agent.NextTimer(); !ok || next.Millis >= 5930 {
		t.Fatalf("at 5925 the next timer at %v, want the loss", next)
	}
	if err := agent.Set(5935); err != nil {
		t.Fatal(err)
	}
	if !px.Wait(ctx, inFlight(0)) {
		a, p := px.InFlight()
		t.Fatalf("past the loss: %d requests at the proxy, %d parked, %d timers of the holder (want 2, 2, 0)", a, p, agent.Timers())
	}
	if _, err := c.Inspect(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if n := len(renewBodies(px)); n != 2 {
		t.Fatalf("past the loss: %d renewal attempts, want the first and its hedge", n)
	}
	select {
	case r := <-got:
		t.Fatalf("Hold returned at the loss, its renewal in flight: %v, %v", r.h, r.err)
	default:
	}
}

// waitingHoldPastTheLoss starts a Hold that waits (30 s) on the rig of
// slowAcquisition, reads its grant at the coordinator once the first
// renewal's first attempt is parked, and moves the holder's clock past the
// grant's loss (pastTheLoss). It returns the test's context (Hold's), one
// that bounds its waits, the grant, and what Hold returns.
func waitingHoldPastTheLoss(t *testing.T, px *faultproxy.Proxy, agent *clock.Manual, c *client.Client) (context.Context, context.Context, client.Status, <-chan heldOrErr) {
	t.Helper()
	ctx := t.Context() // ends a Hold left waiting when the test fails
	got := holdAsync(ctx, c, client.HoldOptions{Wait: 30 * time.Second})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(wcancel)
	awaitFirstRenewalParked(wctx, t, px, agent)
	granted, err := c.Inspect(ctx, "r")
	if err != nil || !granted.Held {
		t.Fatalf("the coordinator has %+v (%v)", granted, err)
	}
	pastTheLoss(wctx, t, c, px, agent, got)
	return ctx, wctx, granted, got
}

// TestFirstRenewalAnsweredPastTheLossIsTaken: as
// TestFirstRenewalAfterASlowAcquisitionIsHedged, but the renewal's
// answers are delayed past the loss of the lease the acquisition made
// (5930): nothing ran under that lease, so Hold awaits the attempts in
// flight and takes the answer (the lease anchored at the renewal's send,
// 5400), not the loss; the grant is not released and its fence is kept.
func TestFirstRenewalAnsweredPastTheLossIsTaken(t *testing.T) {
	answer := make(chan struct{})
	px, agent, c := slowAcquisition(t, 400, func() faultproxy.Action { return faultproxy.Action{Release: answer} })
	ctx, wctx, granted, got := waitingHoldPastTheLoss(t, px, agent, c)
	close(answer)
	h := heldFrom(wctx, t, got, px, agent, "the answers")
	defer h.Release(ctx)
	if h.Token().Fence != granted.Fence || h.Renewals() != 1 || !nearMillis(h.Lease().Anchor(), 5400) || h.Context().Err() != nil {
		t.Fatalf("Hold returned fence %d (granted %d) anchored at %v, %d renewals, %v", h.Token().Fence, granted.Fence, h.Lease().Anchor(), h.Renewals(), context.Cause(h.Context()))
	}
	for _, call := range px.Calls() {
		if call.Path == "/v1/release" || call.Path == "/v1/acquire" && call.N > 1 {
			t.Fatalf("the grant was given up: %s (call %d)", call.Path, call.N)
		}
	}
}

// TestFirstRenewalAfterASlowAcquisitionIsHedged: the first renewal's reply
// is lost after a slow acquisition: the lease is kept. On the holder's
// manual clock, TTL 1 s, skew 20 ms: the acquisition, sent at 5000, is
// answered at 5400, past its first renewal (5333.33), 530 ms before its
// loss (5930, 50 ms before the deadline anchored at its send). Hold renews
// at once, as the hold renews: hedged on that loss, so the renewal's first
// attempt, never answered, gets a hedge at half of the 530 ms (5665), not
// after AttemptTimeout (an hour here); the hedge, the same body, is
// answered, and Hold returns the lease anchored at the renewal's send.
func TestFirstRenewalAfterASlowAcquisitionIsHedged(t *testing.T) {
	var renewals atomic.Int32
	px, agent, c := slowAcquisition(t, 400, func() faultproxy.Action { return faultproxy.Action{HoldReply: renewals.Add(1) == 1} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a Hold left waiting when the test fails
	got := holdAsync(ctx, c, client.HoldOptions{})
	// The renewal's first attempt parked at the proxy, and two timers on
	// the holder's clock: the hedge of the attempt and the loss.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if !px.Wait(wctx, func([]*faultproxy.Call) bool {
		a, p := px.InFlight()
		return renewals.Load() == 1 && a == 1 && p == 1 && agent.Timers() == 2
	}) {
		a, p := px.InFlight()
		t.Fatalf("at %v: %d renewals sent, %d requests at the proxy, %d parked, %d timers of the holder (want the renewal's hedge and the loss)",
			agent.Peek(), renewals.Load(), a, p, agent.Timers())
	}
	hedge, ok := agent.NextTimer()
	if !ok || !nearMillis(hedge, 5400+(5930-5400)/2.0) {
		t.Fatalf("the attempt's hedge at %v, want 5665", hedge)
	}
	if err := agent.Set(hedge.Millis); err != nil {
		t.Fatal(err)
	}
	h := heldFrom(wctx, t, got, px, agent, "the hedge")
	if bodies := renewBodies(px); len(bodies) != 2 || bodies[0] != bodies[1] {
		t.Fatalf("renewals sent: %q", bodies)
	}
	if !nearMillis(h.Lease().Anchor(), 5400) || !nearMillis(h.Lease().Deadline(), 6380) || h.Renewals() != 1 || h.Context().Err() != nil {
		t.Fatalf("Hold returned %v anchored at %v, %d renewals, %v", h.Lease(), h.Lease().Anchor(), h.Renewals(), context.Cause(h.Context()))
	}
	if next, ok := agent.NextTimer(); !ok || !nearMillis(next, 5400+1000.0/3) {
		t.Fatalf("the next renewal at %v, want a third of the TTL after 5400", next)
	}
	if st, err := c.Inspect(ctx, "r"); err != nil || !st.Held || st.Fence != h.Token().Fence {
		t.Fatalf("the coordinator has %+v (%v), the hold %v", st, err, h.Token())
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSlowAcquisitionUnrenewedFailsHold: as
// TestFirstRenewalAfterASlowAcquisitionIsHedged, but no attempt of the
// renewal is answered: past the loss of the lease the acquisition made
// (5930, 930 ms after its send) Hold, which has not returned the lease,
// awaits the attempts in flight (the first and its hedge) with no more
// hedges; when their replies are lost (and those of the attempts sent
// again, at 5935), it fails with a *client.LostError, and the hold releases
// the lease.
func TestSlowAcquisitionUnrenewedFailsHold(t *testing.T) {
	lose := make(chan struct{})
	px, agent, c := slowAcquisition(t, 400, func() faultproxy.Action { return faultproxy.Action{Release: lose, Drop: true} })
	var err error
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a Hold left waiting when the test fails
	got := holdAsync(ctx, c, client.HoldOptions{})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	awaitFirstRenewalParked(wctx, t, px, agent)
	pastTheLoss(wctx, t, c, px, agent, got)
	close(lose)
	select {
	case r := <-got:
		err = r.err
	case <-wctx.Done():
		t.Fatal("Hold did not return after the replies were lost")
	}
	var lost *client.LostError
	if !errors.As(err, &lost) || lost.Refused || !nearDuration(lost.SinceSent, 935*time.Millisecond) || !nearDuration(lost.Left, 45*time.Millisecond) {
		t.Fatalf("Hold: %v", err)
	}
	if !px.Wait(wctx, func(calls []*faultproxy.Call) bool {
		for _, call := range calls {
			if call.Path == "/v1/release" && call.Status == http.StatusOK {
				return true
			}
		}
		return false
	}) {
		t.Fatal("the lease was not released")
	}
	if st, err := c.Inspect(ctx, "r"); err != nil || st.Held {
		t.Fatalf("the coordinator has %+v (%v)", st, err)
	}
}

// TestAcquisitionPastItsLossRenewsOnce: an acquisition answered 950 ms
// after its send at 5000, past its loss (5930): there is no time left to
// hedge on, so Hold renews at once with one plain call and returns the
// lease anchored at that renewal's send (5950), counted in Renewals.
func TestAcquisitionPastItsLossRenewsOnce(t *testing.T) {
	px, agent, c := slowAcquisition(t, 950, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := c.Hold(ctx, "r", client.HoldOptions{})
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	defer h.Release(ctx)
	var renewals int
	for _, call := range px.Calls() {
		if call.Path == "/v1/renew" {
			renewals++
		}
	}
	if renewals != 1 || h.Renewals() != 1 || !nearMillis(h.Lease().Anchor(), 5950) || !nearMillis(h.Lease().Deadline(), 6930) || h.Context().Err() != nil {
		t.Fatalf("%d renewals sent, Renewals %d, the lease %v anchored at %v, %v", renewals, h.Renewals(), h.Lease(), h.Lease().Anchor(), context.Cause(h.Context()))
	}
	if now := agent.Peek(); !nearMillis(now, 5950) {
		t.Fatalf("the holder's clock at %v", now)
	}
}

// TestWaitingHoldLostBeforeItsFirstRenewalWaitsAgain: as
// TestSlowAcquisitionUnrenewedFailsHold, but the Hold waits (Wait
// 30 s): the grant lost at 5930 before any renewal of it was answered (its
// attempts, sent before 6000 by the holder's clock, lose their replies) is
// released, and Hold waits again; the next grant (sent at 5935, answered
// at 6335) is renewed at once, that renewal is answered, and Hold returns
// the lease anchored at its send, with the next fence, not the loss.
func TestWaitingHoldLostBeforeItsFirstRenewalWaitsAgain(t *testing.T) {
	var agent *clock.Manual
	lose := make(chan struct{})
	px, agent, c := slowAcquisition(t, 400, func() faultproxy.Action {
		if agent.Peek().Millis < 6000 {
			return faultproxy.Action{Release: lose, Drop: true}
		}
		return faultproxy.Action{}
	})
	// Past the hedges (parked too), to the loss; then the replies of
	// the attempts in flight are lost.
	ctx, wctx, first, got := waitingHoldPastTheLoss(t, px, agent, c)
	close(lose)
	h := heldFrom(wctx, t, got, px, agent, "the loss")
	defer h.Release(ctx)
	// The lost grant's release, sent as the hold ended (answered 200, or
	// 409 if the coordinator's real-time TTL of 1 s ran out first).
	count := func(calls []*faultproxy.Call, path string) (n int) {
		for _, call := range calls {
			if call.Path == path {
				n++
			}
		}
		return n
	}
	if !px.Wait(wctx, func(calls []*faultproxy.Call) bool { return count(calls, "/v1/release") == 1 }) {
		t.Fatal("the lost grant was not released")
	}
	if n := count(px.Calls(), "/v1/acquire"); n != 2 {
		t.Fatalf("%d acquisitions, want 2", n)
	}
	if h.Token().Fence <= first.Fence || h.Renewals() != 1 || !nearMillis(h.Lease().Anchor(), 6335) || h.Context().Err() != nil {
		t.Fatalf("Hold returned fence %d (the lost grant's %d) anchored at %v, %d renewals, %v", h.Token().Fence, first.Fence, h.Lease().Anchor(), h.Renewals(), context.Cause(h.Context()))
	}
	if st, err := c.Inspect(ctx, "r"); err != nil || !st.Held || st.Fence != h.Token().Fence {
		t.Fatalf("the coordinator has %+v (%v), the hold %v", st, err, h.Token())
	}
}
