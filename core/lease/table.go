package lease

import "hash/maphash"

// leaseTable maps each resource to the record of its current or last lease,
// so that every operation hashes its resource once and finds, updates,
// inserts or deletes the record in place (a Go map takes two hashes to look
// a key up and then assign or delete it).
//
// A resource's tag is the low 32 bits of its hash (never 0). The table is a
// directory of sub-tables (extendible hashing): the top depth bits of a tag
// pick the sub-table, and no sub-table grows beyond maxSlots slots; a full
// one splits in two instead, so growing never copies more than one
// sub-table and the pause stays small however many leases are held. Each
// sub-table is open addressing with linear probing: tags[i] is 0 for an
// empty slot, else the tag of the record in recs[i], whose low bits are the
// slot's home. A probe reads the tags and compares a resource only when its
// tag matches; resizing, splitting and deleting never hash a resource
// again. The load is kept at most 3/4, and deletion moves the rest of the
// probe run back instead of leaving tombstones.
type leaseTable struct {
	seed   maphash.Seed
	dir    []*subTable // 1<<depth entries, or none before the first insert
	depth  uint
	tables []*subTable // every sub-table once, in no particular order
	count  int
}

type subTable struct {
	tags  []uint32
	recs  []held
	count int
	depth uint // the directory bits this sub-table owns
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

const minSlots = 16

// maxSlots bounds a sub-table (a variable so that tests can make splits
// frequent): 8192 slots of about 60 bytes.
var maxSlots = 8192

// ref is a slot of a sub-table.
type ref struct {
	st *subTable
	i  int
}

func (t *leaseTable) tag(resource string) uint32 { return tagOf(t.seed, resource) }

// tagOf is the tag of s: the low 32 bits of its hash, never 0 (0 marks an
// empty slot).
func tagOf(seed maphash.Seed, s string) uint32 {
	if v := uint32(maphash.String(seed, s)); v != 0 {
		return v
	}
	return 1
}

func (t *leaseTable) sub(tag uint32) *subTable {
	if t.depth == 0 {
		return t.dir[0]
	}
	return t.dir[tag>>(32-t.depth)]
}

// find returns the slot of resource and true, or the empty slot where it
// would go (st nil if the table has none) and false.
func (t *leaseTable) find(resource string, tag uint32) (ref, bool) {
	if len(t.dir) == 0 {
		return ref{}, false
	}
	st := t.sub(tag)
	mask := uint32(len(st.tags) - 1)
	for i := tag & mask; ; i = (i + 1) & mask {
		switch v := st.tags[i]; {
		case v == 0:
			return ref{st, int(i)}, false
		case v == tag && st.recs[i].resource == resource:
			return ref{st, int(i)}, true
		}
	}
}

// rec returns the record at r.
func (r ref) rec() *held { return &r.st.recs[r.i] }

// insert adds a record for a resource that is not in the table and returns
// it, zero but for its tag, for the caller to fill in. at is the empty slot
// find returned for it, or the zero ref.
func (t *leaseTable) insert(at ref, tag uint32) *held {
	if len(t.dir) == 0 {
		st := &subTable{tags: make([]uint32, minSlots), recs: make([]held, minSlots)}
		t.dir, t.tables = []*subTable{st}, []*subTable{st}
		at = ref{}
	}
	st := t.sub(tag)
	for 4*(st.count+1) > 3*len(st.tags) {
		if len(st.tags) < maxSlots || !t.split(st) {
			st.resize(2 * len(st.tags))
		}
		st, at = t.sub(tag), ref{}
	}
	i := at.i
	if at.st == nil {
		i = emptySlot(st.tags, tag)
	}
	st.tags[i] = tag
	st.count++
	t.count++
	return &st.recs[i]
}

// maxDepth bounds the directory at 2^maxDepth sub-tables.
const maxDepth = 24

// split replaces st by two sub-tables of the same size, each owning one more
// directory bit, doubling the directory first if st owns all of its bits.
// It does nothing and returns false when that would not separate st's
// records (they all agree on the next bit; a sub-table then grows past
// maxSlots instead) or the directory is at maxDepth.
func (t *leaseTable) split(st *subTable) bool {
	bit := uint32(1) << (31 - st.depth)
	ones := 0
	for _, v := range st.tags {
		if v&bit != 0 {
			ones++
		}
	}
	if st.depth >= maxDepth || ones == 0 || ones == st.count {
		return false
	}
	if st.depth == t.depth {
		dir := make([]*subTable, 2*len(t.dir))
		for i, s := range t.dir {
			dir[2*i], dir[2*i+1] = s, s
		}
		t.dir = dir
		t.depth++
	}
	n := len(st.tags)
	lo := &subTable{tags: make([]uint32, n), recs: make([]held, n), depth: st.depth + 1}
	hi := &subTable{tags: make([]uint32, n), recs: make([]held, n), depth: st.depth + 1}
	for i, v := range st.tags {
		if v != 0 {
			to := lo
			if v&bit != 0 {
				to = hi
			}
			j := emptySlot(to.tags, v)
			to.tags[j], to.recs[j] = v, st.recs[i]
			to.count++
		}
	}
	for i, s := range t.dir {
		if s == st {
			// The directory index's bit for the new depth, counted from
			// the top of the depth bits.
			if (uint(i)>>(t.depth-st.depth-1))&1 == 0 {
				t.dir[i] = lo
			} else {
				t.dir[i] = hi
			}
		}
	}
	for i, s := range t.tables {
		if s == st {
			t.tables[i] = lo
		}
	}
	t.tables = append(t.tables, hi)
	return true
}

// emptySlot returns the first empty slot of tag's probe run in tags.
func emptySlot(tags []uint32, tag uint32) int {
	mask := uint32(len(tags) - 1)
	i := tag & mask
	for tags[i] != 0 {
		i = (i + 1) & mask
	}
	return int(i)
}

// remove empties the slot r.
func (t *leaseTable) remove(r ref) {
	r.st.remove(r.i)
	t.count--
}

// remove empties slot i.
func (st *subTable) remove(i int) {
	backShift(st.tags, st.recs, uint32(i))
	st.count--
}

// backShift empties slot hole of a linear-probing table whose tags are 0
// for an empty slot and whose entry's home slot is its tag & (len-1). The
// entries after hole in its probe run move back so that every entry stays
// reachable from its home.
func backShift[T any](tags []uint32, recs []T, hole uint32) {
	mask := uint32(len(tags) - 1)
	for j := hole; ; {
		j = (j + 1) & mask
		v := tags[j]
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
		tags[hole], recs[hole] = v, recs[j]
		hole = j
	}
	var zero T
	tags[hole], recs[hole] = 0, zero
}

// resize rebuilds st with n slots (a power of two above its count).
func (st *subTable) resize(n int) {
	tags, recs := st.tags, st.recs
	st.tags, st.recs = make([]uint32, n), make([]held, n)
	for i, v := range tags {
		if v != 0 {
			j := emptySlot(st.tags, v)
			st.tags[j], st.recs[j] = v, recs[i]
		}
	}
}

// removeIf deletes every record of st for which over returns true, and
// shrinks st to a quarter if that leaves it at most an eighth full. It
// returns how many it deleted.
func (st *subTable) removeIf(over func(*held) bool) int {
	n := 0
	for i := 0; i < len(st.tags); {
		// remove moves later entries into slot i: look at it again.
		if st.tags[i] != 0 && over(&st.recs[i]) {
			st.remove(i)
			n++
			continue
		}
		i++
	}
	if len(st.tags) > minSlots && 8*st.count <= len(st.tags) {
		st.resize(max(minSlots, len(st.tags)/4))
	}
	return n
}

// each calls f with every record.
func (t *leaseTable) each(f func(*held)) {
	for _, st := range t.tables {
		for i, v := range st.tags {
			if v != 0 {
				f(&st.recs[i])
			}
		}
	}
}
