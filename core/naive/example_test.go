package naive_test

import (
	"fmt"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/naive"
)

// The naive lease's check passes at 950 and the write lands at 1400, after
// the lease ended at 1000. Nothing notices.
func Example() {
	agent, _ := clock.NewManual("agent-a", clock.ManualOptions{})
	l, _ := naive.Acquire(agent, time.Second)

	_ = agent.Set(950)
	ok, _ := l.Valid()
	_ = agent.Set(1400)
	landed, _ := agent.Now()
	fmt.Println("check passed:", ok, "write landed at", landed.Millis, "deadline", l.ExpiresAt().Millis)
	// Output: check passed: true write landed at 1400 deadline 1000
}
