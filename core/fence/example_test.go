package fence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
)

// The gate at the resource admits the newer generation and refuses the
// holder that stalled past its lease, logging the overlap.
func ExampleGate_Commit() {
	gate, _ := fence.NewGate("deploy-slot", fence.Options{})
	stale := fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 1}
	fresh := fence.Token{Resource: "deploy-slot", HolderID: "agent-b", Fence: 2}

	value := ""
	fmt.Println(gate.Commit(fresh, func() error { value = "from b"; return nil }))
	err := gate.Commit(stale, func() error { value = "from a"; return nil })

	var se *fence.StaleFenceError
	fmt.Println(errors.As(err, &se), value)
	fmt.Println(err)
	fmt.Printf("%+v\n", gate.Rejections())
	// Output:
	// <nil>
	// true from b
	// fence: stale write to "deploy-slot" refused (rejection #1): holder "agent-a" has fence 1 but holder "agent-b" was admitted at fence 2
	// [{Seq:1 Resource:deploy-slot RefusedHolderID:agent-a RefusedFence:1 AdmittedHolderID:agent-b AdmittedFence:2}]
}

// Admit pushes a new generation to the resource at reassignment time, so the
// old holder is refused even before the new holder has written anything.
func ExampleGate_Admit() {
	gate, _ := fence.NewGate("deploy-slot", fence.Options{})
	_ = gate.Commit(fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 1}, func() error { return nil })

	_ = gate.Admit(fence.Token{Resource: "deploy-slot", HolderID: "agent-b", Fence: 2})
	err := gate.Commit(fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 1}, func() error { return nil })
	fmt.Println(gate.Floor(), err != nil)
	// Output: 2 true
}

// A resource that persisted its floor resumes refusing the generations it
// had superseded before it restarted.
func ExampleNewGate_initialFloor() {
	gate, _ := fence.NewGate("deploy-slot", fence.Options{InitialFloor: 41})
	err := gate.Commit(fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 40}, func() error { return nil })
	fmt.Println(err)
	// Output: fence: stale write to "deploy-slot" refused (rejection #1): holder "agent-a" has fence 40 but the initial floor was admitted at fence 41
}

// CommitContext is for a write that waits or does I/O: writes on a gate run
// one at a time, and a commit still waiting for its turn gives up when its
// context is done, having logged nothing and moved nothing.
func ExampleGate_CommitContext() {
	gate, _ := fence.NewGate("deploy-slot", fence.Options{})
	writing := make(chan struct{})
	finish := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- gate.CommitContext(context.Background(), fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 1},
			func(ctx context.Context) error { close(writing); <-finish; return nil })
	}()
	<-writing // agent-a's write is running

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // agent-b gives up (here: before it even starts waiting)
	err := gate.CommitContext(ctx, fence.Token{Resource: "deploy-slot", HolderID: "agent-b", Fence: 2},
		func(ctx context.Context) error { return nil })
	fmt.Println(err, gate.Floor(), gate.RejectionCount())

	close(finish)
	fmt.Println(<-done)
	// Output:
	// context canceled 1 0
	// <nil>
}

// A stale holder's write learns that it was superseded: its context is
// cancelled, with a *fence.SupersededError as the cause, as soon as a newer
// fence is admitted (or a newer write starts waiting for it). The gate still
// waits for the write to return before the next one starts.
func ExampleSupersededError() {
	gate, _ := fence.NewGate("deploy-slot", fence.Options{})
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- gate.CommitContext(context.Background(), fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 1},
			func(ctx context.Context) error {
				close(started)
				<-ctx.Done() // a long write that watches its context (an HTTP call, a query)
				return context.Cause(ctx)
			})
	}()
	<-started
	_ = gate.Admit(fence.Token{Resource: "deploy-slot", HolderID: "agent-b", Fence: 2}) // the lease was reassigned

	err := <-done
	var se *fence.SupersededError
	fmt.Println(errors.As(err, &se), se.HolderID, se.Fence, se.NewerHolderID, se.NewerFence)
	fmt.Println(err)
	// Output:
	// true agent-a 1 agent-b 2
	// fence: the write of holder "agent-a" with fence 1 to "deploy-slot" is superseded: holder "agent-b" with fence 2 was admitted
}

// A write that gives up waiting for its turn says what it waited for: the
// running write's holder, fence and how long it has run (here at least: the
// gate reads no clock for a write that finds it free, and counts from when
// agent-b queued). Options.Now is a clock that moves one second per
// reading, to print a fixed figure.
func ExampleGateBusyError() {
	t := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	gate, _ := fence.NewGate("deploy-slot", fence.Options{Now: func() time.Time { t = t.Add(time.Second); return t }})
	started := make(chan struct{})
	finish := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- gate.CommitContext(context.Background(), fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 1},
			func(ctx context.Context) error { close(started); <-finish; return nil }) // hangs until told
	}()
	<-started

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := gate.CommitContext(ctx, fence.Token{Resource: "deploy-slot", HolderID: "agent-b", Fence: 2},
		func(ctx context.Context) error { return nil })
	var busy *fence.GateBusyError
	fmt.Println(errors.As(err, &busy), busy.RunningHolderID, busy.RunningFence, errors.Is(err, context.DeadlineExceeded))
	fmt.Println(err)

	close(finish)
	fmt.Println(<-done)
	// Output:
	// true agent-a 1 true
	// fence: the write of holder "agent-b" with fence 2 to "deploy-slot" gave up waiting for its turn (context deadline exceeded): holder "agent-a" has been writing with fence 1 for at least 1s
	// <nil>
}
