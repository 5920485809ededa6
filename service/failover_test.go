package service

import (
	"bytes"
	"context"
	"errors"
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
	lc, err := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lease, cfg.HTTPClient = lc, &http.Client{Transport: hs}
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 0 }
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
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

func TestClientFailoverConfig(t *testing.T) {
	clk, _ := clock.NewMonotonic("a")
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "a"})
	for _, cfg := range []client.Config{
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

// Without an HTTPClient (the client's own connections per coordinator): a
// coordinator that refuses connections, then one that answers.
func TestClientFailsOverOnItsOwnConnections(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	down := httptest.NewServer(r.h)
	down.Close()
	up := httptest.NewServer(r.h)
	defer up.Close()
	agent, _ := clock.NewManual("agent-a", clock.ManualOptions{Start: 50})
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a"})
	c, err := client.New(client.Config{BaseURLs: []string{down.URL, up.URL}, Lease: lc, Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(context.Background(), "deploy")
	if err != nil || l.Token().Fence != 1 {
		t.Fatalf("acquire: %v %v", l, err)
	}
	if err := c.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
}
