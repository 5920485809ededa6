// Package service is the lease coordinator as a service: one state machine
// (Service) that owns every decision, and the Store it keeps its state in.
//
// For each call the Service hands its Store a decision function for the
// call's resource (Store.Update). The store runs it in one transaction on
// the resource's entry; the function checks the holder's secret, decides
// through lease.Rules (the only place the rules live) and puts the next
// entry; the store makes it durable, and only then is the answer returned.
// Nothing is read back to learn what was decided, and a failed write leaves
// nothing to undo. Local is the store most callers want: every entry in
// this process's memory, durable through a Persister (package pebblestore,
// a Durable Object's storage, or none). The HTTP protocol and the Go client
// are package wire; httpapi.NewHandler(service) is the server.
package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// Config configures a Service.
type Config struct {
	// TTL is the lease length. Required, positive; the same as the
	// store's.
	TTL time.Duration
	// Store keeps the state. Required.
	Store Store
	// MaxWait bounds how long a call may wait (Message.Wait); a longer
	// wait is refused with invalid_value. Zero means wire.DefaultMaxWait.
	MaxWait time.Duration
	// MaxWaiters bounds the calls waiting at once (acquisitions and
	// observers) plus the places kept for a retry (KeepPlace); a call
	// that would wait beyond it is refused with 503 too_many_waiters.
	// Zero means DefaultMaxWaiters.
	MaxWaiters int
	// KeepPlace is how long a waiting acquisition's place in its queue is
	// kept once no call is attached to it (the client went away, or its
	// wait ran out), for a retry with the same request id, which takes
	// the place back. A place with no call attached when the resource is
	// handed over is passed over and forgotten. Zero means
	// DefaultKeepPlace.
	KeepPlace time.Duration
	// AfterFunc schedules the Service's wake-ups: a lease's expiry while
	// calls wait on its resource, the end of a wait, the end of a kept
	// place. It must follow the clock of the store's readings: nil means
	// clock.RealAfterFunc, right for WallClock; with a clock.Manual, pass
	// its AfterFunc.
	AfterFunc clock.AfterFunc
	// WatchBuffer bounds the events queued for one watcher (Watch): a
	// watcher that falls that far behind gets its overflow frame and is
	// closed. WatchHistory bounds the events kept for resumes;
	// MaxWatchers the watchers at once, MaxWatchersPerToken those of one
	// token. Zero means the Default of each.
	WatchBuffer, WatchHistory, MaxWatchers, MaxWatchersPerToken int
}

// Defaults of Config.
const (
	DefaultMaxWaiters = 10_000
	DefaultKeepPlace  = 5 * time.Second
)

// Service is the coordinator behind the HTTP handler: it answers decoded
// calls (it is a httpapi.Backend). It is safe for concurrent use.
type Service struct {
	ttl   time.Duration
	ttlMs float64
	store Store

	maxWait    time.Duration
	maxWaiters int
	keepPlace  time.Duration
	after      clock.AfterFunc
	w          waits
	h          hub
	shareOnce  sync.Once
	stats      struct{ grants, renewals, releases atomic.Uint64 }
}

// Stats counts what the Service decided and the store made durable.
type Stats struct {
	// Grants counts new leases (acquisitions granted with a new fence,
	// waiting ones included; not the retries answered with a grant that
	// already existed), Renewals the renewals granted, Releases the leases
	// ended by their holder (or by the coordinator, for a waiter whose
	// client went away before its grant was answered).
	Grants, Renewals, Releases uint64
}

// Stats returns the Service's counts since it was made.
func (s *Service) Stats() Stats {
	return Stats{Grants: s.stats.grants.Load(), Renewals: s.stats.renewals.Load(), Releases: s.stats.releases.Load()}
}

// Ready reports why the Service cannot make changes now (its store's
// Ready, for a store that is a Readier), or nil.
func (s *Service) Ready(ctx context.Context) error {
	if r, ok := s.store.(Readier); ok {
		return r.Ready(ctx)
	}
	return nil
}

// tally counts what a durable decision did.
func (s *Service) tally(o *outcome) {
	b, f := &o.before, &o.final
	if f.Fence != b.Fence {
		if f.Fence != 0 {
			s.stats.grants.Add(1)
		}
		if b.Fence != 0 && o.now < b.ExpiresAt {
			s.stats.releases.Add(1)
		}
	} else if f.Fence != 0 && f.ExpiresAt != b.ExpiresAt {
		s.stats.renewals.Add(1)
	}
}

