package lease

import "hash/maphash"

// leaseTable maps each resource to the record of its current or last lease.
// It is an open-addressing hash table with linear probing, so that every
// operation hashes its resource once and finds, updates, inserts or deletes
// the record in place (a Go map takes two hashes to look a key up and then
// assign or delete it). tags[i] is 0 for an empty slot, else the low 32 bits
// of the resource's hash (never 0), whose low bits are the slot's home: a
// probe reads the tags and compares a resource only when its tag matches,
// and growing or deleting never hashes a resource again. The load is kept
// at most 3/4; deletion moves the rest of the probe run back instead of
// leaving tombstones.
type leaseTable struct {
	seed  maphash.Seed
	tags  []uint32
	recs  []held
	count int
}

// held is a resource's lease. slot is where the grant that made it sits in
// the replay cache's ring, if it still does (see replayCache.idOf).
type held struct {
	resource  string
	holder    string
	fence     uint64
	expiresAt float64 // coordinator millis
	slot      int32
}

// liveAt reports whether h is a lease at now.
func (h *held) liveAt(now float64) bool { return now < h.expiresAt }

const minTable = 16

func (t *leaseTable) tag(resource string) uint32 {
	if v := uint32(maphash.String(t.seed, resource)); v != 0 {
		return v
	}
	return 1
}

// find returns the slot of resource and true, or the empty slot where it
// would go (-1 if the table has no slots) and false.
func (t *leaseTable) find(resource string, tag uint32) (int, bool) {
	if len(t.tags) == 0 {
		return -1, false
	}
	mask := uint32(len(t.tags) - 1)
	for i := tag & mask; ; i = (i + 1) & mask {
		switch v := t.tags[i]; {
		case v == 0:
			return int(i), false
		case v == tag && t.recs[i].resource == resource:
			return int(i), true
		}
	}
}

// insert adds rec, whose resource is not in the table, and returns its slot.
// at is the empty slot find returned for it, or -1.
func (t *leaseTable) insert(at int, tag uint32, rec held) int {
	if 4*(t.count+1) > 3*len(t.tags) {
		t.resize(max(minTable, 2*len(t.tags)))
		at = -1
	}
	if at < 0 {
		at = t.empty(tag)
	}
	t.tags[at], t.recs[at] = tag, rec
	t.count++
	return at
}

// empty returns the first empty slot of tag's probe run.
func (t *leaseTable) empty(tag uint32) int {
	mask := uint32(len(t.tags) - 1)
	i := tag & mask
	for t.tags[i] != 0 {
		i = (i + 1) & mask
	}
	return int(i)
}

// remove empties slot i. The entries after it in its probe run move back
// so that every entry stays reachable from its home slot.
func (t *leaseTable) remove(i int) {
	mask := uint32(len(t.tags) - 1)
	hole := uint32(i)
	for j := hole; ; {
		j = (j + 1) & mask
		v := t.tags[j]
		if v == 0 {
			break
		}
		// The entry at j stays unless its home lies cyclically outside
		// (hole, j].
		home := v & mask
		if hole <= j {
			if hole < home && home <= j {
				continue
			}
		} else if hole < home || home <= j {
			continue
		}
		t.tags[hole], t.recs[hole] = v, t.recs[j]
		hole = j
	}
	t.tags[hole], t.recs[hole] = 0, held{}
	t.count--
}

// resize rebuilds the table with n slots (a power of two above the count).
func (t *leaseTable) resize(n int) {
	tags, recs := t.tags, t.recs
	t.tags, t.recs = make([]uint32, n), make([]held, n)
	for i, v := range tags {
		if v != 0 {
			j := t.empty(v)
			t.tags[j], t.recs[j] = v, recs[i]
		}
	}
}

// removeIf deletes every record for which over returns true. A shrunken
// table (at most an eighth full) is rebuilt at a quarter of its size.
func (t *leaseTable) removeIf(over func(*held) bool) {
	for i := 0; i < len(t.tags); {
		// remove moves later entries into slot i: look at it again.
		if t.tags[i] != 0 && over(&t.recs[i]) {
			t.remove(i)
			continue
		}
		i++
	}
	if len(t.tags) > minTable && 8*t.count <= len(t.tags) {
		t.resize(max(minTable, len(t.tags)/4))
	}
}
