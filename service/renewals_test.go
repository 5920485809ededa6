package service

import (
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
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// pathTransport serves requests in-process with h (swappable), records
// their paths, and fails those fail says to.
type pathTransport struct {
	mu    sync.Mutex
	h     http.Handler
	paths []string
	fail  func(path string, n int) error // n: the how-manyth request to path
}

func (tr *pathTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	tr.mu.Lock()
	tr.paths = append(tr.paths, req.URL.Path)
	n := 0
	for _, p := range tr.paths {
		if p == req.URL.Path {
			n++
		}
	}
	h, fail := tr.h, tr.fail
	tr.mu.Unlock()
	if fail != nil {
		if err := fail(req.URL.Path, n); err != nil {
			return nil, err
		}
	}
	rec := httptest.NewRecorder()
	r := req.Clone(req.Context())
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(body))), int64(len(body))
	r.RemoteAddr = "127.0.0.1:40000"
	h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func (tr *pathTransport) count(path string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, p := range tr.paths {
		if p == path {
			n++
		}
	}
	return n
}

// batchClient is a client of holder "a" on agent's clock through tr.
func batchClient(t *testing.T, tr http.RoundTripper, agent *clock.Manual) *client.Client {
	t.Helper()
	return newClient(t, lease.ClientConfig{Clock: agent, HolderID: "a", ClockSkew: 10 * time.Millisecond},
		client.Config{BaseURL: "http://coordinator.test", HTTPClient: &http.Client{Transport: tr}, AttemptTimeout: time.Hour, AfterFunc: agent.AfterFunc})
}

