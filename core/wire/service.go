package wire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Backend answers decoded calls. Service is the implementation most callers
// want; a host may put something in front of it (the Worker routes each call
// to the Durable Object of its resource). A Backend returns an *Error for a
// refused call; any other error is reported as an internal error.
type Backend interface {
	Call(ctx context.Context, m Message) (Reply, error)
}

// State is everything a Service keeps about one resource, and what a Store
// persists. Fences are per resource: each resource has its own counter,
// strictly increasing, which is what the resource's fence.Gate compares.
type State struct {
	Resource string `json:"resource"`
	// IssuedFence is the highest fence issued for the resource.
	IssuedFence uint64 `json:"issuedFence"`
	// LastMillis is the latest coordinator reading a change was made at. A
	// restarted service never acts at an earlier reading.
	LastMillis float64 `json:"lastMillis"`
	// Lease is the newest lease, live or expired; nil once released.
	Lease *Held `json:"lease,omitempty"`
	// Released remembers the last release, so a retried release whose reply
	// was lost is answered ok again.
	Released *Released `json:"released,omitempty"`
}

// Held is the newest lease of a resource as the coordinator stores it.
type Held struct {
	RequestID string `json:"requestId"`
	HolderID  string `json:"holderId"`
	Fence     uint64 `json:"fence"`
	// Secret is presented by the holder to renew or release. It is random
	// and unrelated to anything else in the record. Never log it.
	Secret string `json:"secret"`
	// ExpiresAt is the end of the lease in the coordinator's clock domain.
	ExpiresAt float64 `json:"expiresAt"`
	// GrantTTLMillis and GrantExpiresAt are the acquisition grant as first
	// answered, repeated to a retry of that request.
	GrantTTLMillis float64 `json:"grantTtlMillis"`
	GrantExpiresAt float64 `json:"grantExpiresAt"`
}

// Released is the last release of a resource.
type Released struct {
	RequestID string `json:"requestId"`
	HolderID  string `json:"holderId"`
	Fence     uint64 `json:"fence"`
	Secret    string `json:"secret"`
}

// Store persists resource states. Save must make st durable before it
// returns: the service answers a grant only after Save succeeded, and a
// failed Save leaves the service as it was before the call.
type Store interface {
	// Load returns the stored state of resource, or ok false if none.
	Load(ctx context.Context, resource string) (st State, ok bool, err error)
	// Save stores st, replacing the state of st.Resource.
	Save(ctx context.Context, st State) error
}

// ServiceConfig configures a Service.
type ServiceConfig struct {
	// Clock is the coordinator's clock. Required. With a Store that outlives
	// the process, use a clock whose readings mean the same thing after a
	// restart, such as WallClock.
	Clock clock.Clock
	// TTL is the lease length. Required, positive.
	TTL time.Duration
	// Store persists every change before it is answered. Nil keeps state in
	// memory only.
	Store Store
}

// Service is the coordinator behind the handler: one lease.Coordinator per
// resource, which makes every decision, plus the secrets and the records a
// Store needs to bring a coordinator back after a restart. It is safe for
// concurrent use; calls on one resource are serialized, calls on different
// resources run in parallel.
type Service struct {
	clk   clock.Clock
	ttl   time.Duration
	ttlMs float64
	store Store

	// res maps a resource name to its *resource. Entries are added once
	// and never removed, the case sync.Map is made for: calls on different
	// resources do not contend for a lock to find theirs.
	res sync.Map
}

type resource struct {
	mu     sync.Mutex
	loaded bool
	st     State
	co     *lease.Coordinator // nil: rebuild from st
	floor  float64            // readings below this are raised to it
}

// NewService returns a service.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Clock == nil || cfg.Clock.Domain() == "" {
		return nil, errors.New("wire: ServiceConfig.Clock is required and needs a domain")
	}
	if cfg.TTL <= 0 {
		return nil, errors.New("wire: ServiceConfig.TTL must be positive, got " + cfg.TTL.String())
	}
	return &Service{
		clk:   cfg.Clock,
		ttl:   cfg.TTL,
		ttlMs: clock.Millis(cfg.TTL),
		store: cfg.Store,
	}, nil
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

// State returns a copy of what the service holds for resource, loading it
// from the store if needed, or ok false if it has never been touched.
func (s *Service) State(ctx context.Context, resource string) (State, bool, error) {
	r := s.resource(resource)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := s.load(ctx, r, resource); err != nil {
		return State{}, false, err
	}
	if r.st.IssuedFence == 0 && r.st.Lease == nil && r.st.Released == nil {
		return State{}, false, nil
	}
	return copyState(r.st), true, nil
}

