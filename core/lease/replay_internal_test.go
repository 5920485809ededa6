package lease

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The replay cache answers like its definition: an id is found, with its
// latest grant, exactly while that grant is among the last 1024, over seeded
// random sequences of fresh and repeated ids (index rebuilds, stale slots,
// retired entries).
func TestReplayCacheAgreesWithTheLast1024Grants(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 3))
		r := replayCache{seed: maphash.MakeSeed()}
		latest := map[string]uint64{} // id -> number of its latest grant
		pool := 100 + rng.IntN(5000)
		for n := uint64(0); n < 20_000; n++ {
			id := "q" + strconv.Itoa(rng.IntN(pool))
			pos, h := r.lookup(id)
			m, seen := latest[id]
			want := seen && n-m <= 1024
			if (pos >= 0) != want {
				t.Fatalf("seed %d grant %d: lookup(%s) = %d, want found %v (last granted as %d)", seed, n, id, pos, want, m)
			}
			if pos >= 0 && r.ring[pos].fence != m+1 {
				t.Fatalf("seed %d grant %d: %s found with fence %d, want %d", seed, n, id, r.ring[pos].fence, m+1)
			}
			r.add(id, "", "", n+1, 0, h, pos)
			latest[id] = n
			if r.live > 1024 || 4*r.used > 3*len(r.index) {
				t.Fatalf("seed %d: %d live, %d of %d slots used", seed, r.live, r.used, len(r.index))
			}
		}
	}
}

// A full cache adds grants without allocating: the index is rebuilt in
// place.
func TestReplayCacheAddsWithoutAllocating(t *testing.T) {
	r := replayCache{seed: maphash.MakeSeed()}
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = "q" + strconv.Itoa(i)
	}
	n := 0
	add := func() {
		id := ids[n%len(ids)]
		n++
		pos, h := r.lookup(id)
		r.add(id, "", "", uint64(n), 0, h, pos)
	}
	for range 3 * 1024 {
		add()
	}
	if a := testing.AllocsPerRun(10_000, add); a != 0 {
		t.Fatalf("%v allocations per grant", a)
	}
}
