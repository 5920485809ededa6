package lease

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The table agrees with a Go map over seeded random inserts, updates,
// removals, sweeps, growth and shrinking, including tags that collide (a
// table forced to a few home slots).
func TestLeaseTableAgreesWithAMap(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tab := leaseTable{seed: maphash.MakeSeed()}
		model := map[string]float64{}
		keys := 50 + rng.IntN(3000)
		collide := seed%4 == 0 // few distinct tags: long probe runs
		tagOf := func(k string) uint32 {
			if collide {
				return uint32(len(k)%5 + 1)
			}
			return tab.tag(k)
		}
		for step := range 20_000 {
			k := "r" + strconv.Itoa(rng.IntN(keys))
			tag := tagOf(k)
			i, ok := tab.find(k, tag)
			v, want := model[k]
			if ok != want || ok && tab.recs[i].expiresAt != v {
				t.Fatalf("seed %d step %d: find(%s) = %v, model has %v %v", seed, step, k, ok, v, want)
			}
			switch r := rng.IntN(10); {
			case r < 4 && !ok:
				e := float64(rng.IntN(1000))
				at := i
				if rng.IntN(2) == 0 {
					at = -1
				}
				j := tab.insert(at, tag, held{resource: k, expiresAt: e})
				if tab.recs[j].resource != k {
					t.Fatal("insert returned the wrong slot")
				}
				model[k] = e
			case r < 6 && ok:
				tab.recs[i].expiresAt = float64(rng.IntN(1000))
				model[k] = tab.recs[i].expiresAt
			case r < 9 && ok:
				tab.remove(i)
				delete(model, k)
			case r == 9 && rng.IntN(50) == 0:
				cut := float64(rng.IntN(1000))
				tab.removeIf(func(h *held) bool { return h.expiresAt < cut })
				for mk, mv := range model {
					if mv < cut {
						delete(model, mk)
					}
				}
			}
			if tab.count != len(model) {
				t.Fatalf("seed %d step %d: count %d, model %d", seed, step, tab.count, len(model))
			}
		}
		n := 0
		for i, v := range tab.tags {
			if v == 0 {
				continue
			}
			n++
			if mv, ok := model[tab.recs[i].resource]; !ok || mv != tab.recs[i].expiresAt {
				t.Fatalf("seed %d: slot %d holds %+v, model %v %v", seed, i, tab.recs[i], mv, ok)
			}
		}
		if n != len(model) || 4*tab.count > 3*len(tab.tags) {
			t.Fatalf("seed %d: %d entries in %d slots, model %d", seed, n, len(tab.tags), len(model))
		}
	}
}
