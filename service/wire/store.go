package wire

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
)

// Record is the stored form of one lease: everything a restarted Service
// needs to hold it again and to check the holder's secret. A resource has
// at most one record; it is deleted once the lease is released or has
// expired.
type Record struct {
	Resource  string
	HolderID  string
	RequestID string
	Fence     uint64
	// ExpiresAt is the end of the lease in the coordinator's clock domain
	// (milliseconds).
	ExpiresAt float64
	// SecretHash is the SHA-256 of the secret the holder chose at
	// acquisition. The secret itself is never stored.
	SecretHash [32]byte
}

// Release is a finished release as a Store keeps it for one TTL, so that a
// retry of it (same request id and secret) is answered ok, after a restart
// too.
type Release struct {
	RequestID  string
	Resource   string
	HolderID   string
	Fence      uint64
	SecretHash [32]byte
	// At is the coordinator's reading when the lease was released.
	At float64
}

// Change is what one call (or one sweep) changes, applied atomically: the
// fence high-water mark rises to at least IssuedFence, then Puts are
// written and Deletes removed, Released written and Forget removed, in that
// order.
type Change struct {
	// IssuedFence is the highest fence the service has issued so far. A
	// store keeps the maximum of every IssuedFence it was given, in the
	// same transaction as the records, so a fence in a record is never
	// above the stored mark.
	IssuedFence uint64
	Put         []Record
	Delete      []string
	Released    []Release
	// Forget lists request ids of releases to drop, each only if it was
	// released at or before ForgetBefore.
	Forget       []string
	ForgetBefore float64
}

// Stored is everything a Store holds, as Load returns it.
type Stored struct {
	// IssuedFence is the fence high-water mark: every fence the service
	// ever issued, for any resource, is at most this.
	IssuedFence uint64
	Records     []Record
	Released    []Release
}

// Store keeps a Service's state. A Service reads all of it once (Load),
// then reads single records (Get) and applies changes (Apply); Apply must
// make the change durable before it returns, because the service answers
// only after it succeeded. A failed Apply must change nothing.
type Store interface {
	// Load returns everything stored, or an error if what is stored is
	// inconsistent (see CheckStored). It is called once, before any other
	// method.
	Load(ctx context.Context) (Stored, error)
	// Get returns the record of resource, or ok false if there is none.
	Get(ctx context.Context, resource string) (rec Record, ok bool, err error)
	// Apply makes c durable, all of it or nothing.
	Apply(ctx context.Context, c Change) error
	// Expired returns up to max resources whose record expires at or
	// before millis.
	Expired(ctx context.Context, millis float64, max int) ([]string, error)
	// Forgettable returns up to max request ids of releases made at or
	// before millis.
	Forgettable(ctx context.Context, millis float64, max int) ([]string, error)
}

// LaterStore is a Store that can also take a change without waiting for it
// to be durable. The Service gives it releases (see docs/service.md,
// Durable state): a release may be answered before it is written, because
// losing it in a crash only leaves the lease held by the same holder until
// its TTL ends, while grants and renewals still wait for Apply.
type LaterStore interface {
	Store
	// ApplyLater queues c, which holds no Put (it only deletes records and
	// adds or forgets releases). From its return, Get no longer finds the
	// records c deletes. c is made durable before, or in the same
	// transaction as, every change given to Apply or ApplyLater after it:
	// no later change is made durable without it. A crash before c is
	// written loses c (and only c and the changes after it).
	ApplyLater(c Change) error
}

// ErrInconsistent is wrapped by the error a Store or Service returns for
// stored state that contradicts itself; such state is refused, never
// repaired.
var ErrInconsistent = errors.New("wire: the stored state is inconsistent")

// CheckStored checks what a Store loaded: every record names a resource
// once, has a holder, a request id and a fence from 1 to the high-water
// mark, and a finite expiry. Instants are checked against the clock by the
// Service.
func CheckStored(st Stored) error {
	seen := make(map[string]bool, len(st.Records))
	for _, r := range st.Records {
		if err := checkRecord(r, st.IssuedFence); err != nil {
			return err
		}
		if seen[r.Resource] {
			return inconsistent("resource " + quoteShort(r.Resource) + " has two records")
		}
		seen[r.Resource] = true
	}
	ids := make(map[string]bool, len(st.Released))
	for _, r := range st.Released {
		if err := checkRelease(r, st.IssuedFence); err != nil {
			return err
		}
		if ids[r.RequestID] {
			return inconsistent("request id " + quoteShort(r.RequestID) + " has two releases")
		}
		ids[r.RequestID] = true
	}
	return nil
}

