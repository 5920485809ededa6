package lease

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The table agrees with a Go map over seeded random inserts, updates,
// removals, sweeps, growth, splits and shrinking, including tags that
// collide (a few home slots and directory bits) and sub-tables small enough
// to split often.
func TestLeaseTableAgreesWithAMap(t *testing.T) {
	defer func(n int) { maxSlots = n }(maxSlots)
	for seed := range uint64(24) {
		maxSlots = []int{16, 64, 8192}[seed%3]
		rng := rand.New(rand.NewPCG(seed, 7))
		tab := leaseTable{seed: maphash.MakeSeed()}
		model := map[string]float64{}
		keys := 50 + rng.IntN(3000)
		collide := seed%4 == 0 // few distinct tags: long probe runs
		tagOf := func(k string) uint32 {
			if collide {
				// Distinct top bits (directory) and low bits (home) for
				// a handful of groups.
				g := uint32(len(k)%5 + 1)
				return g<<29 | g
			}
			return tab.tag(k)
		}
		for step := range 20_000 {
			k := "r" + strconv.Itoa(rng.IntN(keys))
			tag := tagOf(k)
			r, ok := tab.find(k, tag)
			v, want := model[k]
			if ok != want || ok && r.rec().expiresAt != v {
				t.Fatalf("seed %d step %d: find(%s) = %v, model has %v %v", seed, step, k, ok, v, want)
			}
			switch n := rng.IntN(10); {
			case n < 4 && !ok:
				e := float64(rng.IntN(1000))
				at := r
				if rng.IntN(2) == 0 {
					at = ref{}
				}
				rec := tab.insert(at, tag)
				rec.resource, rec.expiresAt = k, e
				if r2, ok := tab.find(k, tag); !ok || r2.rec().resource != k {
					t.Fatal("inserted record not found")
				}
				model[k] = e
			case n < 6 && ok:
				r.rec().expiresAt = float64(rng.IntN(1000))
				model[k] = r.rec().expiresAt
			case n < 9 && ok:
				tab.remove(r)
				delete(model, k)
			case n == 9 && rng.IntN(50) == 0:
				cut := float64(rng.IntN(1000))
				for _, st := range tab.tables {
					tab.count -= st.removeIf(func(h *held) bool { return h.expiresAt < cut })
				}
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
		tab.each(func(h *held) {
			n++
			if mv, ok := model[h.resource]; !ok || mv != h.expiresAt {
				t.Fatalf("seed %d: record %+v, model %v %v", seed, *h, mv, ok)
			}
		})
		if n != len(model) {
			t.Fatalf("seed %d: %d records, model %d", seed, n, len(model))
		}
		// Every sub-table is reachable from the directory, within its
		// size and load bounds, and counts its records.
		seen := map[*subTable]bool{}
		for _, st := range tab.dir {
			seen[st] = true
		}
		total := 0
		for _, st := range tab.tables {
			if !seen[st] {
				t.Fatalf("seed %d: a sub-table is not in the directory", seed)
			}
			c := 0
			for _, v := range st.tags {
				if v != 0 {
					c++
				}
			}
			// (A sub-table may exceed maxSlots when its records all
			// agree on the next directory bit; TestLeaseTableSplits
			// checks the bound with fixed tags.)
			if c != st.count || 4*st.count > 3*len(st.tags) {
				t.Fatalf("seed %d: sub-table of %d slots counts %d, holds %d", seed, len(st.tags), st.count, c)
			}
			total += c
		}
		if len(seen) != len(tab.tables) || total != tab.count {
			t.Fatalf("seed %d: %d sub-tables in the directory, %d listed; %d records, count %d", seed, len(seen), len(tab.tables), total, tab.count)
		}
	}
}

// With well-spread tags, a full sub-table splits instead of growing past
// maxSlots, the directory deepens, and every record stays reachable.
func TestLeaseTableSplits(t *testing.T) {
	defer func(n int) { maxSlots = n }(maxSlots)
	maxSlots = 16
	tab := leaseTable{seed: maphash.MakeSeed()}
	tagOf := func(i int) uint32 { return uint32(i+1)*2654435761 | 1 } // distinct, spread
	const n = 5000
	for i := range n {
		k := "r" + strconv.Itoa(i)
		at, ok := tab.find(k, tagOf(i))
		if ok {
			t.Fatalf("%s found before it was inserted", k)
		}
		rec := tab.insert(at, tagOf(i))
		rec.resource, rec.fence = k, uint64(i)
	}
	if tab.count != n || tab.depth == 0 || len(tab.tables) < n/12 {
		t.Fatalf("%d records, depth %d, %d sub-tables", tab.count, tab.depth, len(tab.tables))
	}
	for _, st := range tab.tables {
		if len(st.tags) > maxSlots {
			t.Fatalf("a sub-table of %d slots", len(st.tags))
		}
	}
	for i := range n {
		k := "r" + strconv.Itoa(i)
		r, ok := tab.find(k, tagOf(i))
		if !ok || r.rec().fence != uint64(i) {
			t.Fatalf("%s: found %v", k, ok)
		}
		tab.remove(r)
	}
	if tab.count != 0 {
		t.Fatalf("count %d after removing everything", tab.count)
	}
}
