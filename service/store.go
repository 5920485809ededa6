package service

import (
	"context"
	"errors"
	"math"
	"strconv"

	"github.com/go-json-experiment/json"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Store keeps the entry of every resource and makes changes durable. The
// Service hands it, for each call, a decision function to run inside one
// transaction on one resource's entry (Update); the store runs it against
// what it holds (Local: the entry in memory, owned by this process; a
// shared database: the resource's locked row), makes what it returns
// durable, and only then returns, so the Service publishes nothing that is
// not durable.
type Store interface {
	// Update runs fn on resource's entry and stores what fn puts in the
	// Txn before it returns: durably if fn asked for it (Txn.Put). fn may
	// be run more than once (when the fence counter moved under it) and
	// must decide from the Txn alone. An error of fn is returned as it is
	// and nothing is stored.
	Update(ctx context.Context, resource string, fn func(*Txn) error) error
	// Sweep deletes what no longer means anything at the store's current
	// reading: lease records that have expired and releases older than
	// one TTL. It returns how many it deleted. An expired lease record
	// leaves its fence behind as the entry's LastFence.
	Sweep(ctx context.Context) (int, error)
	// Watch asks the store to call fn whenever resource's entry may have
	// been changed other than through this Store value's own Update: a
	// grant, renewal or release decided by another coordinator process
	// that shares the store (a database whose NOTIFY reports a commit).
	// The Service watches only the resources that have waiting calls
	// (acquisitions and observers) and, on each call of fn, decides again
	// through Update: a release elsewhere hands the resource to the first
	// waiter here. So fn may be called late, spuriously, or once for
	// several changes, but a change must not go unreported: a store that
	// cannot deliver its reports for a while (a dropped LISTEN
	// connection) calls fn for every watched resource when it knows it
	// may have missed some, and periodically until it can deliver them
	// again. Expiry is not a change: the Service arms its own timer for
	// the expiry it read. fn must not block and must not call the store;
	// it may be called from any goroutine. stop ends the watch: once it
	// returns, fn is not called again. A store no one else changes
	// (Local: its entries are this process's) never calls fn.
	Watch(resource string, fn func()) (stop func())
}

// storeAs returns s, or the Store it wraps (a Store with an Unwrap()
// Store method, such as a wrapper that logs), as a T: for the optional
// interfaces (Lister, EventSharer, ExpiryReporter, Readier).
func storeAs[T any](s Store) (T, bool) {
	for s != nil {
		if t, ok := s.(T); ok {
			return t, true
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}

// BatchUpdater is a Store that decides the calls of several resources
// together (pgstore: in one transaction, one round trip to the database):
// the Service decides the renewals of a batch (POST /v1/renewals) through
// it when its store is one, and through Update otherwise.
type BatchUpdater interface {
	// UpdateEach runs each of fns on the entry of the resource at the
	// same index, each as Update runs it and on its own: errs[i] is what
	// Update(ctx, resources[i], fns[i]) would return, and nothing one of
	// them does (its fn's error, a refusal, an entry another process
	// changed) changes another's decision or its answer. The resources
	// are distinct. A store may decide any of them through Update.
	UpdateEach(ctx context.Context, resources []string, fns []func(*Txn) error) (errs []error)
}

// Lister is a Store that lists its live lease records (POST /v1/list).
type Lister interface {
	// List returns the lease records live at the store's reading now,
	// under prefix, whose resources come after after ("" from the first),
	// in byte order of resource, at most limit; next is the resource to
	// continue after, "" when none follows. A page may hold fewer than
	// limit with a next. A record live throughout a listing paged with
	// next is returned exactly once. Its cost is bounded by the page.
	List(ctx context.Context, prefix, after string, limit int) (live []Entry, now float64, next string, err error)
}

// Readier is implemented by a Store (or a Local's Persister) that can tell
// whether it can make changes now: what a server's readiness check
// (/readyz) asks.
type Readier interface {
	// Ready returns nil if changes can be made now, or why not: a full
	// disk, an unreachable database, a store that is closed. It changes
	// nothing, and answers within ctx (a check that needs the network
	// keeps its last answer for a moment rather than ask every time).
	Ready(ctx context.Context) error
}

// OwnerCounter counts a store's lease records by owner (Entry.Owner) for
// one decision (Txn.Owners): every store has one, and the Service refuses
// from its count. Local holds the decision to its Ledger (the places of
// owners' live records: in memory, or shared by stores that each hold a
// part of the records, the Worker's objects); pgstore counts in the
// database, under the owner's lock.
type OwnerCounter interface {
	// Owned returns how many lease records owner holds (its record of
	// the entry being decided on, if any, not counted: Entry.Replaces),
	// for a decision that refuses a new one at limit or more. A store
	// that only knows the owner is below limit may return any number
	// below it, and holds the decision to it: if, once fn has returned,
	// the entry fn put would take owner past a limit fn asked about
	// (another resource's decision took the last place meanwhile), the
	// store runs fn again.
	Owned(owner string, limit int) int
}

// OwnerCounterFunc is a function as an OwnerCounter.
type OwnerCounterFunc func(owner string, limit int) int

// Owned returns f(owner, limit).
func (f OwnerCounterFunc) Owned(owner string, limit int) int { return f(owner, limit) }

// Txn is one resource's entry inside a Store's transaction, and what the
// decision function makes of it.
type Txn struct {
	// Now is the reading the decision acts on, in the coordinator's clock
	// domain; for a given resource readings never go backwards.
	Now clock.Instant
	// Issued is the highest fence issued so far by the store's counter.
	Issued uint64
	// Entry is the resource's entry: its Resource is always set, the rest
	// is zero if the store has none. Leave it as it is; Put the next one.
	Entry Entry
	// Counts is what the store holds, and Limits its bounds: the Service
	// decides from them whether a call that would add a lease record
	// (Entry has none) is refused, and whether a release and a last fence
	// are remembered. Counts must be exact when Limits.Full would be true
	// and Entry has no lease record.
	Counts Counts
	Limits Limits
	// Owners counts the store's lease records by owner, for a token's
	// own limit (wire.Caller.MaxLeases). Nil: the store does not count by
	// owner, and the Service refuses the calls of a token with a limit.
	Owners OwnerCounter

	next        Entry
	write, sync bool
	floor       uint64
	// svc and committed: the decision whose events Committed publishes.
	svc       *Service
	committed *outcome
}

// keepLast reports that the store has room for one more last fence.
func (t *Txn) keepLast() bool { return t.Limits.KeepLast(t.Counts) }

// Committed tells the decision that what it put is durable. A store calls
// it once the write is durable and before any later decision on the
// resource can be made (Local: under the resource's lock), so that the
// decisions' events are published in the order they were made; a store
// that does not call it has the Service publish them once Update returns.
func (t *Txn) Committed() {
	if o := t.committed; o != nil {
		t.committed = nil
		t.svc.publishOutcome(o)
	}
}

// RaiseFloor says the decision ended the lease with fence f before its
// expiry (a revoke): a store that raises a fence table's floors at grants
// (pgstore's FenceTable) raises the resource's floor above f in the same
// transaction, so the gate refuses f from the commit on.
func (t *Txn) RaiseFloor(f uint64) { t.floor = max(t.floor, f) }

// Floor returns the fence RaiseFloor was given (the highest), or 0.
func (t *Txn) Floor() uint64 { return t.floor }

// Put makes next the resource's entry (an entry that holds nothing deletes
// it). With sync, Update returns only once next is durable; without, next
// is durable no later than the next synced change of any resource. A
// decision may Put more than once (a release, then the grant that hands
// the resource to a waiting caller): the last entry is stored, synced if
// any Put asked for it.
func (t *Txn) Put(next Entry, sync bool) {
	next.Resource = t.Entry.Resource
	t.next, t.write, t.sync = next, true, t.sync || sync
}

// current is the entry as the decision so far leaves it: the last one Put,
// or the stored one.
func (t *Txn) current() *Entry {
	if t.write {
		return &t.next
	}
	return &t.Entry
}

// Next returns what the decision function put (Put): the next entry and
// whether it asked for it to be durable before Update returns; ok is false
// if it put nothing. It is for stores outside this package, which read it
// once fn has returned.
func (t *Txn) Next() (next Entry, sync, ok bool) { return t.next, t.sync, t.write }

// Entry is what a store keeps of one resource: its lease record, if Fence
// is not zero (live, or expired and not yet swept), the releases of its
// last TTL, for their retries, and, once there is no lease record, the
// fence of the last lease (LastFence, what an inspection answers as
// lastFence). The secret of an acquisition is never stored, only its
// SHA-256.
//
// An entry with only a LastFence is kept after its releases are forgotten,
// so lastFence outlives the sweep; how many such entries a store keeps is
// its choice (Local: LocalConfig.FenceMemory). A store that forgets one
// answers lastFence 0 for that resource, as for one never held.
type Entry struct {
	Resource string `json:"-"`
	// Owner is the name of the token that acquired the lease record
	// (wire.Caller.Name), empty on a server without authentication: what
	// a token's lease records are counted by (its maxLeases).
	Owner      string    `json:"owner,omitzero"`
	HolderID   string    `json:"holderId,omitzero"`
	RequestID  string    `json:"requestId,omitzero"`
	Fence      uint64    `json:"fence,omitzero"`
	ExpiresAt  float64   `json:"expiresAt,omitzero"` // coordinator milliseconds
	SecretHash [32]byte  `json:"secretSha256,omitzero"`
	Released   []Release `json:"released,omitzero"`
	LastFence  uint64    `json:"lastFence,omitzero"`
	// Value is the lease record's value (an election's), at most
	// wire.MaxValueBytes; empty without a lease record.
	Value string `json:"value,omitzero"`
	// Revoked is the last lease of the resource that a revoke ended, kept
	// for one TTL so that its holder's renew, release or proclaim is
	// answered "revoked" rather than "expired".
	Revoked Revocation `json:"revoked,omitzero"`
}

// Revocation is a lease ended by a revoke (Entry.Revoked); the zero value
// is none.
type Revocation struct {
	HolderID string  `json:"holderId"`
	Fence    uint64  `json:"fence"`
	At       float64 `json:"at"` // coordinator milliseconds
}

// revokedNow returns the revocation of e that is still remembered at now
// (at most ttl old), or the zero one.
func (e *Entry) revokedNow(now, ttl float64) Revocation {
	if e.Revoked.Fence != 0 && now-e.Revoked.At <= ttl {
		return e.Revoked
	}
	return Revocation{}
}

// IsRevoked reports whether holder's lease with fence f is the one a
// revoke ended, remembered at now (coordinator milliseconds) for ttl.
func (e *Entry) IsRevoked(holder string, f uint64, now, ttl float64) bool {
	r := e.revokedNow(now, ttl)
	return r.Fence != 0 && r.Fence == f && r.HolderID == holder
}

// Release is a release that ended a lease, remembered for one TTL so that
// its retry (same request id and secret) is answered ok.
type Release struct {
	RequestID  string   `json:"requestId"`
	HolderID   string   `json:"holderId"`
	Fence      uint64   `json:"fence"`
	At         float64  `json:"at"` // coordinator milliseconds
	SecretHash [32]byte `json:"secretSha256"`
}

// MaxReleases bounds the releases an entry remembers: the newest.
const MaxReleases = 4

func (e *Entry) empty() bool {
	return e.Fence == 0 && len(e.Released) == 0 && e.LastFence == 0 && e.Revoked.Fence == 0
}

// last is the fence of the entry's last lease: its lease record's, the one
// it remembers, or (for a store that keeps no LastFence) the highest of its
// releases'.
func (e *Entry) last() uint64 {
	if e.Fence != 0 {
		return e.Fence
	}
	last := e.LastFence
	for _, r := range e.Released {
		last = max(last, r.Fence)
	}
	return last
}

// cleared is e without its lease record (nor its owner), remembering its
// fence if keep.
func (e *Entry) cleared(keep bool) Entry {
	c := Entry{Resource: e.Resource, Released: e.Released, Revoked: e.Revoked}
	if keep {
		c.LastFence = e.last()
	}
	return c
}

// state is what the rules know of e, with the counter at issued.
func (e *Entry) state(issued uint64) lease.State {
	return lease.State{Held: e.Fence != 0, HolderID: e.HolderID, Fence: e.Fence, ExpiresAt: e.ExpiresAt, Issued: issued}
}

// EncodeEntry is the stored form of e (JSON, without the resource, which
// is the key), for stores that keep entries as bytes.
func EncodeEntry(e Entry) ([]byte, error) { return json.Marshal(e) }

// DecodeEntry reads what EncodeEntry wrote for resource, strictly: unknown
// or repeated members, wrong types and invalid UTF-8 are refused with an
// error that wraps ErrInconsistent. The entry's values are checked by
// CheckEntry.
func DecodeEntry(resource string, data []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(data, &e, json.RejectUnknownMembers(true)); err != nil {
		return Entry{}, inconsistent("the entry of " + quote(resource) + " is damaged: " + err.Error())
	}
	e.Resource = resource
	return e, nil
}

// ErrInconsistent is wrapped by the error a store or the Service returns
// for stored state that contradicts itself; such state is refused, never
// repaired.
var ErrInconsistent = errors.New("service: the stored state is inconsistent")

// ErrUnavailable is wrapped by the error of a store that cannot read or
// write its state right now (a full disk, a failed write): nothing changed,
// and the call may be tried again.
var ErrUnavailable = errors.New("service: the state cannot be stored")

// ErrOutcomeUnknown is wrapped by the error of a store whose write may or
// may not have been made: the answer to the commit was lost (a shared
// database whose connection broke during COMMIT, and that could not be
// asked afterwards). Nothing is answered as done; the call may be tried
// again, and its retry is answered from what was stored (the same grant,
// the same release).
var ErrOutcomeUnknown = errors.New("service: the outcome of the write is unknown")

func inconsistent(why string) error { return errors.Join(ErrInconsistent, errors.New("service: "+why)) }

// CheckEntry checks one stored entry against the fence mark (no stored
// fence is above it): a lease record has a holder, a request id, a fence
// from 1 to the mark, a finite expiry and a secret hash, and no LastFence;
// an entry without one holds a release or a LastFence (from 1 to the mark)
// and nothing else; every release has a request id, a holder, a fence from
// 1 to the mark, a finite time and a secret hash; at most MaxReleases.
func CheckEntry(e Entry, mark uint64) error {
	fenceOK := func(f uint64) bool { return f >= 1 && f <= mark }
	switch {
	case e.Resource == "":
		return inconsistent("an entry has no resource")
	case e.Fence != 0 && (e.HolderID == "" || e.RequestID == ""):
		return inconsistent(entryAt(e.Resource) + " has no holder or request id")
	case e.Fence != 0 && !fenceOK(e.Fence):
		return inconsistent(entryAt(e.Resource) + " has fence " + strconv.FormatUint(e.Fence, 10) + ", above the fence mark " + strconv.FormatUint(mark, 10))
	case e.Fence != 0 && (!finite(e.ExpiresAt) || e.SecretHash == [32]byte{}):
		return inconsistent(entryAt(e.Resource) + " has a non-finite expiry or no secret hash")
	case e.Fence == 0 && (e.HolderID != "" || e.RequestID != "" || e.ExpiresAt != 0 || e.SecretHash != [32]byte{} || e.Owner != "" || e.Value != ""):
		return inconsistent(entryAt(e.Resource) + " has a holder but no fence")
	case e.Fence != 0 && e.LastFence != 0:
		return inconsistent(entryAt(e.Resource) + " has a lease record and a last fence")
	case e.LastFence > mark:
		return inconsistent(entryAt(e.Resource) + " has last fence " + strconv.FormatUint(e.LastFence, 10) + ", above the fence mark " + strconv.FormatUint(mark, 10))
	case e.empty():
		return inconsistent(entryAt(e.Resource) + " holds nothing")
	case len(e.Released) > MaxReleases:
		return inconsistent(entryAt(e.Resource) + " holds " + strconv.Itoa(len(e.Released)) + " releases")
	case len(e.Value) > maxStoredValue:
		return inconsistent(entryAt(e.Resource) + " has a value of " + strconv.Itoa(len(e.Value)) + " bytes")
	case e.Revoked != Revocation{} && (e.Revoked.HolderID == "" || !fenceOK(e.Revoked.Fence) || !finite(e.Revoked.At)):
		return inconsistent(entryAt(e.Resource) + " has a damaged revocation (fence " + strconv.FormatUint(e.Revoked.Fence, 10) + ")")
	}
	for _, r := range e.Released {
		if r.RequestID == "" || r.HolderID == "" || !fenceOK(r.Fence) || !finite(r.At) || r.SecretHash == [32]byte{} {
			return inconsistent(entryAt(e.Resource) + " has a damaged release (" + quote(r.RequestID) + ", fence " + strconv.FormatUint(r.Fence, 10) + ")")
		}
	}
	return nil
}

// checkTimes refuses an entry with an instant more than one TTL after now:
// an instant from the future (the clock was set back while the state was
// stored, or the state was edited).
func checkTimes(e Entry, now, ttl float64) error {
	last := max(e.ExpiresAt, e.Revoked.At)
	for _, r := range e.Released {
		last = max(last, r.At)
	}
	if last > now+ttl {
		return inconsistent("the entry of " + quote(e.Resource) + " has the instant " + strconv.FormatFloat(last, 'f', -1, 64) +
			", more than the TTL after the clock's reading " + strconv.FormatFloat(now, 'f', -1, 64) +
			": an instant from the future (was the clock set back, or the state edited?)")
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// quote quotes s, cut to a length that is safe to put in a message.
func quote(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

// entryAt names the entry of resource in a message.
func entryAt(resource string) string { return "the entry of " + quote(resource) }
