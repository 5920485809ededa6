package lease

import "hash/maphash"

// replayCache is the coordinator's memory of its last ReplayCacheSize
// acquire grants, by request id. Grant number n (0, 1, ...) sits in
// ring[n%ReplayCacheSize] until grant n+ReplayCacheSize replaces it. The
// ring grows to ReplayCacheSize on demand, so a coordinator per resource
// stays small.
//
// The index is an open-addressing hash table with linear probing over the
// ring positions. A slot is 0 when empty, else the low 16 bits of the
// entry's hash (which include its home slot: the index never has more than
// 2^16 slots) above its ring position plus one, so probing reads only the
// index, and rebuilding never hashes a request id again.
//
// Nothing is deleted from the index. A slot goes stale when its entry is
// evicted (its ring position now holds a newer grant) or retired (its
// request id was granted again, and the newer grant took over the id):
// lookups skip a stale slot, and an insertion reuses the first stale slot on
// its probe run. The index is rebuilt from the ring when the used slots, live
// or stale, would pass 3/4 of it; live entries fill at most a quarter, so a
// rebuild comes at most once per ReplayCacheSize/2 grants and costs about
// one insertion per grant.
type replayCache struct {
	seed   maphash.Seed
	ring   []replayEntry
	grants uint64 // grants added so far
	index  []uint32
	used   int // slots of index that are not empty
	live   int // entries of ring that are not retired
}

// replayEntry is one acquire grant. TTL and the clock domain are the
// coordinator's and are not repeated here.
type replayEntry struct {
	requestID string
	resource  string
	holder    string
	fence     uint64
	expiresAt float64 // the grant's CoordinatorExpiresAt, in milliseconds
	tag       uint16  // the low bits of the request id's hash
	retired   bool    // its request id was granted again
}

// lookup returns the ring position of the cached grant for id, or -1, and
// id's hash for a following add.
func (r *replayCache) lookup(id string) (int, uint64) {
	h := maphash.String(r.seed, id)
	if len(r.index) == 0 {
		return -1, h
	}
	mask := uint64(len(r.index) - 1)
	tag := uint32(uint16(h))
	for i := h & mask; ; i = (i + 1) & mask {
		v := r.index[i]
		if v == 0 {
			return -1, h
		}
		if v>>16 == tag {
			pos := int(v&0xffff) - 1
			if e := &r.ring[pos]; !e.retired && e.tag == uint16(tag) && e.requestID == id {
				return pos, h
			}
		}
	}
}

// stale reports whether index value v no longer stands for its ring entry.
func (r *replayCache) stale(v uint32) bool {
	e := &r.ring[int(v&0xffff)-1]
	return e.retired || uint32(e.tag) != v>>16
}

// add records the newest acquire grant, evicting the oldest of the last
// ReplayCacheSize, and returns its ring position. h is the hash of its
// request id (from lookup); prev is the position of a cached grant with the
// same request id (from lookup), or -1: that entry is retired so the id now
// finds the new one.
func (r *replayCache) add(requestID, resource, holder string, fence uint64, expiresAt float64, h uint64, prev int) int32 {
	if prev >= 0 {
		r.ring[prev].retired = true
		r.live--
	}
	pos := int(r.grants % ReplayCacheSize)
	if len(r.ring) < ReplayCacheSize {
		r.ring = append(r.ring, replayEntry{})
	} else if !r.ring[pos].retired {
		r.live--
	}
	// Field by field: a replayEntry built and then copied into the ring
	// costs a copy that stalls on the stores that just built it.
	e := &r.ring[pos]
	e.requestID, e.resource, e.holder = requestID, resource, holder
	e.fence, e.expiresAt, e.tag, e.retired = fence, expiresAt, uint16(h), false
	r.grants++
	r.live++
	if 4*(r.used+1) > 3*len(r.index) {
		r.rebuild()
	} else {
		r.insert(h, pos)
	}
	return int32(pos)
}

// insert puts ring position pos, whose hash is h, in the first empty or stale
// slot of its probe run.
func (r *replayCache) insert(h uint64, pos int) {
	mask := uint64(len(r.index) - 1)
	i := h & mask
	for {
		v := r.index[i]
		if v == 0 {
			r.used++
			break
		}
		if r.stale(v) {
			break
		}
		i = (i + 1) & mask
	}
	r.index[i] = uint32(uint16(h))<<16 | uint32(pos+1)
}

// rebuild refills the index, four times the live entries or more, from the
// ring's live entries. An index of the right size is reused, so a full cache
// rebuilds without allocating.
func (r *replayCache) rebuild() {
	n := 16
	for n < 4*r.live {
		n *= 2
	}
	if len(r.index) == n {
		clear(r.index)
	} else {
		r.index = make([]uint32, n)
	}
	r.used = 0
	mask := uint32(n - 1)
	for pos := range r.ring {
		e := &r.ring[pos]
		if e.retired {
			continue
		}
		i := uint32(e.tag) & mask
		for r.index[i] != 0 {
			i = (i + 1) & mask
		}
		r.index[i] = uint32(e.tag)<<16 | uint32(pos+1)
		r.used++
	}
}

// idOf returns the request id of the grant with fence f if ring position slot
// still holds it, else "".
func (r *replayCache) idOf(slot int32, f uint64) string {
	if slot < 0 || int(slot) >= len(r.ring) {
		return ""
	}
	e := &r.ring[slot]
	if e.retired || e.fence != f {
		return ""
	}
	return e.requestID
}