// New returns a service.
func New(cfg Config) (*Service, error) {
	if cfg.TTL <= 0 {
		return nil, errors.New("service: Config.TTL must be positive, got " + cfg.TTL.String())
	}
	if cfg.Store == nil {
		return nil, errors.New("service: Config.Store is required")
	}
	if cfg.MaxWait < 0 || cfg.MaxWaiters < 0 || cfg.KeepPlace < 0 || cfg.WatchBuffer < 0 || cfg.WatchHistory < 0 ||
		cfg.MaxWatchers < 0 || cfg.MaxWatchersPerToken < 0 {
		return nil, errors.New("service: Config.MaxWait, MaxWaiters, KeepPlace and the watch limits must not be negative")
	}
	s := &Service{ttl: cfg.TTL, ttlMs: clock.Millis(cfg.TTL), store: cfg.Store, maxWait: cfg.MaxWait,
		maxWaiters: cfg.MaxWaiters, keepPlace: cfg.KeepPlace, after: cfg.AfterFunc}
	if s.maxWait == 0 {
		s.maxWait = wire.DefaultMaxWait
	}
	if s.maxWaiters == 0 {
		s.maxWaiters = DefaultMaxWaiters
	}
	if s.keepPlace == 0 {
		s.keepPlace = DefaultKeepPlace
	}
	if s.after == nil {
		s.after = clock.RealAfterFunc
	}
	s.w.init()
	s.h.init(cfg.WatchBuffer, cfg.WatchHistory, cfg.MaxWatchers, cfg.MaxWatchersPerToken)
	if sh, ok := storeAs[EventSharer](cfg.Store); ok {
		s.h.share = sh.SendEvents()
	}
	if r, ok := storeAs[ExpiryReporter](cfg.Store); ok {
		r.ReportExpired(s.expiredBySweep)
	}
	return s, nil
}

// WallClock returns a guarded clock in domain that reads Unix milliseconds
// at the moment it was created and then advances with the monotonic clock,
// so it never steps backwards while the process runs and its readings stay
// comparable with those of a previous run of the same host.
func WallClock(domain string) (*clock.Guarded, error) {
	start := time.Now()
	base := float64(start.UnixMilli())
	return clock.New(domain, func() float64 { return base + clock.Millis(time.Since(start)) })
}

// Sweep deletes what the store keeps of leases that are over and releases
// older than a TTL, and returns how many it deleted. Run it periodically
// until it returns zero (cmd/coordinator does, every half TTL).
func (s *Service) Sweep(ctx context.Context) (int, error) { return s.store.Sweep(ctx) }

// secretHash is the SHA-256 of a call's secret, as records keep it. A
// secret of at most wire.MaxSecretBytes (every one that came through the
// wire) is hashed from a copy on the stack, not from a []byte made for it.
func secretHash(secret string) [sha256.Size]byte {
	var buf [wire.MaxSecretBytes]byte
	if len(secret) <= len(buf) {
		return sha256.Sum256(buf[:copy(buf[:], secret)])
	}
	return sha256.Sum256([]byte(secret))
}

// Call answers one decoded call. A call with a Wait may take that long:
// an acquisition of a held resource waits in the resource's queue until it
// is handed the lease or the wait ends; an inspection with After waits for
// the fence to change. A waiting call ends early when ctx does (the client
// went away).
func (s *Service) Call(ctx context.Context, m wire.Message) (wire.Reply, error) {
	if m.Wait < 0 || m.Wait > s.maxWait {
		return wire.Reply{}, refuse(wire.RefusedInvalidValue, "field \"waitMillis\" must be from 0 to "+
			strconv.FormatInt(s.maxWait.Milliseconds(), 10)+" (this coordinator's longest wait), got "+strconv.FormatInt(m.Wait.Milliseconds(), 10))
	}
	switch m.Op {
	case wire.OpInspect:
		return s.inspect(ctx, m)
	case wire.OpRevoke:
		return s.revoke(ctx, m)
	case wire.OpAcquire, wire.OpRenew, wire.OpRelease, wire.OpProclaim:
	default:
		return wire.Reply{}, refuse(wire.RefusedUnknownCall, "no such call "+strconv.Quote(string(m.Op)))
	}
	hash := secretHash(m.Secret)
	if m.Op == wire.OpAcquire && m.Wait > 0 {
		return s.acquireWaiting(ctx, m, hash)
	}
	o, err := s.update(ctx, m.Request.Resource, func(t *Txn, rules lease.Rules, o *outcome) error {
		switch m.Op {
		case wire.OpAcquire:
			s.serve(t, rules, o)
			return s.acquire(t, rules, m.Request, m.Value, hash, m.Caller, &o.reply)
		case wire.OpRenew:
			return s.renewDecision(m, hash)(t, rules, o)
		case wire.OpProclaim:
			s.serve(t, rules, o)
			return s.proclaim(t, m.Request, m.Value, hash, o)
		}
		if err := s.release(t, rules, m.Request, hash, &o.reply); err != nil {
			return err
		}
		s.serve(t, rules, o)
		return nil
	})
	if err != nil {
		return wire.Reply{}, refusal(err)
	}
	return o.reply, nil
}

