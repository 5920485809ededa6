package wire

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// fault says what the test transport does with one attempt.
type fault int

const (
	deliver     fault = iota
	dropReply         // the server processes the request; the reply is lost
	dropRequest       // the request is lost before the server sees it
	holdReply         // the server processes it; the reply never comes before the attempt times out
	twice             // the request is delivered twice; the client gets the second reply
)

// transport serves requests with a handler in-process and applies a fault
// per attempt, counting what reached the server.
type transport struct {
	h      http.Handler
	mu     sync.Mutex
	plan   []fault
	sent   int
	served int
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
	serve := func() *http.Response {
		rec := httptest.NewRecorder()
		r := req.Clone(req.Context())
		r.Body, _ = req.GetBody()
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

type clientRig struct {
	*rig
	tr     *transport
	agent  *clock.Manual
	client *Client
}

func newClientRig(t *testing.T, holder string, plan ...fault) *clientRig {
	t.Helper()
	r := newRig(t, nil)
	return r.client(t, holder, plan...)
}

func (r *rig) client(t *testing.T, holder string, plan ...fault) *clientRig {
	t.Helper()
	agent, _ := clock.NewManual("agent-"+holder, clock.ManualOptions{Start: 50})
	lc, err := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: holder, ClockSkew: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr := &transport{h: r.h, plan: plan}
	c, err := NewClient(ClientConfig{
		BaseURL:        "http://coordinator.test/",
		Lease:          lc,
		HTTPClient:     &http.Client{Transport: tr},
		AttemptTimeout: 20 * time.Millisecond, // only the holdReply attempts wait for it
		Backoff:        func(int) time.Duration { return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
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
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, l); strings.Contains(out, l.secret) || !strings.Contains(out, "deploy") {
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
	if err := c.client.Release(ctx, l2); !errors.Is(err, ErrExpired) {
		t.Fatalf("second release: %v", err)
	}
	if _, err := c.client.Renew(ctx, l2); !errors.Is(err, ErrExpired) {
		t.Fatalf("renew after release: %v", err)
	}
	l3, err := c.client.Acquire(ctx, "deploy")
	if err != nil || l3.Token().Fence != 2 {
		t.Fatalf("reacquire: %v %v", l3, err)
	}
}

func isDenied(err error, holder string) bool {
	var d *DeniedError
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
			st := c.state()
			if st.Snap.IssuedFence != 1 || l.Token().Fence != 1 || len(st.Stored.Records) != 1 ||
				st.Stored.Records[0].SecretHash != sha256.Sum256([]byte(l.secret)) {
				t.Fatalf("issued %d, lease fence %d, stored %+v", st.Snap.IssuedFence, l.Token().Fence, st.Stored)
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
	if st := c.state(); len(st.Stored.Records) != 0 || len(st.Snap.Leases) != 0 {
		t.Fatalf("still held: %+v", st)
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
	forged := &Lease{Lease: l.Lease, secret: "forged-forged-forged"}
	sent := c2.tr.sent
	var we *Error
	if _, err := c2.client.Renew(context.Background(), forged); !errors.As(err, &we) || we.Code != CodeWrongSecret {
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

// TestSecondClientCannotActForTheHolder: another client with the same
// holder id and the holder's token, but not its secret, is refused.
func TestSecondClientCannotActForTheHolder(t *testing.T) {
	c := newClientRig(t, "a")
	ctx := context.Background()
	l, err := c.client.Acquire(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	impostor := c.rig.client(t, "a")
	// The impostor builds a lease with the same token from its own grant
	// for another resource... it has no way to learn the secret.
	other, err := impostor.client.Acquire(ctx, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	fake := &Lease{Lease: l.Lease, secret: other.secret}
	if _, err := impostor.client.Renew(ctx, fake); err == nil {
		t.Fatal("impostor renewed")
	}
	if err := impostor.client.Release(ctx, fake); err == nil {
		t.Fatal("impostor released")
	}
	if _, err := c.client.Renew(ctx, l); err != nil {
		t.Fatalf("the holder lost its lease: %v", err)
	}
}

func TestNewClientChecksConfig(t *testing.T) {
	agent, _ := clock.NewManual("a", clock.ManualOptions{})
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a"})
	if _, err := NewClient(ClientConfig{Lease: lc}); err == nil {
		t.Fatal("no URL accepted")
	}
	if _, err := NewClient(ClientConfig{BaseURL: "http://x"}); err == nil {
		t.Fatal("no lease client accepted")
	}
}

// TestClientBadURLIsFinal: a BaseURL no request can be built from fails the
// call at the first attempt instead of being retried.
func TestClientBadURLIsFinal(t *testing.T) {
	agent, _ := clock.NewManual("a", clock.ManualOptions{})
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a"})
	tr := &transport{h: http.NotFoundHandler()}
	c, err := NewClient(ClientConfig{BaseURL: "http://bad host", Lease: lc, HTTPClient: &http.Client{Transport: tr},
		Backoff: func(int) time.Duration { t.Fatal("retried"); return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(context.Background(), "deploy"); err == nil || tr.sent != 0 {
		t.Fatalf("bad URL: %v after %d sends", err, tr.sent)
	}
}

// TestClientDrawsASecretPerAcquisition: every acquisition gets a fresh
// random secret, and only its hash reaches the store.
func TestClientDrawsASecretPerAcquisition(t *testing.T) {
	c := newClientRig(t, "a")
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 20 {
		l, err := c.client.Acquire(ctx, fmt.Sprintf("r%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if len(l.secret) < MinSecretBytes || seen[l.secret] {
			t.Fatalf("secret %d: %d bytes, seen before: %v", i, len(l.secret), seen[l.secret])
		}
		seen[l.secret] = true
		if strings.Contains(fmt.Sprint(l)+fmt.Sprintf("%#v", l), l.secret) {
			t.Fatal("the lease prints its secret")
		}
		rec, ok, _ := c.svc.store.Get(ctx, fmt.Sprintf("r%d", i))
		if !ok || rec.SecretHash != sha256.Sum256([]byte(l.secret)) {
			t.Fatalf("stored %+v", rec)
		}
	}
}