// Call answers one decoded call.
func (s *Service) Call(ctx context.Context, m Message) (Reply, error) {
	r := s.resource(m.Request.Resource)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := s.load(ctx, r, m.Request.Resource); err != nil {
		return Reply{}, err
	}
	if r.co == nil {
		if err := s.rebuild(r); err != nil {
			return Reply{}, err
		}
	}
	reading, err := s.clk.Now()
	if err != nil {
		return Reply{}, errCode(CodeInternal, "coordinator clock: "+err.Error())
	}
	now := reading
	if now.Millis < r.floor {
		now.Millis = r.floor
	}
	switch m.Op {
	case OpAcquire:
		return s.acquire(ctx, r, now, m)
	case OpRenew:
		return s.renew(ctx, r, now, m)
	case OpRelease:
		return s.release(ctx, r, now, m)
	}
	return Reply{}, errCode(CodeNotFound, "no such call "+strconv.Quote(string(m.Op)))
}

func (s *Service) resource(name string) *resource {
	if r, ok := s.res.Load(name); ok {
		return r.(*resource)
	}
	r, _ := s.res.LoadOrStore(name, &resource{})
	return r.(*resource)
}

func (s *Service) load(ctx context.Context, r *resource, name string) error {
	if r.loaded {
		return nil
	}
	r.st = State{Resource: name}
	if s.store != nil {
		st, ok, err := s.store.Load(ctx, name)
		if err != nil {
			return errCode(CodeUnavailable, "loading the state of "+quoteShort(name)+": "+err.Error())
		}
		if ok {
			if st.Resource != name {
				return errCode(CodeInternal, "stored state of "+quoteShort(name)+" names "+quoteShort(st.Resource))
			}
			r.st = st
		}
	}
	r.loaded = true
	r.floor = r.st.LastMillis
	return nil
}

// rebuild makes a fresh coordinator that holds exactly r.st: the same issued
// fence and, if there is one, the same lease with the same expiry. It does
// so through the coordinator's public API: a coordinator started just below
// the lease's fence grants the lease again at the instant it was last
// extended (ExpiresAt - TTL), which reproduces fence, holder and expiry.
func (s *Service) rebuild(r *resource) error {
	st := r.st
	start := st.IssuedFence
	if st.Lease != nil {
		if st.Lease.Fence != st.IssuedFence || st.Lease.Fence == 0 {
			return errCode(CodeInternal, "stored state of "+quoteShort(st.Resource)+" is inconsistent")
		}
		start = st.Lease.Fence - 1
	}
	co, err := lease.NewCoordinator(lease.CoordinatorConfig{Clock: s.clk, TTL: s.ttl, StartFence: start})
	if err != nil {
		return errCode(CodeInternal, err.Error())
	}
	if st.Lease != nil {
		at := clock.At(s.clk.Domain(), st.Lease.ExpiresAt-s.ttlMs)
		out, err := co.AcquireAt(at, lease.Request{
			Kind:      lease.KindAcquire,
			RequestID: st.Lease.RequestID,
			Resource:  st.Resource,
			HolderID:  st.Lease.HolderID,
			SentAt:    clock.At("wire-restore", 0),
		})
		if err != nil || !out.OK || out.Grant.Fence != st.Lease.Fence {
			return errCode(CodeInternal, "could not restore the lease of "+quoteShort(st.Resource))
		}
		if at.Millis > r.floor {
			r.floor = at.Millis
		}
	}
	r.co = co
	return nil
}

func (s *Service) save(ctx context.Context, r *resource, next State) error {
	if s.store != nil {
		if err := s.store.Save(ctx, next); err != nil {
			r.co = nil // the coordinator moved on; bring it back to r.st
			return errCode(CodeUnavailable, "could not store the state of "+quoteShort(next.Resource)+": "+err.Error())
		}
	}
	r.st = next
	return nil
}

