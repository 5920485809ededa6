//go:build linux && drill

package main

import "testing"

// pgDrill selects the long forms of the PostgreSQL drills (make drill-pg).
const pgDrill = true

// TestFailoverAsynchronous (make drill-pg): the same with asynchronous
// replication, which loses what the standby had not received. It reports
// what was lost; it requires only that no fence is repeated or lowered,
// which the counter's jump on the new timeline ensures.
func TestFailoverAsynchronous(t *testing.T) {
	r := failover(t, false, 4)
	if r.repeated+r.lowered != 0 {
		t.Fatalf("%+v", r)
	}
}
