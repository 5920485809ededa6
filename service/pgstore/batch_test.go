//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"encoding/json"
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
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// postRenewals sends ms as one batch to replica i and returns its results.
func (g *rig) postRenewals(i int, ms []wire.Message) []wire.Result {
	g.t.Helper()
	body, err := wire.EncodeRenewals(ms)
	if err != nil {
		g.t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, wire.RenewalsPath, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	g.r[i].h.ServeHTTP(rec, req)
	var out wire.RenewalsReply
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 || len(out.Results) != len(ms) {
		g.t.Fatalf("the batch: %d %s (%v)", rec.Code, rec.Body.String(), err)
	}
	return out.Results
}

// expiry reads the stored expiry of resource.
func (g *rig) expiry(resource string) float64 {
	g.t.Helper()
	var e float64
	pgtest.QueryRow(g.t, g.dsn, `SELECT expires_at FROM lease_fence_leases WHERE resource = '`+resource+`'`, &e)
	return e
}

// TestRenewalsInOneCall: a batch of renewals on rows the replica knows is
// decided in one call of lease_fence_decide_each, each on its own: a
// renewal with the wrong secret and one of a lease that is over are
// refused (and change nothing), the others renewed; a renewal of a row
// another replica changed since (its own renewal) is decided again on the
// row read afresh and renewed; a resource named twice is decided twice.
func TestRenewalsInOneCall(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	res := []string{"a", "b", "c", "d", "e"}
	fences := map[string]uint64{}
	for _, r := range res {
		fences[r], _ = g.grant(0, acquireMsg("acq-"+r, r, "A"))
	}
	// Another replica renews e: replica 0's row of it is stale.
	g.grant(1, renewMsg("other-e", "e", "A", fences["e"]))
	before := map[string]float64{}
	for _, r := range res {
		before[r] = g.expiry(r)
	}
	g.step(1000) // the renewals move every expiry they renew
	wrongSecret := renewMsg("ren-b", "b", "A", fences["b"])
	wrongSecret.Secret = secretOf("someone-else")
	ms := []wire.Message{
		renewMsg("ren-a", "a", "A", fences["a"]),
		wrongSecret,
		renewMsg("ren-c", "c", "B", fences["c"]), // not its lease
		renewMsg("ren-d", "d", "A", fences["d"]),
		renewMsg("ren-e", "e", "A", fences["e"]),
		renewMsg("ren-a2", "a", "A", fences["a"]),
	}
	_, _, lockedBefore := pgstore.Paths(g.r[0].store)
	got := g.postRenewals(0, ms)
	for _, i := range []int{0, 3, 4, 5} {
		if !got[i].OK || got[i].Grant == nil || got[i].Grant.Fence != ms[i].Request.Fence {
			t.Fatalf("renewal %d (%s): %+v", i, ms[i].Request.Resource, got[i])
		}
	}
	if e := got[1].Err(); e == nil || e.Code != "wrong_secret" {
		t.Fatalf("the renewal with the wrong secret: %+v", got[1])
	}
	if got[2].OK || got[2].Reason != string(lease.Expired) {
		t.Fatalf("the renewal of a lease that is over: %+v", got[2])
	}
	for _, r := range []string{"a", "d", "e"} {
		if e := g.expiry(r); e < before[r]+1000 {
			t.Fatalf("%s: expiry %v, was %v: not renewed", r, e, before[r])
		}
	}
	for _, r := range []string{"b", "c"} {
		if e := g.expiry(r); e != before[r] {
			t.Fatalf("%s: expiry %v, was %v: a refused renewal changed it", r, e, before[r])
		}
	}
	// a, b, c, d in one call; e found stale there, then decided by the
	// transaction that locks its row; a's second renewal on its own.
	_, _, locked := pgstore.Paths(g.r[0].store)
	if n := pgstore.Batched(g.r[0].store); n != 4 || locked-lockedBefore != 1 {
		t.Fatalf("%d decisions in the batch's call, %d locking the row", n, locked-lockedBefore)
	}
	// e is known again: the next batch decides all of them in one call.
	g.postRenewals(0, []wire.Message{renewMsg("ren-a3", "a", "A", fences["a"]), renewMsg("ren-e2", "e", "A", fences["e"])})
	if n := pgstore.Batched(g.r[0].store); n != 6 {
		t.Fatalf("%d decisions in the batches' calls, want 6", n)
	}
}

// lossyTransport serves requests in-process with the handler of replica
// *at and loses the reply of the requests lose says to.
type lossyTransport struct {
	mu   sync.Mutex
	g    *rig
	at   int
	n    int
	lose func(n int) bool
}

func (tr *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	tr.mu.Lock()
	tr.n++
	n, h, lose := tr.n, tr.g.r[tr.at].h, tr.lose
	tr.mu.Unlock()
	rec := httptest.NewRecorder()
	r := req.Clone(req.Context())
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(body))), int64(len(body))
	r.RemoteAddr = "127.0.0.1:40000"
	h.ServeHTTP(rec, r)
	if lose != nil && lose(n) {
		return nil, errors.New("test: reply lost")
	}
	return rec.Result(), nil
}

