package fence_test

import (
	"context"
	"errors"
	"fmt"

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
	// [{Seq:1 Resource:deploy-slot RefusedHolder:agent-a RefusedFence:1 AdmittedHolder:agent-b AdmittedFence:2}]
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