func (s *Service) acquire(t *Txn, rules lease.Rules, q lease.Request, value string, hash [32]byte, caller wire.Caller, reply *wire.Reply) error {
	e := t.current()
	var prior *lease.Grant
	if e.Fence != 0 && e.RequestID == q.RequestID {
		if e.HolderID == q.HolderID && !hashEqual(e.SecretHash, hash) {
			return refuse(wire.RefusedWrongSecret, "this request id belongs to an acquisition made with another secret")
		}
		prior = &lease.Grant{RequestID: q.RequestID, Resource: q.Resource, HolderID: e.HolderID, Fence: e.Fence, TTL: s.ttl,
			CoordinatorExpiresAt: clock.At(t.Now.Domain, e.ExpiresAt)}
	}
	out, next, err := rules.Acquire(t.Now, e.state(t.Issued), prior, q)
	if err != nil {
		return err
	}
	if !out.OK {
		reply.HeldBy, reply.RetryAfterMillis = out.HeldBy, clock.Millis(out.RetryAfter)
		return nil
	}
	reply.OK, reply.Grant = true, wire.GrantOf(out.Grant)
	if next.Issued == t.Issued {
		return nil // the retry of the acquisition that made the lease
	}
	// The token's own limit first: a token at its limit is told so even
	// when the coordinator is full as well. (A grant over the token's own
	// expired record replaces it: Entry.Replaces.)
	if caller.MaxLeases > 0 {
		if t.Owners == nil {
			return refuse(wire.RefusedInternal, "this coordinator's store does not count leases by token, so the token's maxLeases cannot be kept")
		}
		if t.Owners.Owned(caller.Name, caller.MaxLeases) >= caller.MaxLeases {
			return refuse(wire.RefusedTooManyTokenLeases, "the token "+quote(caller.Name)+" holds its maximum of "+
				strconv.Itoa(caller.MaxLeases)+" leases; other tokens are not affected; release one, or retry later")
		}
	}
	if t.Entry.Fence == 0 && t.Limits.Full(t.Counts) {
		return refuse(wire.RefusedTooManyLeases, "the coordinator holds its maximum of leases; retry later")
	}
	t.Put(Entry{Owner: caller.Name, HolderID: q.HolderID, RequestID: q.RequestID, Fence: next.Fence, ExpiresAt: next.ExpiresAt, SecretHash: hash,
		Released: recent(e.Released, t.Now.Millis, s.ttlMs, MaxReleases), Value: value, Revoked: e.revokedNow(t.Now.Millis, s.ttlMs)}, true)
	return nil
}

// renewDecision is the decision of the renewal m (with its secret's hash).
func (s *Service) renewDecision(m wire.Message, hash [32]byte) func(t *Txn, rules lease.Rules, o *outcome) error {
	return func(t *Txn, rules lease.Rules, o *outcome) error {
		s.serve(t, rules, o)
		err := s.renew(t, rules, m.Request, hash, &o.reply)
		o.renewed = err == nil && o.reply.OK
		return err
	}
}

func (s *Service) renew(t *Txn, rules lease.Rules, q lease.Request, hash [32]byte, reply *wire.Reply) error {
	e := t.current()
	if refused, err := s.checkHolder(t, e, q, hash, reply); refused || err != nil {
		return err
	}
	out, next, err := rules.Renew(t.Now, e.state(t.Issued), q)
	if err != nil {
		return err
	}
	if !out.OK {
		reply.Reason = string(out.Reason)
		return nil
	}
	reply.OK, reply.Grant = true, wire.GrantOf(out.Grant)
	renewed := *e
	renewed.ExpiresAt = next.ExpiresAt
	t.Put(renewed, true)
	return nil
}

