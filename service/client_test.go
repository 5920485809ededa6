package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
)

// The tests of client.Client, against the real service.

// fault says what the test transport does with one attempt.
type fault int

const (
	deliver     fault = iota
	dropReply         // the server processes the request; the reply is lost
	dropRequest       // the request is lost before the server sees it
	holdReply         // the server processes it; the reply never comes before the attempt times out
	twice             // the request is delivered twice; the client gets the second reply
	forge             // the secret is replaced by another one on the way
)

// transport serves requests with a handler in-process and applies a fault
// per attempt, counting what reached the server and keeping the last
// secret each resource's requests carried.
type transport struct {
	h       http.Handler
	mu      sync.Mutex
	plan    []fault
	sent    int
	served  int
	secrets map[string]string
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr.mu.Lock()
	f := deliver
	if tr.sent < len(tr.plan) {
		f = tr.plan[tr.sent]
	}
	tr.sent++
	tr.mu.Unlock()
	if f == dropRequest {
		return nil, errors.New("test: request lost")
	}
	body, _ := io.ReadAll(req.Body)
	m, err := wire.DecodeMessage(wire.Op(strings.TrimPrefix(req.URL.Path, "/v1/")), body)
	if err == nil {
		tr.mu.Lock()
		if tr.secrets == nil {
			tr.secrets = map[string]string{}
		}
		tr.secrets[m.Request.Resource] = m.Secret
		tr.mu.Unlock()
		if f == forge {
			m.Secret = "forged-forged-forged"
			body, _ = wire.EncodeMessage(m)
		}
	}
	serve := func() *http.Response {
		rec := httptest.NewRecorder()
		r := req.Clone(req.Context())
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(body))), int64(len(body))
		tr.h.ServeHTTP(rec, r)
		tr.mu.Lock()
		tr.served++
		tr.mu.Unlock()
		return rec.Result()
	}
	resp := serve()
	switch f {
	case dropReply:
		return nil, errors.New("test: reply lost")
	case holdReply:
		<-req.Context().Done() // the attempt's own timeout ends the wait
		return nil, req.Context().Err()
	case twice:
		resp = serve()
	}
	return resp, nil
}

// then plans faults for the next attempts.
func (tr *transport) then(faults ...fault) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.plan = append(make([]fault, tr.sent), faults...)
}

func (tr *transport) secret(resource string) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.secrets[resource]
}

type clientRig struct {
	*rig
	tr     *transport
	agent  *clock.Manual
	client *client.Client
}

func newClientRig(t *testing.T, holder string, plan ...fault) *clientRig {
	t.Helper()
	return newRig(t, nil, LocalConfig{}).client(t, holder, plan...)
}

func (r *rig) client(t *testing.T, holder string, plan ...fault) *clientRig {
	t.Helper()
	agent, _ := clock.NewManual("agent-"+holder, clock.ManualOptions{Start: 50})
	tr := &transport{h: r.h, plan: plan}
	c := newClient(t, lease.ClientConfig{Clock: agent, HolderID: holder, ClockSkew: 10 * time.Millisecond}, client.Config{
		BaseURL:        "http://coordinator.test/",
		HTTPClient:     &http.Client{Transport: tr},
		AttemptTimeout: 20 * time.Millisecond, // only the holdReply attempts wait for it
	})
	return &clientRig{rig: r, tr: tr, agent: agent, client: c}
}

func TestClientRoundTrip(t *testing.T) {
	c := newClientRig(t, "a")
	ctx := context.Background()
	l, err := c.client.Acquire(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	// The deadline is anchored at the send instant (50), not at any reply.
	if tok := l.Token(); tok.Fence != 1 || tok.HolderID != "a" || l.Deadline() != clock.At("agent-a", 50+1000-10) {
		t.Fatalf("lease %v deadline %v", tok, l.Deadline())
	}
	secret := c.tr.secret("deploy")
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, l); strings.Contains(out, secret) || !strings.Contains(out, "deploy") {
			t.Fatalf("%s prints %q", format, out)
		}
	}
	if _, err := c.client.Acquire(ctx, "deploy"); !isDenied(err, "a") {
		t.Fatalf("second acquire by the holder: %v", err)
	}
	c.agent.Set(300)
	c.clk.Advance(200)
	l2, err := c.client.Renew(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() != l.Token() || l2.Deadline().Millis != 300+1000-10 {
		t.Fatalf("renewed to %v %v", l2.Token(), l2.Deadline())
	}
	if err := c.client.Release(ctx, l2); err != nil {
		t.Fatal(err)
	}
	if err := c.client.Release(ctx, l2); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("second release: %v", err)
	}
	if _, err := c.client.Renew(ctx, l2); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("renew after release: %v", err)
	}
	l3, err := c.client.Acquire(ctx, "deploy")
	if err != nil || l3.Token().Fence != 2 {
		t.Fatalf("reacquire: %v %v", l3, err)
	}
}