// TestRenewalsInOneCallFaults: a batch whose reply is lost after the
// database committed it is sent again and renewed again; a coordinator
// that restarts (a new store over the same database: it knows no row)
// decides the batch by the transactions that lock each row, and its next
// batch in one call.
func TestRenewalsInOneCallFaults(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	agent, _ := clock.NewManual("agent-a", clock.ManualOptions{Start: 50})
	lc, err := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "a", ClockSkew: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr := &lossyTransport{g: g}
	c, err := client.New(client.Config{BaseURL: "http://coordinator.test", Lease: lc, HTTPClient: &http.Client{Transport: tr},
		AttemptTimeout: time.Hour, Backoff: func(int) time.Duration { return 0 }, AfterFunc: agent.AfterFunc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ls []*client.Lease
	for _, res := range []string{"r0", "r1", "r2"} {
		l, err := c.Acquire(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	renewed := func(what string, out []*client.Lease, errs []error, sent clock.Instant) {
		t.Helper()
		for i := range ls {
			if errs[i] != nil || out[i].Token() != ls[i].Token() || out[i].Anchor() != sent {
				t.Fatalf("%s: lease %d: %v %v (sent at %v)", what, i, out[i], errs[i], sent)
			}
		}
	}
	tr.mu.Lock()
	first := tr.n + 1
	tr.lose = func(n int) bool { return n == first }
	tr.mu.Unlock()
	sent := agent.Peek()
	out, errs := c.RenewEach(ctx, ls)
	renewed("after a lost reply", out, errs, sent)
	if n := pgstore.Batched(g.r[0].store); n != 6 {
		t.Fatalf("%d decisions in the batches' calls, want 6 (the batch twice)", n)
	}

	// The restart: a new store and service over the same database.
	g.r[0].store.Close()
	g.r[0] = g.open(pgstore.Options{}, false)
	agent.Advance(300)
	sent = agent.Peek()
	out, errs = c.RenewEach(ctx, out)
	renewed("after a restart", out, errs, sent)
	if _, _, locked := pgstore.Paths(g.r[0].store); locked != 3 || pgstore.Batched(g.r[0].store) != 0 {
		t.Fatalf("after the restart: %d locking the row, %d in a batch's call", locked, pgstore.Batched(g.r[0].store))
	}
	agent.Advance(300)
	sent = agent.Peek()
	out, errs = c.RenewEach(ctx, out)
	renewed("the next batch", out, errs, sent)
	if n := pgstore.Batched(g.r[0].store); n != 3 {
		t.Fatalf("the next batch: %d in the batch's call, want 3", n)
	}
	if got := g.r[0].svc.Stats().Renewals; got != 6 {
		t.Fatalf("the new coordinator renewed %d, want 6", got)
	}
}