// newBatchRig is a service, and holder "a"'s batchClient through a
// pathTransport, holding leases on r0, r1 and r2.
func newBatchRig(t *testing.T) (*rig, *clock.Manual, *pathTransport, *client.Client, []*client.Lease) {
	r := newRig(t, nil, LocalConfig{})
	agent, _ := clock.NewManual("agent-a", clock.ManualOptions{Start: 50})
	tr := &pathTransport{h: r.h}
	c := batchClient(t, tr, agent)
	var ls []*client.Lease
	for _, res := range []string{"r0", "r1", "r2"} {
		l, err := c.Acquire(context.Background(), res)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	return r, agent, tr, c, ls
}

// onlyCall is a Backend that is not a Renewer (as a Worker's router).
type onlyCall struct{ b httpapi.Backend }

func (o onlyCall) Call(ctx context.Context, m wire.Message) (wire.Reply, error) {
	return o.b.Call(ctx, m)
}

// TestRenewEachAnswersEachOnItsOwn: one call renews three leases; a lease
// revoked and one the coordinator no longer has are refused, each with
// its reason, and the third is renewed, anchored at the batch's send. A
// coordinator without batches (501) gets one call per lease, from then
// on.
func TestRenewEachAnswersEachOnItsOwn(t *testing.T) {
	r, agent, tr, c, ls := newBatchRig(t)
	ctx := context.Background()
	if _, err := r.svc.Call(ctx, wire.Message{Op: wire.OpRevoke, Request: lease.Request{Resource: "r0"}}); err != nil {
		t.Fatal(err)
	}
	st := &r.store.stripes[r.store.stripeOf("r1")]
	st.mu.Lock()
	delete(st.m, "r1")
	st.mu.Unlock()
	r.clk.Advance(200)
	agent.Advance(200)
	sent := agent.Peek()
	out, errs := c.RenewEach(ctx, ls)
	if !errors.Is(errs[0], client.ErrLeaseRevoked) || !errors.Is(errs[0], client.ErrExpired) || out[0] != nil {
		t.Errorf("the revoked lease: %v %v", out[0], errs[0])
	}
	if !errors.Is(errs[1], client.ErrExpired) || errors.Is(errs[1], client.ErrLeaseRevoked) || out[1] != nil {
		t.Errorf("the forgotten lease: %v %v", out[1], errs[1])
	}
	if errs[2] != nil || out[2].Token() != ls[2].Token() || out[2].Anchor() != sent || out[2].Deadline().Millis != sent.Millis+990 {
		t.Errorf("the live lease: %v %v", out[2], errs[2])
	}
	if e, _ := r.store.Entry("r2"); e.ExpiresAt != r.clk.Peek().Millis+1000 {
		t.Errorf("the coordinator has %+v at %v", e, r.clk.Peek())
	}
	if n, m := tr.count(wire.RenewalsPath), tr.count(wire.OpRenew.Path()); n != 1 || m != 0 {
		t.Fatalf("%d batches and %d single renewals sent, want 1 and 0", n, m)
	}

	// A coordinator that does not take batches.
	tr.h = httpapi.NewHandler(onlyCall{r.svc}, httpapi.HandlerOptions{})
	live := out[2]
	for range 2 {
		out, errs = c.RenewEach(ctx, []*client.Lease{live, ls[0]})
		if errs[0] != nil || out[0].Token() != ls[2].Token() || !errors.Is(errs[1], client.ErrLeaseRevoked) {
			t.Fatalf("through single calls: %v %v", out, errs)
		}
		live = out[0]
	}
	if n, m := tr.count(wire.RenewalsPath), tr.count(wire.OpRenew.Path()); n != 2 || m != 4 {
		t.Fatalf("%d batches and %d single renewals sent, want 2 (one refused 501) and 4", n, m)
	}
}

// TestRenewEachFaults: a batch whose reply is lost is sent again (the
// same requests: the renewals are anchored at the first send); a
// coordinator restarting (no connection, then a new Service over the same
// state) answers the batch once it is back; a renewal answered
// "unavailable" alone is sent again alone.
func TestRenewEachFaults(t *testing.T) {
	r, agent, tr, c, ls := newBatchRig(t)
	ctx := context.Background()
	renewed := func(what string, out []*client.Lease, errs []error, sent clock.Instant) {
		t.Helper()
		for i := range ls {
			if errs[i] != nil || out[i].Token() != ls[i].Token() || out[i].Anchor() != sent {
				t.Fatalf("%s: lease %d: %v %v (sent at %v)", what, i, out[i], errs[i], sent)
			}
		}
	}

	// The first reply is lost: the batch is sent again.
	lost := 0
	tr.fail = func(path string, n int) error {
		if path == wire.RenewalsPath && n == 1 {
			lost++
			return errors.New("test: reply lost")
		}
		return nil
	}
	sent := agent.Peek()
	out, errs := c.RenewEach(ctx, ls)
	renewed("after a lost reply", out, errs, sent)
	if lost != 1 || tr.count(wire.RenewalsPath) != 2 {
		t.Fatalf("%d lost, %d sent", lost, tr.count(wire.RenewalsPath))
	}

	// A restart: two attempts find no coordinator, the third a new one
	// over the same state.
	var svc2 *Service
	tr.fail = func(path string, n int) error {
		switch {
		case path != wire.RenewalsPath:
		case n == 3:
			return errors.New("test: connection refused")
		case n == 4:
			store, err := NewLocal(LocalConfig{Clock: r.clk, TTL: ttl, Persist: r.disk})
			if err != nil {
				return err
			}
			if svc2, err = New(Config{TTL: ttl, Store: store, AfterFunc: r.clk.AfterFunc}); err != nil {
				return err
			}
			tr.mu.Lock()
			tr.h = httpapi.NewHandler(svc2, httpapi.HandlerOptions{})
			tr.mu.Unlock()
			return errors.New("test: connection refused")
		}
		return nil
	}
	r.clk.Advance(300)
	agent.Advance(300)
	sent = agent.Peek()
	out, errs = c.RenewEach(ctx, out)
	renewed("across a restart", out, errs, sent)
	if n := tr.count(wire.RenewalsPath); n != 5 || svc2 == nil || svc2.Stats().Renewals != 3 {
		t.Fatalf("%d batches sent, want 5; the new coordinator renewed %+v", n, svc2)
	}

	// One renewal answered unavailable (its store could not write): it
	// alone is sent again, in a batch of its own.
	fl := &flakyRenewer{Service: svc2, fail: "r1"}
	tr.mu.Lock()
	tr.h, tr.fail = httpapi.NewHandler(fl, httpapi.HandlerOptions{}), nil
	tr.mu.Unlock()
	r.clk.Advance(100)
	agent.Advance(100)
	sent = agent.Peek()
	out, errs = c.RenewEach(ctx, out)
	renewed("after one unavailable", out, errs, sent)
	if fmt := fl.sizes(); len(fmt) != 2 || fmt[0] != 3 || fmt[1] != 1 || svc2.Stats().Renewals != 6 {
		t.Fatalf("batches of %v, %d renewals", fmt, svc2.Stats().Renewals)
	}
}

// flakyRenewer answers the first renewal of resource fail "unavailable",
// changing nothing, and records the size of each batch.
type flakyRenewer struct {
	*Service
	fail   string
	mu     sync.Mutex
	failed bool
	batch  []int
}

func (f *flakyRenewer) CallEach(ctx context.Context, ms []wire.Message) ([]wire.Reply, []error) {
	f.mu.Lock()
	f.batch = append(f.batch, len(ms))
	f.mu.Unlock()
	replies, errs := make([]wire.Reply, len(ms)), make([]error, len(ms))
	for i, m := range ms {
		f.mu.Lock()
		fail := m.Request.Resource == f.fail && !f.failed
		f.failed = f.failed || fail
		f.mu.Unlock()
		if fail {
			errs[i] = &wire.Refusal{Reason: wire.RefusedUnavailable, Message: "test: the store is unavailable"}
			continue
		}
		replies[i], errs[i] = f.Service.Call(ctx, m)
	}
	return replies, errs
}

func (f *flakyRenewer) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batch...)
}
