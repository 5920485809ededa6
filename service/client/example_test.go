//go:build !js

package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
)

// A coordinator served over HTTP, and two holders competing for it.
func Example() {
	coordClock, _ := service.WallClock("coordinator")
	store, _ := service.NewLocal(service.LocalConfig{Clock: coordClock, TTL: 30 * time.Second}) // in memory
	svc, _ := service.New(service.Config{TTL: 30 * time.Second, Store: store})
	srv := httptest.NewServer(httpapi.NewHandler(svc, httpapi.HandlerOptions{}))
	defer srv.Close()

	holder := func(id string) *client.Client {
		clk, _ := clock.NewMonotonic(id)
		lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: id, ClockSkew: 500 * time.Millisecond})
		c, _ := client.New(client.Config{BaseURL: srv.URL, Lease: lc})
		return c
	}
	a, b := holder("agent-a"), holder("agent-b")
	ctx := context.Background()

	l, err := a.Acquire(ctx, "deploy-slot")
	if err != nil {
		panic(err)
	}
	fmt.Println("agent-a holds fence", l.Token().Fence)

	_, err = b.Acquire(ctx, "deploy-slot")
	var denied *client.DeniedError
	if errors.As(err, &denied) {
		fmt.Println("agent-b denied; held by", denied.HeldBy)
	}

	_ = a.Release(ctx, l)
	l2, _ := b.Acquire(ctx, "deploy-slot")
	fmt.Println("agent-b holds fence", l2.Token().Fence)
	// Output:
	// agent-a holds fence 1
	// agent-b denied; held by agent-a
	// agent-b holds fence 2
}
