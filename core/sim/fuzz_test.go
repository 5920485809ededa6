package sim

import (
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
)

func fenceToken(holder string, f uint64) fence.Token {
	return fence.Token{Resource: "r0", HolderID: holder, Fence: f}
}

// Hand-written schedules for RunOps (see its doc for the encoding). They
// seed the fuzzer alongside the corpus under testdata/fuzz/FuzzOps.
var opsSeeds = map[string][]byte{
	// a0 acquires r0, writes, renews, writes, releases.
	"round-trip": {0, 1, 0, 2, 0, 3, 0, 5, 0, 0, 40, 4, 0, 2, 0, 3, 0, 5, 0, 7, 0},
	// a0's request is duplicated and resent; the coordinator answers the
	// retry with the same fence; both replies reach a0.
	"retry-and-duplicate": {0, 1, 0, 9, 0, 2, 128, 2, 0, 2, 0, 3, 128, 3, 0, 3, 0},
	// a0 holds r0, stalls past the TTL; a1 takes r0 and writes; a0's stale
	// write is refused.
	"stale-write": {0, 1, 0, 2, 0, 3, 0, 5, 0, 0, 250, 1, 1, 2, 0, 3, 0, 5, 1, 5, 0},
	// A failed write callback (a1, fence 2) keeps the floor raised; a0's
	// older fence after it is refused, twice.
	"failed-write": {0, 1, 0, 2, 0, 3, 0, 0, 200, 1, 1, 2, 0, 3, 0, 5, 193, 5, 3, 5, 0},
	// The grant spends 60ms on the way back; the lease still ends where
	// the coordinator's does, because it is anchored at the send.
	"slow-reply": {0, 1, 0, 2, 0, 0, 60, 3, 0, 5, 0},
	// Renewal arrives after expiry and is refused.
	"late-renewal": {0, 1, 0, 2, 0, 3, 0, 4, 0, 0, 200, 2, 0, 3, 0},
	// Persisted restart between grants; the new coordinator issues above the
	// gate's floor; the coordinator pushes admits.
	"restart-persisted": {0, 1, 0, 2, 0, 3, 0, 5, 0, 6, 0, 8, 0, 0, 200, 1, 1, 2, 0, 3, 0, 6, 0, 5, 1},
	// Amnesiac restart: fences start over and the gate refuses them (a0
	// held fences 1 and 2; the new coordinator issues 1 again).
	"restart-amnesiac": {1, 1, 0, 2, 0, 3, 0, 7, 0, 1, 0, 2, 0, 3, 0, 5, 0, 8, 0, 0, 200, 1, 1, 2, 0, 3, 0, 5, 1, 6, 0},
	// Amnesiac restart that reissues exactly the gate's floor: a1's fence 1
	// from the new coordinator and a0's fence 1 from the old one are both
	// admitted, because the gate compares numbers, not holders.
	"amnesiac-equal-fence": {1, 1, 0, 2, 0, 3, 0, 5, 0, 8, 0, 0, 200, 1, 1, 2, 0, 3, 0, 5, 1, 5, 0},
}

// TestOpsSeeds runs the hand-written schedules and checks they reach the
// states they are named for.
func TestOpsSeeds(t *testing.T) {
	want := map[string]func(h *opsHarness) bool{
		"round-trip":          func(h *opsHarness) bool { return h.gates[0].Floor() == 1 && h.agents[0].l == nil },
		"retry-and-duplicate": func(h *opsHarness) bool { return h.co.IssuedFence() == 1 && h.chk.Checks[SingleUse] >= 1 },
		"stale-write":         func(h *opsHarness) bool { return h.gates[0].RejectionCount() == 1 && h.gates[0].Floor() == 2 },
		"failed-write":        func(h *opsHarness) bool { return h.gates[0].RejectionCount() == 2 && h.gates[0].Floor() == 2 },
		"late-renewal":        func(h *opsHarness) bool { return h.agents[0].l == nil && h.co.IssuedFence() == 1 },
		"slow-reply": func(h *opsHarness) bool {
			return h.agents[0].l != nil && h.agents[0].l.Deadline().Millis == h.agents[0].off+opsTTL-opsSkew
		},
		"restart-persisted": func(h *opsHarness) bool {
			return h.inc == 1 && h.co.IssuedFence() == 2 && h.gates[0].Floor() == 2 && h.chk.Checks[RestartAboveGate] == 2
		},
		"amnesiac-equal-fence": func(h *opsHarness) bool {
			return h.inc == 1 && h.gates[0].Floor() == 1 && h.gates[0].RejectionCount() == 0 &&
				h.chk.Checks[GateFloor] >= 3 && h.agents[0].tokens[0] == fenceToken("a0", 1) && h.agents[1].tokens[0] == fenceToken("a1", 1)
		},
		"restart-amnesiac": func(h *opsHarness) bool {
			return h.inc == 1 && h.co.IssuedFence() == 1 && h.gates[0].Floor() == 2 && h.gates[0].RejectionCount() == 2
		},
	}
	for name, data := range opsSeeds {
		h, err := runOps(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !want[name](h) {
			t.Errorf("%s: did not reach the state it is named for: inc %d, issued %d, floor %d, rejections %d, checks %v",
				name, h.inc, h.co.IssuedFence(), h.gates[0].Floor(), h.gates[0].RejectionCount(), h.chk.Checks)
		}
	}
}

// FuzzOps lets the fuzzer choose the schedule of coordinator, client and gate
// operations; every answer is checked against the invariants.
func FuzzOps(f *testing.F) {
	for _, data := range opsSeeds {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := RunOps(data); err != nil {
			t.Fatalf("%v\nschedule: %v", err, data)
		}
	})
}

// FuzzSimSeed lets the fuzzer pick simulation seeds beyond the fixed range
// make test runs.
func FuzzSimSeed(f *testing.F) {
	for _, s := range []uint64{0, 1, 1 << 32, 1<<64 - 1} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		if err := Run(seed, Options{}).Err(); err != nil {
			t.Fatalf("%v\n    replay: %s", err, ReplayCommand(seed, Fenced))
		}
	})
}
