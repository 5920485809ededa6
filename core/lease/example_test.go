package lease_test

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// The whole flow: two agents, one coordinator, one gate at the resource.
// Agent A acquires and writes, stalls past its lease, and its late write is
// refused because B, who got the resource next, has written with a higher
// fence. B renews and keeps its fence.
func Example() {
	// Manual clocks keep the example deterministic; use clock.NewMonotonic
	// in real code. Each participant has its own domain.
	coordClock, _ := clock.NewManual("coordinator", clock.ManualOptions{})
	aClock, _ := clock.NewManual("agent-a", clock.ManualOptions{})
	bClock, _ := clock.NewManual("agent-b", clock.ManualOptions{})

	coordinator, _ := lease.NewCoordinator(lease.CoordinatorConfig{Clock: coordClock, TTL: 30 * time.Second})
	ids := 0
	nextID := func() string { ids++; return "req-" + strconv.Itoa(ids) }
	a, _ := lease.NewClient(lease.ClientConfig{Clock: aClock, HolderID: "agent-a", ClockSkew: 500 * time.Millisecond, NewRequestID: nextID})
	b, _ := lease.NewClient(lease.ClientConfig{Clock: bClock, HolderID: "agent-b", ClockSkew: 500 * time.Millisecond, NewRequestID: nextID})
	gate, _ := fence.NewGate("deploy-slot", fence.Options{})
	slot := ""

	// A acquires: the request carries the instant it was sent.
	req, _ := a.BeginAcquire("deploy-slot")
	out, _ := coordinator.Acquire(req) // the far side of the wire
	leaseA, _ := a.CompleteAcquire(req, out.Grant)
	fmt.Println("A holds", leaseA.Token(), "until", leaseA.Deadline())
	fmt.Println("A writes:", gate.Commit(leaseA.Token(), func() error { slot = "v1 from A"; return nil }))

	// B is told who holds it and for how long.
	reqB, _ := b.BeginAcquire("deploy-slot")
	out, _ = coordinator.Acquire(reqB)
	fmt.Println("B denied: held by", out.HeldBy, "free in", out.RetryAfter)

	// A stalls for 40s. The coordinator's copy of its lease ends; B gets it.
	_ = coordClock.Advance(40_000)
	_ = bClock.Advance(40_000)
	_ = aClock.Advance(40_000)
	reqB, _ = b.BeginAcquire("deploy-slot")
	out, _ = coordinator.Acquire(reqB)
	leaseB, _ := b.CompleteAcquire(reqB, out.Grant)
	fmt.Println("B writes:", gate.Commit(leaseB.Token(), func() error { slot = "v2 from B"; return nil }))

	// A wakes up and writes. The gate refuses it and logs the overlap.
	err := gate.Commit(leaseA.Token(), func() error { slot = "v1.1 from A"; return nil })
	var stale *fence.StaleFenceError
	fmt.Println("A's late write refused:", errors.As(err, &stale), "slot:", slot)
	fmt.Printf("log: %+v\n", gate.Rejections()[0])

	// B renews: same fence, deadline anchored at the renewal's send instant.
	_ = bClock.Advance(10_000)
	_ = coordClock.Advance(10_100)
	renewal, _ := b.BeginRenewal(leaseB)
	out, _ = coordinator.Renew(renewal)
	leaseB, _ = b.CompleteRenewal(renewal, out.Grant)
	fmt.Println("B renewed", leaseB.Token(), "until", leaseB.Deadline(), "coordinator's copy until", out.Grant.CoordinatorExpiresAt)

	// A renewing its expired lease is refused: re-acquire instead.
	renewal, _ = a.BeginRenewal(leaseA)
	out, _ = coordinator.Renew(renewal)
	fmt.Println("A renewal:", out.OK, out.Reason)
	// Output:
	// A holds "agent-a"@"deploy-slot"#1 until 29500ms@"agent-a"
	// A writes: <nil>
	// B denied: held by agent-a free in 30s
	// B writes: <nil>
	// A's late write refused: true slot: v2 from B
	// log: {Seq:1 Resource:deploy-slot RefusedHolderID:agent-a RefusedFence:1 AdmittedHolderID:agent-b AdmittedFence:2}
	// B renewed "agent-b"@"deploy-slot"#2 until 79500ms@"agent-b" coordinator's copy until 80100ms@"coordinator"
	// A renewal: false expired
}

