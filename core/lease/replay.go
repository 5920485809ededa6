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
// index, and eviction and growth never hash a request id again. It is kept
// at most half full. An entry leaves the
// index when it is evicted from the ring or when its request id is granted
// again (the newer grant takes over the id); entries that left are marked
// gone so their eviction leaves the index alone.
type replayCache struct {
	seed   maphash.Seed
	ring   []replayEntry
	grants uint64 // grants added so far
	index  []uint32
	count  int // entries in index
}

// replayEntry is one acquire grant. TTL and the clock domain are the
// coordinator's and are not repeated here.
type replayEntry struct {
	requestID string
	resource  string
	holder    string
	fence     uint64
	expiresAt float64 // the grant's CoordinatorExpiresAt, in milliseconds
	hash      uint64
	gone      bool // no longer in the index
}

// The index stays at most half full: 2*ReplayCacheSize slots suffice.
const minIndex = 16

// lookup returns the ring position of the cached grant for id, or -1, and
// id's hash for a following add.
func (r *replayCache) lookup(id string) (int, uint64) {
	h := maphash.String(r.seed, id)
	if r.count == 0 {
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
			if e := &r.ring[pos]; e.hash == h && e.requestID == id {
				return pos, h
			}
		}
	}
}

// add records e, the newest acquire grant, evicting the oldest of the last
// ReplayCacheSize, and returns its ring position. prev is the position of a
// cached grant with the same request id (from lookup), or -1: that entry
// leaves the index so the id now finds e.
func (r *replayCache) add(e replayEntry, prev int) int32 {
	if prev >= 0 {
		r.remove(prev)
	}
	pos := int(r.grants % ReplayCacheSize)
	e.gone = true // until insert puts it in the index (grow skips it)
	if len(r.ring) < ReplayCacheSize {
		r.ring = append(r.ring, e)
	} else {
		if !r.ring[pos].gone {
			r.remove(pos)
		}
		r.ring[pos] = e
	}
	r.grants++
	if 2*(r.count+1) > len(r.index) {
		r.grow()
	}
	r.insert(pos)
	return int32(pos)
}

// insert puts ring position pos into the index.
func (r *replayCache) insert(pos int) {
	mask := uint64(len(r.index) - 1)
	h := r.ring[pos].hash
	i := h & mask
	for r.index[i] != 0 {
		i = (i + 1) & mask
	}
	r.index[i] = uint32(uint16(h))<<16 | uint32(pos+1)
	r.ring[pos].gone = false
	r.count++
}

// remove takes ring position pos out of the index (it must be there) and
// marks it gone. The entries after it in its probe run move back so that
// every entry stays reachable from its home slot (deletion without
// tombstones).
func (r *replayCache) remove(pos int) {
	mask := uint64(len(r.index) - 1)
	i := r.ring[pos].hash & mask
	for int(r.index[i]&0xffff) != pos+1 {
		i = (i + 1) & mask
	}
	r.ring[pos].gone = true
	r.count--
	for j := i; ; {
		r.index[i] = 0
		for {
			j = (j + 1) & mask
			s := r.index[j]
			if s == 0 {
				return
			}
			home := uint64(s>>16) & mask
			// The entry at j may move to i unless its home lies
			// cyclically in (i, j].
			if i <= j {
				if i < home && home <= j {
					continue
				}
			} else if i < home || home <= j {
				continue
			}
			r.index[i] = s
			i = j
			break
		}
	}
}

// grow doubles the index (or makes the first one) and reinserts every entry.
func (r *replayCache) grow() {
	n := max(minIndex, 2*len(r.index))
	r.index = make([]uint32, n)
	r.count = 0
	for pos := range r.ring {
		if !r.ring[pos].gone {
			r.insert(pos)
		}
	}
}

// idOf returns the request id of the grant with fence f if ring position slot
// still holds it, else "".
func (r *replayCache) idOf(slot int32, f uint64) string {
	if slot < 0 || int(slot) >= len(r.ring) {
		return ""
	}
	e := &r.ring[slot]
	if e.gone || e.fence != f {
		return ""
	}
	return e.requestID
}