// checkHolder answers "revoked" (refused) for a lease of q's holder and
// fence that a revoke ended, and fails a secret that is not e's
// (checkSecret).
func (s *Service) checkHolder(t *Txn, e *Entry, q lease.Request, hash [32]byte, reply *wire.Reply) (refused bool, err error) {
	if e.IsRevoked(q.HolderID, q.Fence, t.Now.Millis, s.ttlMs) {
		reply.Reason = wire.ReasonRevoked
		return true, nil
	}
	return false, checkSecret(e, q.HolderID, q.Fence, hash)
}

// release ends the lease. It is stored without waiting for its sync (see
// docs/service.md): a crash that loses it leaves the lease held by the
// same holder until its TTL ends (no fence reissued, no second holder), and
// any later synced change, the next grant of the resource included, makes
// it durable first. A release that hands the resource to a waiter is
// synced with that grant (serve). The entry keeps the lease's fence as its
// LastFence while the store has room.
func (s *Service) release(t *Txn, rules lease.Rules, q lease.Request, hash [32]byte, reply *wire.Reply) error {
	e := t.current()
	for _, r := range e.Released {
		if r.RequestID == q.RequestID && r.HolderID == q.HolderID && r.Fence == q.Fence && hashEqual(r.SecretHash, hash) &&
			t.Now.Millis-r.At <= s.ttlMs {
			reply.OK = true // a retry of the release that ended the lease
			return nil
		}
	}
	if refused, err := s.checkHolder(t, e, q, hash, reply); refused || err != nil {
		return err
	}
	done, _, err := rules.Release(t.Now, e.state(t.Issued), fence.Token{Resource: q.Resource, HolderID: q.HolderID, Fence: q.Fence})
	if err != nil {
		return err
	}
	if !done {
		reply.Reason = string(lease.Expired)
		return nil
	}
	reply.OK = true
	rels := recent(e.Released, t.Now.Millis, s.ttlMs, MaxReleases-1)
	if t.Limits.KeepRelease(t.Counts) {
		rels = append(rels, Release{RequestID: q.RequestID, HolderID: q.HolderID, Fence: q.Fence, At: t.Now.Millis, SecretHash: hash})
	}
	next := Entry{Released: rels, Revoked: e.revokedNow(t.Now.Millis, s.ttlMs)}
	if t.keepLast() {
		next.LastFence = q.Fence
	}
	t.Put(next, false)
	return nil
}

// proclaim changes the value of the live lease of q's holder and fence.
func (s *Service) proclaim(t *Txn, q lease.Request, value string, hash [32]byte, o *outcome) error {
	reply := &o.reply
	e := t.current()
	if refused, err := s.checkHolder(t, e, q, hash, reply); refused || err != nil {
		return err
	}
	if e.Fence != q.Fence || e.HolderID != q.HolderID || t.Now.Millis >= e.ExpiresAt {
		reply.Reason = string(lease.Expired)
		return nil
	}
	reply.OK = true
	if e.Value != value {
		next := *e
		next.Value = value
		t.Put(next, true)
		v := value
		o.extra = append(o.extra, wire.Event{Type: wire.EventProclaimed, HolderID: e.HolderID, Fence: e.Fence, Value: &v})
	}
	return nil
}

// checkSecret refuses a renew or release that names the resource's lease
// record (holder and fence) with another secret.
func checkSecret(e *Entry, holder string, f uint64, hash [32]byte) error {
	if e.Fence != 0 && e.HolderID == holder && e.Fence == f && !hashEqual(e.SecretHash, hash) {
		return refuse(wire.RefusedWrongSecret, "the secret does not match the lease's")
	}
	return nil
}

func hashEqual(a, b [32]byte) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }

// refusal says why a call failed with err: the Refusal the HTTP layer
// answers.
func refusal(err error) error {
	var rf *wire.Refusal
	var ae *lease.ArgumentError
	switch {
	case errors.As(err, &rf):
		return rf
	case errors.As(err, &ae) && ae.Arg == "requestId":
		return refuse(wire.RefusedRequestIDReused, err.Error())
	case errors.As(err, &ae):
		return refuse(wire.RefusedRejected, err.Error())
	case errors.Is(err, ErrOutcomeUnknown):
		return refuse(wire.RefusedUnavailable, "the change may or may not have been made; retry the same call (its retry is answered from the stored state): "+err.Error())
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, errStopped):
		return refuse(wire.RefusedUnavailable, "nothing changed; retry: "+err.Error())
	}
	return refuse(wire.RefusedInternal, err.Error()) // a bug, a broken clock, or stored state that was refused
}

// refuse returns the refusal of a call for reason, with msg.
func refuse(reason wire.Reason, msg string) *wire.Refusal {
	return &wire.Refusal{Reason: reason, Message: msg}
}