func isDenied(err error, holder string) bool {
	var d *client.DeniedError
	return errors.As(err, &d) && d.HeldBy == holder && d.RetryAfter > 0
}

// TestClientRetriesWithTheSameRequest: whatever happens to the first
// attempts, the acquisition ends with exactly one fence issued, and the
// lease is anchored at the first send.
func TestClientRetriesWithTheSameRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plan   []fault
		served int
	}{
		{"reply dropped", []fault{dropReply}, 2},
		{"two replies dropped", []fault{dropReply, dropReply}, 3},
		{"request dropped", []fault{dropRequest}, 1},
		{"reply delayed past the timeout", []fault{holdReply}, 2},
		{"request delivered twice", []fault{twice}, 2},
		{"everything at once", []fault{dropRequest, holdReply, dropReply}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClientRig(t, "a", tc.plan...)
			l, err := c.client.Acquire(context.Background(), "deploy")
			if err != nil {
				t.Fatal(err)
			}
			if c.tr.served != tc.served {
				t.Fatalf("server saw %d requests, want %d", c.tr.served, tc.served)
			}
			e, _ := c.entry("deploy")
			if c.store.Issued() != 1 || l.Token().Fence != 1 || e.SecretHash != sha256.Sum256([]byte(c.tr.secret("deploy"))) {
				t.Fatalf("issued %d, lease fence %d, stored %+v", c.store.Issued(), l.Token().Fence, e)
			}
			if l.Deadline().Millis != 50+1000-10 {
				t.Fatalf("deadline %v is not anchored at the first send", l.Deadline())
			}
			// The lease works: the holder renews it with its secret.
			if _, err := c.client.Renew(context.Background(), l); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestClientRetriesRenewAndRelease(t *testing.T) {
	c := newClientRig(t, "a")
	ctx := context.Background()
	l, err := c.client.Acquire(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	c.tr.then(dropReply, holdReply)
	c.agent.Set(100)
	l2, err := c.client.Renew(ctx, l)
	if err != nil || l2.Token() != l.Token() || l2.Deadline().Millis != 100+1000-10 {
		t.Fatalf("renew through lost replies: %v %v", l2, err)
	}
	c.tr.then(dropReply)
	if err := c.client.Release(ctx, l2); err != nil {
		t.Fatalf("release whose first reply was lost: %v", err)
	}
	if e, _ := c.entry("deploy"); e.Fence != 0 || c.store.Leases() != 0 {
		t.Fatalf("still held: %+v", e)
	}
}

func TestClientGivesUp(t *testing.T) {
	c := newClientRig(t, "a", dropRequest, dropRequest, dropRequest, dropRequest, dropRequest)
	_, err := c.client.Acquire(context.Background(), "deploy")
	if err == nil || c.tr.sent != 4 || c.tr.served != 0 {
		t.Fatalf("err %v after %d attempts", err, c.tr.sent)
	}
	// A refusal is final: no retry.
	c2 := newClientRig(t, "a")
	l, _ := c2.client.Acquire(context.Background(), "deploy")
	c2.tr.then(forge)
	sent := c2.tr.sent
	var we *wire.Error
	if _, err := c2.client.Renew(context.Background(), l); !errors.As(err, &we) || we.Code != wire.CodeWrongSecret {
		t.Fatalf("forged renew: %v", err)
	}
	if c2.tr.sent != sent+1 {
		t.Fatalf("a refusal was retried: %d attempts", c2.tr.sent-sent)
	}
	// A cancelled context stops at once.
	c3 := newClientRig(t, "a", dropReply, dropReply)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c3.client.Acquire(ctx, "deploy"); !errors.Is(err, context.Canceled) || c3.tr.served != 0 {
		t.Fatalf("cancelled: %v, served %d", err, c3.tr.served)
	}
}

// TestSecondClientCannotActForTheHolder: a call with the holder id and the
// holder's token but another secret is refused, and the holder keeps its
// lease.
func TestSecondClientCannotActForTheHolder(t *testing.T) {
	c := newClientRig(t, "a")
	ctx := context.Background()
	l, err := c.client.Acquire(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	c.tr.then(forge, forge)
	if _, err := c.client.Renew(ctx, l); err == nil {
		t.Fatal("a forged renewal renewed")
	}
	if err := c.client.Release(ctx, l); err == nil {
		t.Fatal("a forged release released")
	}
	if _, err := c.client.Renew(ctx, l); err != nil {
		t.Fatalf("the holder lost its lease: %v", err)
	}
}

// TestClientNewChecksConfig: a config without a URL or a lease client, or
// with both BaseURL and BaseURLs, an empty URL, or too many or no URLs in
// BaseURLs, is refused.
func TestClientNewChecksConfig(t *testing.T) {
	agent, _ := clock.NewManual("a", clock.ManualOptions{})
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a"})
	for _, cfg := range []client.Config{
		{Lease: lc},
		{BaseURL: "http://x"},
		{BaseURL: "http://a", BaseURLs: []string{"http://b"}, Lease: lc},
		{BaseURLs: []string{"http://a", ""}, Lease: lc},
		{BaseURLs: make([]string, 65), Lease: lc},
		{BaseURLs: []string{}, Lease: lc},
	} {
		if _, err := client.New(cfg); err == nil {
			t.Fatalf("%+v accepted", cfg)
		}
	}
}

// TestClientBadURLIsRefused: a BaseURL no request can be built from is
// refused by NewClient, with an HTTPClient too.
func TestClientBadURLIsRefused(t *testing.T) {
	agent, _ := clock.NewManual("a", clock.ManualOptions{})
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a"})
	tr := &transport{h: http.NotFoundHandler()}
	_, err := client.New(client.Config{BaseURL: "http://bad host", Lease: lc, HTTPClient: &http.Client{Transport: tr}})
	if err == nil || !strings.Contains(err.Error(), `"http://bad host" is not a URL`) {
		t.Fatalf("bad URL: %v", err)
	}
}

// TestClientDrawsASecretPerAcquisition: every acquisition gets a fresh
// random secret, and only its hash reaches the store.
func TestClientDrawsASecretPerAcquisition(t *testing.T) {
	c := newClientRig(t, "a")
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 20 {
		res := fmt.Sprintf("r%d", i)
		l, err := c.client.Acquire(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		secret := c.tr.secret(res)
		if len(secret) < wire.MinSecretBytes || seen[secret] {
			t.Fatalf("secret %d: %d bytes, seen before: %v", i, len(secret), seen[secret])
		}
		seen[secret] = true
		if strings.Contains(fmt.Sprint(l)+fmt.Sprintf("%#v", l), secret) {
			t.Fatal("the lease prints its secret")
		}
		if e, ok := c.entry(res); !ok || e.SecretHash != sha256.Sum256([]byte(secret)) {
			t.Fatalf("stored %+v", e)
		}
		for k, v := range c.disk.contents() {
			if strings.Contains(k+v, secret) {
				t.Fatal("a secret is stored")
			}
		}
	}
}

// The failover of a client over several coordinators (Config.BaseURLs).

// hosts is a transport to several coordinators by host name, each doing
// what its entry says with the attempts it gets: "down" (no connection),
// "503" (answers unavailable), "lost" (serves, the reply is lost), "500",
// "400", or "up" (serves). It records the host and body of every attempt.
type hosts struct {
	h     http.Handler
	mu    sync.Mutex
	state map[string]string
	tried []string
	body  [][]byte
}

func (hs *hosts) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	hs.mu.Lock()
	st := hs.state[req.URL.Host]
	hs.tried = append(hs.tried, req.URL.Host)
	hs.body = append(hs.body, body)
	hs.mu.Unlock()
	answer := func(status int, code string) (*http.Response, error) {
		rec := httptest.NewRecorder()
		rec.WriteHeader(status)
		rec.WriteString(`{"error":{"code":"` + code + `","message":"test"}}`)
		return rec.Result(), nil
	}
	switch st {
	case "down":
		return nil, errors.New("test: connection refused")
	case "503":
		return answer(503, "unavailable")
	case "500":
		return answer(500, "internal")
	case "400":
		return answer(400, "invalid_value")
	}
	rec := httptest.NewRecorder()
	r := req.Clone(req.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	hs.h.ServeHTTP(rec, r)
	if st == "lost" {
		return nil, errors.New("test: reply lost")
	}
	return rec.Result(), nil
}

func (hs *hosts) set(host, state string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.state[host] = state
}

func (hs *hosts) attempts() []string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := hs.tried
	hs.tried, hs.body = nil, nil
	return out
}

func failoverClient(t *testing.T, r *rig, hs *hosts, cfg client.Config) *client.Client {
	t.Helper()
	agent, _ := clock.NewManual("agent-a", clock.ManualOptions{Start: 50})
	cfg.HTTPClient = &http.Client{Transport: hs}
	return newClient(t, lease.ClientConfig{Clock: agent, HolderID: "a"}, cfg)
}

// A client with three coordinators moves to the next on no connection, a
// 503 or a lost reply, sends the same body to each (request id and secret
// included), so the acquisition gets one fence, and starts its next call
// where the last answer came from.
func TestClientFailsOverToTheNextCoordinator(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	hs := &hosts{h: r.h, state: map[string]string{"a": "down", "b": "503", "c": "lost", "d": "up"}}
	c := failoverClient(t, r, hs, client.Config{BaseURLs: []string{"http://a", "http://b/", "http://c", "http://d"}})
	l, err := c.Acquire(context.Background(), "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(hs.tried, " "); got != "a b c d" {
		t.Fatalf("attempts went to %s", got)
	}
	for _, b := range hs.body[1:] {
		if !bytes.Equal(b, hs.body[0]) {
			t.Fatalf("a retry sent another body:\n%s\n%s", hs.body[0], b)
		}
	}
	if l.Token().Fence != 1 || r.store.Issued() != 1 {
		t.Fatalf("fence %d, issued %d: the lost reply's grant was not the one answered", l.Token().Fence, r.store.Issued())
	}
	if l.Deadline().Millis != 50+1000 {
		t.Fatalf("deadline %v is not anchored at the first send", l.Deadline())
	}
	hs.attempts()
	if _, err := c.Renew(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(hs.attempts(), " "); got != "d" {
		t.Fatalf("the next call went to %s, not to the one that answered", got)
	}
	// d goes down: the call wraps around to a, which is back.
	hs.set("d", "down")
	hs.set("a", "up")
	if err := c.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(hs.attempts(), " "); got != "d a" {
		t.Fatalf("attempts went to %s", got)
	}
}

// A 4xx is an answer: the client does not ask the next coordinator. A
// 500 moves on like any 5xx. Every coordinator failing ends the call after
// Attempts, which defaults to one more than the coordinators, and only a
// return to a coordinator already tried waits for the backoff.
func TestClientFailoverLimits(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	hs := &hosts{h: r.h, state: map[string]string{"a": "400", "b": "up"}}
	c := failoverClient(t, r, hs, client.Config{BaseURLs: []string{"http://a", "http://b"}})
	var we *wire.Error
	if _, err := c.Acquire(context.Background(), "deploy"); !errors.As(err, &we) || we.Code != "invalid_value" {
		t.Fatalf("a 400: %v", err)
	}
	if got := strings.Join(hs.attempts(), " "); got != "a" {
		t.Fatalf("a 400 was retried: %s", got)
	}
	hs.set("a", "500")
	if _, err := c.Acquire(context.Background(), "deploy"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(hs.attempts(), " "); got != "a b" {
		t.Fatalf("a 500: %s", got)
	}
	hs.set("a", "down")
	hs.set("b", "down")
	var pauses []int
	c = failoverClient(t, r, hs, client.Config{BaseURLs: []string{"http://a", "http://b", "http://a"},
		Backoff: func(n int) time.Duration { pauses = append(pauses, n); return 0 }})
	if _, err := c.Acquire(context.Background(), "other"); err == nil || !strings.Contains(err.Error(), "after 4 attempts") {
		t.Fatalf("every coordinator down: %v", err)
	}
	if got := strings.Join(hs.attempts(), " "); got != "a b a a" {
		t.Fatalf("attempts: %s", got)
	}
	if len(pauses) != 1 || pauses[0] != 2 {
		t.Fatalf("backoff asked for %v, want one pause, the first retry's", pauses)
	}
}

// Without an HTTPClient (the client's own connections per coordinator): a
// coordinator that refuses connections, then one that answers.
func TestClientFailsOverOnItsOwnConnections(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	down := httptest.NewServer(r.h)
	down.Close()
	up := httptest.NewServer(r.h)
	defer up.Close()
	agent, _ := clock.NewManual("agent-a", clock.ManualOptions{Start: 50})
	c := newClient(t, lease.ClientConfig{Clock: agent, HolderID: "a"}, client.Config{BaseURLs: []string{down.URL, up.URL}})
	l, err := c.Acquire(context.Background(), "deploy")
	if err != nil || l.Token().Fence != 1 {
		t.Fatalf("acquire: %v %v", l, err)
	}
	if err := c.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
}
