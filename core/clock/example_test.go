package clock_test

import (
	"errors"
	"fmt"

	"github.com/lease-fence/lease-fence/core/clock"
)

// A manual clock that steps on every read: the check and the write of a
// holder never observe the same instant, which is what makes the
// check-to-write gap reproducible in a test.
func ExampleNewManual() {
	agent, _ := clock.NewManual("agent-a", clock.ManualOptions{Start: 950, StepPerRead: 450})
	check, _ := agent.Now()
	write, _ := agent.Now()
	gap, _ := write.Since(check)
	fmt.Println(check, write, gap)
	// Output: 950ms@"agent-a" 1400ms@"agent-a" 450
}

// Instants from two clocks cannot be subtracted: the answer would look like
// a duration and be off by the difference of the clocks' origins.
func ExampleInstant_Since() {
	holder := clock.At("agent-a", 1000)
	coordinator := clock.At("coordinator", 1040)
	_, err := coordinator.Since(holder)
	var de *clock.DomainError
	fmt.Println(errors.As(err, &de), err)
	// Output: true clock: instant from domain "agent-a" cannot be measured against domain "coordinator"
}

// A guarded clock refuses a reading that went backwards (an NTP step on a
// wall clock) instead of quietly lengthening a lease.
func ExampleNew() {
	readings := []float64{1000, 1200, 900, 1300}
	i := 0
	wall, _ := clock.New("wall", func() float64 { v := readings[i]; i++; return v })
	for range readings {
		now, err := wall.Now()
		fmt.Println(now.Millis, err)
	}
	// Output:
	// 1000 <nil>
	// 1200 <nil>
	// 0 clock: reading of domain "wall" is lower than an earlier reading (900 after 1200)
	// 1300 <nil>
}
