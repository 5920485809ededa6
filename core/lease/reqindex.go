package lease

import "hash/maphash"

// reqIndex finds a client's request records by request id, so that
// beginning a request hashes its id once (the failed lookup finds the slot
// it goes in) and completing one hashes it once; forgetting a record does
// not hash at all. Open addressing with linear probing over 32-bit tags (the
// low bits of the id's hash, never 0; a record keeps its tag), at most 3/4
// full, and deletion moves the rest of the probe run back instead of leaving
// tombstones. It holds at most MaxPending + completedMemory records.
type reqIndex struct {
	seed  maphash.Seed
	tags  []uint32
	recs  []*reqRecord
	count int
}

func (x *reqIndex) tag(id string) uint32 { return tagOf(x.seed, id) }

// find returns the record of id, whose tag is tag, or nil and the slot where
// it would go (-1 if the index has no slots yet).
func (x *reqIndex) find(id string, tag uint32) (*reqRecord, int) {
	if len(x.tags) == 0 {
		return nil, -1
	}
	mask := uint32(len(x.tags) - 1)
	for i := tag & mask; ; i = (i + 1) & mask {
		switch v := x.tags[i]; {
		case v == 0:
			return nil, int(i)
		case v == tag && x.recs[i].id == id:
			return x.recs[i], int(i)
		}
	}
}

// insert adds r, whose id has tag and is not in the index. at is the slot
// find returned for it, or -1 (also when the index changed since).
func (x *reqIndex) insert(r *reqRecord, tag uint32, at int) {
	if 4*(x.count+1) > 3*len(x.tags) {
		x.resize(max(16, 2*len(x.tags)))
		at = -1
	}
	if at < 0 {
		at = emptySlot(x.tags, tag)
	}
	x.tags[at], x.recs[at] = tag, r
	r.tag = tag
	x.count++
}

// remove deletes r, which is in the index. The entries after it in its
// probe run move back so that every entry stays reachable from its home.
func (x *reqIndex) remove(r *reqRecord) {
	mask := uint32(len(x.tags) - 1)
	hole := r.tag & mask
	for x.recs[hole] != r {
		hole = (hole + 1) & mask
	}
	backShift(x.tags, x.recs, hole)
	x.count--
}

// resize rebuilds the index with n slots (a power of two above its count).
func (x *reqIndex) resize(n int) {
	tags, recs := x.tags, x.recs
	x.tags, x.recs = make([]uint32, n), make([]*reqRecord, n)
	for i, v := range tags {
		if v != 0 {
			j := emptySlot(x.tags, v)
			x.tags[j], x.recs[j] = v, recs[i]
		}
	}
}
