//go:build !js && !wasip1

package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/sim"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/test/rig/wirehist"
)

// timeline is the clock the replicas read: the database server's clock
// plus an offset the clients push forward (so leases expire without the
// test waiting). Attempts hold it shared from before they are sent until
// their answer is recorded, and a push holds it alone, so every reading a
// replica takes lies between the bounds recorded around its attempt.
type timeline struct {
	mu     sync.RWMutex
	offset float64
	g      *rig
}

// peek is a bound of the replicas' readings: the same wall clock the
// database server reads (the test runs on its machine), in whole
// milliseconds, plus the offset.
func (tl *timeline) peek() float64 { return float64(time.Now().UnixMilli()) + tl.offset }

func (tl *timeline) push(ms float64) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.offset += ms
	tl.g.step(tl.offset)
}

// recorder is one client's transport: every attempt is an operation of the
// history, and one reply in five is lost, so the client sends the same
// body to the next replica.
type recorder struct {
	t      *testing.T
	h      *sim.History
	tl     *timeline
	client int
	rng    *rand.Rand
	next   http.RoundTripper
}

func (rt *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	ms, err := wirehist.ReadRequests(r)
	if err != nil {
		rt.t.Errorf("the client sent a body the server cannot decode: %v", err)
		return nil, err
	}
	rt.tl.mu.RLock()
	ps := make([]*sim.Pending, len(ms)) // a batch's renewals: one operation each
	for i, m := range ms {
		ps[i] = rt.h.Begin(rt.client, wirehist.InputOf(m))
	}
	resp, err := rt.next.RoundTrip(r)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		rt.tl.mu.RUnlock()
		rt.t.Errorf("attempt failed on 127.0.0.1: %v", err)
		return nil, err
	}
	for i, out := range wirehist.OutputsOf(r.URL.Path, len(ms), resp.StatusCode, data) {
		ps[i].End(out)
	}
	rt.tl.mu.RUnlock()
	if rt.rng.IntN(5) == 0 {
		return nil, errors.New("test: reply lost")
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// serve serves replica i on 127.0.0.1.
func (g *rig) serve(i int) string {
	g.t.Helper()
	srv := httptest.NewUnstartedServer(g.r[i].h)
	srv.Listener.Close()
	var err error
	if srv.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		g.t.Fatal(err)
	}
	srv.Start()
	g.t.Cleanup(srv.Close)
	return srv.URL
}

// Histories of six wire clients over three replicas, every client with
// all three URLs (starting at a different one) and one reply in five lost,
// half of them holding several leases at once and renewing them in
// batches (each renewal of a batch one operation of the history),
// checked linearizable by porcupine against the lease-register model: a
// retried call answered by another replica than the first attempt's is
// answered from the database as if by one coordinator.
func TestLinearizableAcrossReplicas(t *testing.T) {
	const (
		histories = 3
		clients   = 6
		opsPer    = 40
		shortTTL  = 2 * time.Second
	)
	var ta wirehist.Tally
	var batched int64
	for seed := range uint64(histories) {
		g := newRig(t, 3, pgstore.Options{TTL: shortTTL})
		urls := []string{g.serve(0), g.serve(1), g.serve(2)}
		tl := &timeline{g: g}
		h := sim.NewHistory(tl.peek)
		var wg sync.WaitGroup
		for ci := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(ci)))
				name := "c" + strconv.Itoa(ci)
				hc, _ := clock.NewManual(name, clock.ManualOptions{StepPerRead: 1})
				lc, _ := lease.NewClient(lease.ClientConfig{Clock: hc, HolderID: name})
				rt := &recorder{t: t, h: h, tl: tl, client: ci, rng: rand.New(rand.NewPCG(seed, uint64(ci)+100)), next: http.DefaultTransport}
				mine := append(append([]string{}, urls[ci%3:]...), urls[:ci%3]...)
				wc, err := client.New(client.Config{BaseURLs: mine, Lease: lc, HTTPClient: &http.Client{Transport: rt},
					Attempts: 8, Backoff: func(int) time.Duration { return 0 }})
				if err != nil {
					t.Error(err)
					return
				}
				if ci%2 == 0 {
					wirehist.Walk(context.Background(), wc, rng, opsPer, 2, shortTTL, tl.push)
				} else {
					wirehist.WalkMany(context.Background(), wc, rng, opsPer, 3, shortTTL, tl.push)
				}
			}()
		}
		wg.Wait()
		ta.Check(t, fmt.Sprintf("pg-c%d-s%d", clients, seed), shortTTL, h.Operations())
		for _, r := range g.r {
			batched += pgstore.Batched(r.store)
		}
	}
	t.Logf("checked %d attempts in %d histories (%d ok, %d denied, %d expired; %d renewals decided in a batch's call)", ta.Attempts, histories, ta.Granted, ta.Denied, ta.Expired, batched)
	if ta.Denied == 0 || ta.Expired == 0 {
		t.Fatal("the histories did not exercise denials and expiry")
	}
	if batched == 0 {
		t.Fatal("no renewal was decided in a batch's call")
	}
}
