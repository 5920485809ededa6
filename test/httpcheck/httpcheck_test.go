//go:build !js

// The test listens on 127.0.0.1; GOOS=js has no sockets.

package httpcheck

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
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/sim"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/pebblestore"
	"github.com/lease-fence/lease-fence/test/rig/wirehist"
)

const ttl = 40 * time.Millisecond

// recorder is the HTTP transport of one client. It records every attempt
// the wire client makes as one operation of the history (what the
// coordinator was asked and what it answered), then loses some replies, so
// the client sends the same body again. Recording attempts rather than
// client calls matters: an acquisition whose reply is lost and whose retry
// arrives after that first lease ended gets a second, fresh fence, so one
// Acquire call can be two grants.
type recorder struct {
	t      *testing.T
	h      *sim.History
	client int
	next   http.RoundTripper
	rng    *rand.Rand
	lost   int
}

func (rt *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	m, err := wirehist.ReadRequest(r)
	if err != nil {
		rt.t.Errorf("the client sent a body the server cannot decode: %v", err)
		return nil, err
	}
	in := wirehist.InputOf(m)
	p := rt.h.Begin(rt.client, in)
	resp, err := rt.next.RoundTrip(r)
	if err != nil {
		rt.t.Errorf("attempt failed on 127.0.0.1: %v", err)
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	p.End(wirehist.OutputOf(resp.StatusCode, data))
	if rt.rng.IntN(5) == 0 {
		rt.lost++
		return nil, errors.New("httpcheck: reply lost")
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// history runs clients goroutines of wire clients against one service on a
// manual clock (1ms per read, pushed forward by the clients too), in memory
// or with its state in a Pebble store, and returns every attempt they
// made, and how many replies were lost.
func history(t *testing.T, seed uint64, clients, opsPer, resources int, durable bool) (*sim.History, int) {
	cc, _ := clock.NewManual("coordinator", clock.ManualOptions{StepPerRead: 1})
	cfg := service.LocalConfig{Clock: cc, TTL: ttl, FenceReserve: 1024}
	if durable {
		ps, err := pebblestore.Create(filepath.Join(t.TempDir(), "state"), pebblestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer ps.Close()
		cfg.Persist = ps
	}
	store, err := service.NewLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{TTL: ttl, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(httpapi.NewHandler(svc, httpapi.HandlerOptions{}))
	srv.Listener.Close()
	if srv.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Close()
	h := sim.NewHistory(func() float64 { return cc.Peek().Millis })
	rts := make([]*recorder, clients)
	var wg sync.WaitGroup
	for ci := range clients {
		rt := &recorder{t: t, h: h, client: ci, next: srv.Client().Transport, rng: rand.New(rand.NewPCG(seed, uint64(ci)+100))}
		rts[ci] = rt
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(ci)))
			name := "c" + strconv.Itoa(ci)
			hc, _ := clock.NewManual(name, clock.ManualOptions{StepPerRead: 1})
			lc, _ := lease.NewClient(lease.ClientConfig{Clock: hc, HolderID: name})
			wc, err := client.New(client.Config{BaseURL: srv.URL, Lease: lc,
				HTTPClient: &http.Client{Transport: rt}, Attempts: 8, Backoff: func(int) time.Duration { return 0 }})
			if err != nil {
				t.Error(err)
				return
			}
			wirehist.Walk(context.Background(), wc, rng, opsPer, resources, ttl, func(ms float64) { _ = cc.Advance(ms) })
		}()
	}
	wg.Wait()
	lost := 0
	for _, rt := range rts {
		lost += rt.lost
	}
	return h, lost
}

// TestLinearizableOverHTTP checks histories of concurrent wire clients,
// recorded at the HTTP transport, against the same model as the in-process
// histories: 8 with the state in memory, 4 with it in a Pebble store.
func TestLinearizableOverHTTP(t *testing.T) {
	const histories = 12
	var ta wirehist.Tally
	lost := 0
	for seed := range uint64(histories) {
		durable := seed >= 8
		h, l := history(t, seed, 6, 40, 2, durable)
		ta.Check(t, fmt.Sprintf("http-c6-r2-s%d-durable-%v", seed, durable), ttl, h.Operations())
		lost += l
	}
	t.Logf("checked %d HTTP attempts in %d histories (%d ok, %d denied, %d expired); %d replies lost and retried",
		ta.Attempts, histories, ta.Granted, ta.Denied, ta.Expired, lost)
	if lost == 0 || ta.Denied == 0 || ta.Expired == 0 {
		t.Fatal("the histories did not exercise lost replies, denials and expiry")
	}
}