func (s *Service) acquire(ctx context.Context, r *resource, now clock.Instant, m Message) (Reply, error) {
	out, err := r.co.AcquireAt(now, m.Request)
	if err != nil {
		return Reply{}, coreError(err)
	}
	if !out.OK {
		return Reply{HeldBy: out.HeldBy, RetryAfterMillis: clock.Millis(out.RetryAfter)}, nil
	}
	g := out.Grant
	if h := r.st.Lease; h != nil && g.Fence == h.Fence {
		// The coordinator recognised a retry of the request that made the
		// current lease: answer with that same grant.
		return Reply{OK: true, Grant: &Grant{
			RequestID: h.RequestID, Resource: r.st.Resource, HolderID: h.HolderID, Fence: h.Fence,
			TTLMillis: h.GrantTTLMillis, CoordinatorExpiresAt: Instant{h.GrantExpiresAt, now.Domain}, Secret: h.Secret,
		}}, nil
	}
	secret, err := newSecret()
	if err != nil {
		r.co = nil
		return Reply{}, errCode(CodeUnavailable, "no randomness for a secret: "+err.Error())
	}
	next := copyState(r.st)
	next.IssuedFence = g.Fence
	next.LastMillis = now.Millis
	next.Lease = &Held{
		RequestID: g.RequestID, HolderID: g.HolderID, Fence: g.Fence, Secret: secret,
		ExpiresAt:      g.CoordinatorExpiresAt.Millis,
		GrantTTLMillis: clock.Millis(g.TTL), GrantExpiresAt: g.CoordinatorExpiresAt.Millis,
	}
	if err := s.save(ctx, r, next); err != nil {
		return Reply{}, err
	}
	return Reply{OK: true, Grant: wireGrant(g, secret)}, nil
}

func (s *Service) renew(ctx context.Context, r *resource, now clock.Instant, m Message) (Reply, error) {
	if err := r.checkSecret(m); err != nil {
		return Reply{}, err
	}
	out, err := r.co.RenewAt(now, m.Request)
	if err != nil {
		return Reply{}, coreError(err)
	}
	if !out.OK {
		return Reply{Reason: string(out.Reason)}, nil
	}
	g := out.Grant
	next := copyState(r.st)
	next.LastMillis = now.Millis
	next.Lease.ExpiresAt = g.CoordinatorExpiresAt.Millis
	if err := s.save(ctx, r, next); err != nil {
		return Reply{}, err
	}
	return Reply{OK: true, Grant: wireGrant(g, next.Lease.Secret)}, nil
}

func (s *Service) release(ctx context.Context, r *resource, now clock.Instant, m Message) (Reply, error) {
	if err := r.checkSecret(m); err != nil {
		return Reply{}, err
	}
	q := m.Request
	if rel := r.st.Released; rel != nil && rel.RequestID == q.RequestID && rel.HolderID == q.HolderID &&
		rel.Fence == q.Fence && secretEqual(rel.Secret, m.Secret) {
		return Reply{OK: true}, nil // a retry of the release that ended it
	}
	done, err := r.co.ReleaseAt(now, fence.Token{Resource: q.Resource, HolderID: q.HolderID, Fence: q.Fence})
	if err != nil {
		return Reply{}, coreError(err)
	}
	if !done {
		return Reply{Reason: string(lease.Expired)}, nil
	}
	next := copyState(r.st)
	next.LastMillis = now.Millis
	next.Released = &Released{RequestID: q.RequestID, HolderID: q.HolderID, Fence: q.Fence, Secret: m.Secret}
	next.Lease = nil
	if err := s.save(ctx, r, next); err != nil {
		return Reply{}, err
	}
	r.co = nil // nothing live: let the coordinator go, rebuild on demand
	return Reply{OK: true}, nil
}

// checkSecret refuses a renew or release that names the resource's newest
// lease (holder and fence) without its secret.
func (r *resource) checkSecret(m Message) error {
	h := r.st.Lease
	if h != nil && h.HolderID == m.Request.HolderID && h.Fence == m.Request.Fence && !secretEqual(h.Secret, m.Secret) {
		return errCode(CodeWrongSecret, "the secret does not match the lease's")
	}
	return nil
}

func secretEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func wireGrant(g lease.Grant, secret string) *Grant {
	return &Grant{
		RequestID: g.RequestID, Resource: g.Resource, HolderID: g.HolderID, Fence: g.Fence,
		TTLMillis: clock.Millis(g.TTL), CoordinatorExpiresAt: FromInstant(g.CoordinatorExpiresAt), Secret: secret,
	}
}

func copyState(st State) State {
	if st.Lease != nil {
		h := *st.Lease
		st.Lease = &h
	}
	if st.Released != nil {
		rel := *st.Released
		st.Released = &rel
	}
	return st
}

// coreError maps an error from package lease to a refusal.
func coreError(err error) error {
	var ae *lease.ArgumentError
	if errors.As(err, &ae) {
		if ae.Arg == "requestId" {
			return errCode(CodeRequestIDReused, err.Error())
		}
		return errCode(CodeRejected, err.Error())
	}
	return errCode(CodeInternal, err.Error())
}
