//go:build !js

package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
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

// The calls one at a time: acquire, write through the gate, renew, release.
// The block between "doc:start" and "doc:end" opens "The Go client" of
// docs/service.md, as it is (TestDocShowsTheCallsExample).
func ExampleClient_Acquire() {
	clk0, _ := service.WallClock("coordinator")
	store, _ := service.NewLocal(service.LocalConfig{Clock: clk0, TTL: 500 * time.Millisecond})
	svc, _ := service.New(service.Config{TTL: 500 * time.Millisecond, Store: store})
	srv := httptest.NewServer(httpapi.NewHandler(svc, httpapi.HandlerOptions{}))
	defer srv.Close()
	baseURL := srv.URL
	ctx := context.Background()
	clk, _ := clock.NewMonotonic("agent-a")
	gate, _ := fence.NewGate("deploy-slot", fence.Options{})
	write := func() error { fmt.Println("deployed"); return nil }

	// doc:start
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "agent-a", ClockSkew: 500 * time.Millisecond})
	// baseURL: "http://127.0.0.1:8787", or "https://host/prefix" behind a proxy
	c, _ := client.New(client.Config{BaseURL: baseURL, Lease: lc})
	l, err := c.Acquire(ctx, "deploy-slot") // *client.DeniedError when held
	if err != nil {
		log.Fatal(err)
	}
	if err := gate.Commit(l.Token(), write); err != nil { // the resource decides, not the holder
		log.Fatal(err)
	}
	if l, err = c.Renew(ctx, l); err != nil { // client.ErrExpired: acquire again
		log.Fatal(err)
	}
	if err := c.Release(ctx, l); err != nil {
		log.Fatal(err)
	}
	// doc:end
	_, err = c.Renew(ctx, l)
	fmt.Println(errors.Is(err, client.ErrExpired))
	// Output:
	// deployed
	// true
}

// docs/service.md shows the block of the example as it is here.
func TestDocShowsTheCallsExample(t *testing.T) {
	if names := docsession.GoBlocks(t, "calls_example_test.go", "../../docs/service.md"); len(names) != 1 {
		t.Fatalf("calls_example_test.go has %d doc blocks, want 1", len(names))
	}
}
