package sim_test

import (
	"fmt"
	"os"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lease-fence/lease-fence/core/sim"
)

// A run is decided by its seed. A failing run names the invariant; the
// replay command reruns exactly that seed with a trace.
func ExampleRun() {
	r := sim.Run(42, sim.Options{})
	fmt.Println(r.Params.Agents, "agents,", r.Params.Resources, "resources, restarts:", r.Params.Restart)
	fmt.Println("violation:", r.Err())
	fmt.Println(sim.ReplayCommand(42, sim.Fenced))
	// Output:
	// 5 agents, 1 resources, restarts: persisted
	// violation: <nil>
	// go test ./core/sim -run 'TestSimSeed$' -count=1 -v -seed=42
}

// Two grants of one fence for one resource: no correct coordinator answers
// that way, and the check says so and draws the history.
func ExampleCheckHistory() {
	acquire := func(holder string, at float64) sim.OpInput {
		return sim.OpInput{Kind: sim.OpAcquire, Resource: "r", Holder: holder, RequestID: holder + "-1", Lo: at, Hi: at}
	}
	ops := []porcupine.Operation{
		{ClientId: 0, Call: 1, Return: 2, Input: acquire("a", 0), Output: sim.OpOutput{OK: true, Fence: 1, ExpiresAt: 100}},
		{ClientId: 1, Call: 3, Return: 4, Input: acquire("b", 200), Output: sim.OpOutput{OK: true, Fence: 1, ExpiresAt: 300}},
	}
	dir, _ := os.MkdirTemp("", "porcupine")
	defer os.RemoveAll(dir)
	path, err := sim.CheckHistory("same-fence", dir, 100*time.Millisecond, ops, time.Second)
	fmt.Println(err != nil, path != "")
	// Output: true true
}
