package service

import (
	"context"
	"math"
	"sync"
)

// Ledger keeps the places of owners' lease records (Entry.Owner), for a
// token's limit (wire.Caller.MaxLeases): how a Local counts by owner. By
// default the places are in the Local's memory (rebuilt by Load from the
// stored records); stores that each hold a part of the records, such as a
// Worker's Durable Objects (one per resource), share one outside them
// (LocalConfig.Ledger). A place is held for one record: taken before the
// record is written, moved by its renewals, given back once its end is
// written; one never given back lapses at the record's expiry, so a
// count includes only the places of records live at its reading. The
// Local calls the Ledger while it holds the record's resource's lock.
type Ledger interface {
	// Reserve takes a place among owner's for the record e (its resource,
	// fence and expiry), before e is written, or reports that there is
	// none (ok false: the decision is made again, with Txn.Owners
	// reporting owner full). With limit above 0, there is a place when
	// fewer than limit of owner's places are live at now (the decision's
	// reading, in coordinator milliseconds), the place of e's resource not
	// counted: it is replaced (so an owner's own expired record never
	// counts against its limit: Entry.Replaces). With limit 0 (a record
	// of an owner whose limit the decision did not ask about, or one Load
	// read) the place is taken whatever the count; a ledger that keeps its
	// places outside the process, the Worker's, may take none for them. An
	// error refuses the call (ErrUnavailable): nothing is written.
	Reserve(ctx context.Context, owner string, limit int, e Entry, now float64) (ok bool, err error)
	// Held returns how many of owner's places are live at now, the place
	// of resource not counted, for a decision that refuses owner a new
	// record at limit or more (Txn.Owners): limit or more only when that
	// many are live, any number below it otherwise (Reserve holds the
	// decision to the limit). A ledger that can tell only by a Reserve
	// (the Worker's, a call to another object) returns 0.
	Held(owner, resource string, limit int, now float64) int
	// Renewed moves the place of the record e to its new expiry, taking
	// it again if it lapsed. An error refuses the renewal
	// (ErrUnavailable): nothing is written.
	Renewed(ctx context.Context, e Entry) error
	// Ended gives the place of the record e (of its fence) back, once the
	// record's end is written: a release, a grant over it, its sweep. It
	// does not fail: a place it could not give back lapses at e's expiry.
	Ended(ctx context.Context, e Entry)
}

// memLedger is the Ledger of a Local in memory: the places of each owner,
// by resource.
type memLedger struct {
	mu     sync.Mutex
	owners map[string]*ownerPlaces
	// settled reports that no decision on a resource is running: a lapsed
	// place is forgotten only then, as a decision that read the clock
	// before its record's expiry may be renewing it (Renewed comes after
	// the reading).
	settled func(resource string) bool
}

type ownerPlaces struct {
	places map[string]memPlace // by resource
	// soonest is at or before the earliest expiry among places: no place
	// lapses before it.
	soonest float64
}

type memPlace struct {
	fence uint64
	until float64 // the record's expiry
}

func newMemLedger(settled func(resource string) bool) *memLedger {
	return &memLedger{owners: map[string]*ownerPlaces{}, settled: settled}
}

var _ Ledger = (*memLedger)(nil)

func (m *memLedger) Reserve(_ context.Context, owner string, limit int, e Entry, now float64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.of(owner)
	if limit > 0 && o.held(e.Resource, limit, now, m.settled) >= limit {
		return false, nil
	}
	o.places[e.Resource] = memPlace{e.Fence, e.ExpiresAt}
	o.soonest = min(o.soonest, e.ExpiresAt)
	return true, nil
}

// of returns owner's places, made if it has none.
func (m *memLedger) of(owner string) *ownerPlaces {
	o := m.owners[owner]
	if o == nil {
		o = &ownerPlaces{places: map[string]memPlace{}, soonest: math.Inf(1)}
		m.owners[owner] = o
	}
	return o
}

func (m *memLedger) Held(owner, resource string, limit int, now float64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.owners[owner]; o != nil {
		return o.held(resource, limit, now, m.settled)
	}
	return 0
}

// held is how many places o holds for resources other than resource, the
// lapsed ones not counted once there are limit or more.
func (o *ownerPlaces) held(resource string, limit int, now float64, settled func(string) bool) int {
	n := o.others(resource)
	// Lapsed places may be in the way: forget them (only once one may
	// have lapsed), and count again.
	if n >= limit && now >= o.soonest && o.forgetLapsed(now, settled) > 0 {
		n = o.others(resource)
	}
	return n
}

// others is how many places o holds for resources other than resource.
func (o *ownerPlaces) others(resource string) int {
	n := len(o.places)
	if _, ok := o.places[resource]; ok {
		n--
	}
	return n
}

// forgetLapsed deletes the places lapsed at now whose resources are
// settled, sets soonest to the earliest expiry left, and returns how many
// it deleted.
func (o *ownerPlaces) forgetLapsed(now float64, settled func(string) bool) int {
	n := len(o.places)
	o.soonest = math.Inf(1)
	for r, p := range o.places {
		if now >= p.until && settled(r) {
			delete(o.places, r)
		} else {
			o.soonest = min(o.soonest, p.until)
		}
	}
	return n - len(o.places)
}

func (m *memLedger) Renewed(_ context.Context, e Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.of(e.Owner)
	o.places[e.Resource] = memPlace{e.Fence, e.ExpiresAt}
	o.soonest = min(o.soonest, e.ExpiresAt)
	return nil
}

func (m *memLedger) Ended(_ context.Context, e Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.owners[e.Owner]
	if o == nil {
		return
	}
	if p, ok := o.places[e.Resource]; ok && p.fence == e.Fence {
		delete(o.places, e.Resource)
		if len(o.places) == 0 {
			delete(m.owners, e.Owner)
		}
	}
}
