package service_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/wire"
)

// The state machine over a store in memory: each call is decided through
// lease.Rules and made durable (here: nowhere) before it is answered. The
// native server gives NewLocal a pebblestore.Store as its Persister, and
// serves the Service with httpapi.NewHandler.
func Example() {
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	store, _ := service.NewLocal(service.LocalConfig{Clock: clk, TTL: time.Second})
	svc, _ := service.New(service.Config{TTL: time.Second, Store: store})
	ctx := context.Background()
	acquire := func(id, holder string) wire.Reply {
		req := lease.Request{Kind: lease.KindAcquire, RequestID: id, Resource: "deploy-slot", HolderID: holder,
			SentAt: clock.At(holder, 5)}
		reply, _ := svc.Call(ctx, wire.Message{Op: wire.OpAcquire, Request: req, Secret: "secret-of-" + holder + "-0123456789"})
		return reply
	}
	fmt.Println(acquire("q1", "agent-a").Grant.Fence)
	fmt.Println(acquire("q2", "agent-b").HeldBy)
	fmt.Println(acquire("q1", "agent-a").Grant.Fence, store.Leases()) // a retry: the same grant
	// Output:
	// 1
	// agent-a
	// 1 1
}
