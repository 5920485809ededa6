//go:build !js

package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/test/rig/docsession"
)

// The examples of holding, waiting, elections and inspecting; the blocks
// between "doc:start NAME" and "doc:end" are shown, as they are, in
// docs/service.md (TestDocShowsTheExamples).

// coordinator serves a coordinator (TTL 500 ms, in memory) for the
// examples; holder returns a client of it for a holder id.
func coordinator() (holder func(id string) *client.Client, stop func()) {
	clk, _ := service.WallClock("coordinator")
	store, _ := service.NewLocal(service.LocalConfig{Clock: clk, TTL: 500 * time.Millisecond})
	svc, _ := service.New(service.Config{TTL: 500 * time.Millisecond, Store: store})
	srv := httptest.NewServer(httpapi.NewHandler(svc, httpapi.HandlerOptions{}))
	return func(id string) *client.Client {
		clk, _ := clock.NewMonotonic(id)
		lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: id, ClockSkew: 50 * time.Millisecond})
		c, _ := client.New(client.Config{BaseURL: srv.URL, Lease: lc})
		return c
	}, srv.Close
}

// Hold a resource while the work runs: the lease renews itself, the work
// stops when h.Context() ends, and its write goes through the resource's
// gate.
func ExampleClient_Hold() {
	holder, stop := coordinator()
	defer stop()
	c := holder("agent-a")
	ctx := context.Background()
	gate, _ := fence.NewGate("deploy-slot", fence.Options{})
	deploy := func(ctx context.Context) error { return ctx.Err() }

	// doc:start hold
	h, err := c.Hold(ctx, "deploy-slot", client.HoldOptions{Wait: 30 * time.Second})
	if err != nil {
		log.Fatal(err) // a *client.DeniedError naming the holder once 30 s have passed
	}
	defer h.Release(context.WithoutCancel(ctx))
	// h.Context() ends when the lease is lost (context.Cause is a
	// *client.LostError, errors.Is client.ErrLeaseLost), before the
	// holder's deadline; a write already on its way is for the gate to
	// refuse.
	err = gate.CommitContext(h.Context(), h.Token(), func(ctx context.Context) error {
		return deploy(ctx)
	})
	// doc:end
	fmt.Println("deployed with fence", h.Token().Fence, "err:", err)
	// Output:
	// deployed with fence 1 err: <nil>
}

// Do holds a resource for the length of a function, waiting for it first.
func ExampleClient_Do() {
	holder, stop := coordinator()
	defer stop()
	c := holder("agent-b")
	ctx := context.Background()
	writeReport := func(ctx context.Context, t fence.Token) error { return nil }

	// doc:start do
	err := c.Do(ctx, "nightly-report", client.HoldOptions{Wait: time.Minute},
		func(ctx context.Context, h *client.Held) error {
			return writeReport(ctx, h.Token()) // stop when ctx ends
		})
	if errors.Is(err, client.ErrLeaseLost) {
		log.Print("the lease was lost while the report was written; the gate refuses a late write")
	}
	// doc:end
	fmt.Println("err:", err)
	// Output:
	// err: <nil>
}

// Leader election: campaign, lead while the hold lasts, follow the leaders.
// indexer-1 leads until it resigns; indexer-2, campaigning meanwhile, leads
// next; the observer sees each once, in fence order.
func ExampleElection() {
	holder, stop := coordinator()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	resign := map[string]chan struct{}{"indexer-1": make(chan struct{}), "indexer-2": make(chan struct{})}
	// runIndexer is the leader's work: here, until it is told to resign.
	runIndexer := func(ctx context.Context, tok fence.Token) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-resign[tok.HolderID]:
			return nil
		}
	}
	campaign := func(ctx context.Context, id string) error {
		c := holder(id)
		// doc:start campaign
		e := client.NewElection(c, "leader/indexer")
		h, err := e.Campaign(ctx, id+".internal:8080") // waits, in the queue, until elected; the value is the lead's
		if err != nil {
			return err // ctx ended
		}
		defer h.Release(context.WithoutCancel(ctx)) // resign: the next campaigner leads at once
		// Lead until h.Context() ends (the lead was lost, or ctx ended);
		// every write carries h.Token() to its gate.
		return runIndexer(h.Context(), h.Token())
		// doc:end
	}
	leaders := make(chan client.Leader, 4)
	wg.Add(3)
	observer := holder("observer")
	go func() {
		defer wg.Done()
		// doc:start observe
		for l := range client.NewElection(observer, "leader/indexer").Observe(ctx) {
			leaders <- l // the current leader first, then each new one, in fence order
		}
		// doc:end
	}()
	go func() { defer wg.Done(); _ = campaign(ctx, "indexer-1") }()
	fmt.Println(<-leaders)
	go func() { defer wg.Done(); _ = campaign(ctx, "indexer-2") }() // leads once indexer-1 resigns
	close(resign["indexer-1"])
	fmt.Println(<-leaders)
	close(resign["indexer-2"])
	// Output:
	// {indexer-1 1 indexer-1.internal:8080}
	// {indexer-2 2 indexer-2.internal:8080}
}

// Inspect and Observe: who holds a resource, and waiting for that to
// change.
func ExampleClient_Inspect() {
	holder, stop := coordinator()
	defer stop()
	c := holder("ops")
	ctx := context.Background()
	// agent-a's lease is not renewed: it expires after the TTL.
	if _, err := holder("agent-a").Acquire(ctx, "deploy-slot"); err != nil {
		log.Fatal(err)
	}

	// doc:start inspect
	st, err := c.Inspect(ctx, "deploy-slot")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Held, st.HolderID, st.Fence) // and st.Remaining
	// Wait (up to 30 s) for the fence to change: a release, an expiry, a new holder.
	st, err = c.Observe(ctx, "deploy-slot", st.Current(), 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Held, st.LastFence)
	// doc:end

	// Output:
	// true agent-a 1
	// false 1
}

// docs/service.md shows the blocks of the examples as they are here.
func TestDocShowsTheExamples(t *testing.T) {
	for src, want := range map[string][]string{
		"hold_example_test.go": {"hold", "do", "campaign", "observe", "inspect"},
		"list_example_test.go": {"list", "watch"},
	} {
		if names := docsession.GoBlocks(t, src, "../../docs/service.md"); !slices.Equal(names, want) {
			t.Errorf("%s: found the blocks %q, want %q", src, names, want)
		}
	}
}