func checkRelease(r Release, issued uint64) error {
	at := "release " + quoteShort(r.RequestID)
	switch {
	case r.RequestID == "":
		return inconsistent("a release has no request id")
	case r.Resource == "" || r.HolderID == "":
		return inconsistent(at + " has no resource or holder")
	case r.Fence == 0 || r.Fence > issued:
		return inconsistent(at + " has fence " + strconv.FormatUint(r.Fence, 10) + ", not from 1 to the high-water mark " +
			strconv.FormatUint(issued, 10))
	case !finite(r.At):
		return inconsistent(at + " has a non-finite time")
	case r.SecretHash == [32]byte{}:
		return inconsistent(at + " has no secret hash")
	}
	return nil
}

func checkRecord(r Record, issued uint64) error {
	at := "record of " + quoteShort(r.Resource)
	switch {
	case r.Resource == "":
		return inconsistent("a record has no resource")
	case r.HolderID == "":
		return inconsistent(at + " has no holder")
	case r.RequestID == "":
		return inconsistent(at + " has no request id")
	case r.Fence == 0:
		return inconsistent(at + " has fence 0")
	case r.Fence > issued:
		return inconsistent(at + " has fence " + strconv.FormatUint(r.Fence, 10) +
			", above the high-water mark " + strconv.FormatUint(issued, 10))
	case !finite(r.ExpiresAt):
		return inconsistent(at + " has a non-finite expiry")
	case r.SecretHash == [32]byte{}:
		return inconsistent(at + " has no secret hash")
	}
	return nil
}

func inconsistent(why string) error {
	return errors.Join(ErrInconsistent, errors.New("wire: "+why))
}

// MemoryStore is a Store in memory: nothing survives the process. It is
// what cmd/coordinator -memory uses, and what tests use.
type MemoryStore struct {
	mu     sync.Mutex
	issued uint64
	recs   map[string]Record
	rels   map[string]Release
	// Fail, if set, is called by Apply; an error it returns fails the
	// Apply and changes nothing (for tests of the failure path).
	Fail func(Change) error
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{recs: make(map[string]Record), rels: make(map[string]Release)}
}

var _ Store = (*MemoryStore)(nil)

// Load returns everything the store holds.
func (m *MemoryStore) Load(context.Context) (Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Stored{IssuedFence: m.issued}
	for _, r := range m.recs {
		st.Records = append(st.Records, r)
	}
	sort.Slice(st.Records, func(i, j int) bool { return st.Records[i].Resource < st.Records[j].Resource })
	for _, r := range m.rels {
		st.Released = append(st.Released, r)
	}
	sort.Slice(st.Released, func(i, j int) bool { return st.Released[i].RequestID < st.Released[j].RequestID })
	return st, CheckStored(st)
}

// Get returns the record of resource.
func (m *MemoryStore) Get(_ context.Context, resource string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[resource]
	return r, ok, nil
}

// Apply applies c.
func (m *MemoryStore) Apply(_ context.Context, c Change) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		if err := m.Fail(c); err != nil {
			return err
		}
	}
	m.issued = max(m.issued, c.IssuedFence)
	for _, r := range c.Put {
		m.recs[r.Resource] = r
	}
	for _, name := range c.Delete {
		delete(m.recs, name)
	}
	for _, r := range c.Released {
		m.rels[r.RequestID] = r
	}
	for _, id := range c.Forget {
		if r, ok := m.rels[id]; ok && r.At <= c.ForgetBefore {
			delete(m.rels, id)
		}
	}
	if len(m.rels) == 0 {
		m.rels = make(map[string]Release) // a Go map never shrinks
	}
	return nil
}

// Forgettable returns up to max request ids of releases made at or before
// millis.
func (m *MemoryStore) Forgettable(_ context.Context, millis float64, max int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return dueKeys(m.rels, func(r Release) bool { return r.At <= millis }, max), nil
}

// Expired returns up to max resources whose record expires at or before
// millis.
func (m *MemoryStore) Expired(_ context.Context, millis float64, max int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return dueKeys(m.recs, func(r Record) bool { return r.ExpiresAt <= millis }, max), nil
}

// dueKeys returns the keys of m whose value is due, at most max of them.
func dueKeys[V any](m map[string]V, due func(V) bool, max int) []string {
	var out []string
	for k, v := range m {
		if len(out) >= max {
			break
		}
		if due(v) {
			out = append(out, k)
		}
	}
	return out
}

// Len returns the number of records.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}
