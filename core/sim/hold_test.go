package sim

import (
	"errors"
	"flag"
	"testing"
)

var holdSeeds = flag.Int("holdseeds", 1000, "seeds of the holding property")

// TestHoldProperty: over 1,000 seeded schedules (holders whose clocks drift
// within the skew, messages delayed, lost and duplicated, works of up to
// four TTLs), no instant, by the coordinator's clock, has two un-aborted
// work signals for one resource.
func TestHoldProperty(t *testing.T) {
	var total HoldStats
	for seed := range uint64(*holdSeeds) {
		st, err := RunHolds(seed, HoldCorrect)
		if err != nil {
			t.Fatalf("%v (replay: go test ./core/sim -run TestHoldSeed -holdseed %d)", err, seed)
		}
		total.Grants += st.Grants
		total.Renewals += st.Renewals
		total.LostHolds += st.LostHolds
		total.SignalsChecked += st.SignalsChecked
		total.Messages += st.Messages
		total.Lost += st.Lost
	}
	t.Logf("%d seeds: %d work signals checked, %d renewals, %d holds lost, %d of %d messages lost",
		*holdSeeds, total.SignalsChecked, total.Renewals, total.LostHolds, total.Lost, total.Messages)
	if total.SignalsChecked < *holdSeeds || total.LostHolds == 0 || total.Renewals == 0 {
		t.Fatal("the runs did not exercise holds, renewals and losses")
	}
}

var holdSeed = flag.Uint64("holdseed", 0, "the seed TestHoldSeed replays")

// TestHoldSeed replays one seed of the holding property.
func TestHoldSeed(t *testing.T) {
	if _, err := RunHolds(*holdSeed, HoldCorrect); err != nil {
		t.Fatal(err)
	}
}

// TestHoldBreaksAreCaught: a holder that dates its deadline from the
// reply, or that stops only when a renewal is refused, is caught by the
// property within the same 1,000 seeds.
func TestHoldBreaksAreCaught(t *testing.T) {
	for _, br := range []HoldBreak{HoldAnchorAtReply, HoldNoDeadline} {
		caught := 0
		for seed := range uint64(*holdSeeds) {
			_, err := RunHolds(seed, br)
			var v *HoldViolation
			if errors.As(err, &v) {
				caught++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("break %d: caught in %d of %d seeds", br, caught, *holdSeeds)
		if caught == 0 {
			t.Fatalf("break %d was not caught in %d seeds", br, *holdSeeds)
		}
	}
}

func TestHoldDeterministic(t *testing.T) {
	a, errA := RunHolds(42, HoldCorrect)
	b, errB := RunHolds(42, HoldCorrect)
	if a != b || (errA == nil) != (errB == nil) {
		t.Fatalf("seed 42 ran twice: %+v (%v) and %+v (%v)", a, errA, b, errB)
	}
}