// A lease's deadline is in the holder's domain; the coordinator's expiry is
// in the coordinator's. Measuring one against the other is an error.
func ExampleLease_HasExpiredAt() {
	coordClock, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 5_000})
	aClock, _ := clock.NewManual("agent-a", clock.ManualOptions{})
	coordinator, _ := lease.NewCoordinator(lease.CoordinatorConfig{Clock: coordClock, TTL: time.Second})
	a, _ := lease.NewClient(lease.ClientConfig{Clock: aClock, HolderID: "agent-a"})

	req, _ := a.BeginAcquire("r")
	out, _ := coordinator.Acquire(req)
	l, _ := a.CompleteAcquire(req, out.Grant)

	fmt.Println(l.HasExpiredAt(clock.At("agent-a", 999)))
	fmt.Println(l.HasExpiredAt(out.Grant.CoordinatorExpiresAt))
	// Output:
	// false <nil>
	// false clock: instant from domain "coordinator" cannot be measured against domain "agent-a"
}

// A retried acquisition (same request id, say after a lost reply) gets the
// grant that already exists, not a second fence.
func ExampleCoordinator_Acquire_retry() {
	coordClock, _ := clock.NewManual("coordinator", clock.ManualOptions{StepPerRead: 10})
	aClock, _ := clock.NewManual("agent-a", clock.ManualOptions{})
	coordinator, _ := lease.NewCoordinator(lease.CoordinatorConfig{Clock: coordClock, TTL: time.Second})
	a, _ := lease.NewClient(lease.ClientConfig{Clock: aClock, HolderID: "agent-a"})

	req, _ := a.BeginAcquire("r")
	first, _ := coordinator.Acquire(req)
	retry, _ := coordinator.Acquire(req) // the reply to the first was lost
	fmt.Println(first.Grant.Fence, retry.Grant.Fence, first.Grant == retry.Grant, coordinator.IssuedFence())
	// Output: 1 1 true 1
}

// A successor coordinator resumes from its predecessor's IssuedFence, so it
// never reissues a fence the resource has already superseded.
func ExampleCoordinatorConfig_startFence() {
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{})
	old, _ := lease.NewCoordinator(lease.CoordinatorConfig{Clock: clk, TTL: time.Second})
	a, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "agent-a"})
	for _, r := range []string{"x", "y", "z"} {
		req, _ := a.BeginAcquire(r)
		_, _ = old.Acquire(req)
	}
	persisted := old.IssuedFence() // write this somewhere durable

	successor, _ := lease.NewCoordinator(lease.CoordinatorConfig{Clock: clk, TTL: time.Second, StartFence: persisted})
	req, _ := a.BeginAcquire("x")
	out, _ := successor.Acquire(req)
	fmt.Println(persisted, out.Grant.Fence)
	// Output: 3 4
}

// The rules as pure functions: a store that keeps one resource's state
// decides on it, makes the next state durable, and only then answers.
func ExampleRules() {
	rules := lease.Rules{Domain: "coordinator", TTL: time.Second}
	var stored lease.State // what the store holds for "deploy-slot"
	req := lease.Request{Kind: lease.KindAcquire, RequestID: "q1", Resource: "deploy-slot", HolderID: "agent-a",
		SentAt: clock.At("agent-a", 5)}
	out, next, _ := rules.Acquire(clock.At("coordinator", 100), stored, nil, req)
	stored = next // write next durably first, then answer out
	fmt.Println(out.OK, out.Grant.Fence, stored.HolderID, stored.ExpiresAt)

	req.RequestID, req.HolderID = "q2", "agent-b"
	out, _, _ = rules.Acquire(clock.At("coordinator", 400), stored, nil, req)
	fmt.Println(out.OK, out.HeldBy, out.RetryAfter)
	// Output:
	// true 1 agent-a 1100
	// false agent-a 700ms
}
