package lease

import (
	"strconv"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
)

// Rules are the coordinator's rules for one resource as pure functions:
// given what is known of the resource when a call arrives (a State), the
// call and a reading of the coordinator's clock, each returns the answer and
// the State after the call, and changes nothing. Coordinator applies them to
// its table in memory; a service can apply them to a stored record, make the
// next State durable, and only then answer. Every rule of acquisition,
// renewal and release lives here, once.
//
// The zero Rules is not usable: Domain and TTL are required.
type Rules struct {
	// Domain is the coordinator's clock domain: readings and expiries are
	// in it.
	Domain string
	// TTL is the lease length, counted from the coordinator's reading.
	TTL time.Duration
}

// State is what the rules need to know of one resource: its current or
// last lease, and the fence counter its fences come from.
type State struct {
	// Held reports whether the resource has a lease record. The lease may
	// have ended: it is live only while the reading is before ExpiresAt.
	Held      bool
	HolderID  string
	Fence     uint64
	ExpiresAt float64 // coordinator milliseconds
	// Issued is the highest fence issued so far by the counter (for this
	// resource, or for every resource that shares the counter). A new
	// lease takes Issued+1.
	Issued uint64
}

// LiveAt reports whether s holds a lease that is live at now (coordinator
// milliseconds).
func (s *State) LiveAt(now float64) bool { return s.Held && now < s.ExpiresAt }

// Acquire decides an acquisition of req.Resource at now, a reading of the
// coordinator's clock. prior is the grant the coordinator made earlier for
// req.RequestID, if it still remembers it, or nil.
//
// A request id granted before to another holder or for another resource is
// an *ArgumentError. A retry of the acquisition that made the live lease
// gets that same grant (prior), so a retry never mints a second fence. Any
// other acquisition of a live lease is denied with its holder and the time
// left, even to that same holder. A free resource (never held, released or
// expired) is granted with fence Issued+1, and the next State holds it.
func (r Rules) Acquire(now clock.Instant, s State, prior *Grant, req Request) (Outcome, State, error) {
	var out Outcome
	if err := r.check(now); err != nil {
		return out, s, err
	}
	if err := req.validate(KindAcquire); err != nil {
		return out, s, err
	}
	if err := checkAcquire(s.Issued, prior, &req); err != nil {
		return out, s, err
	}
	_, err := decideAcquire(now, clock.Millis(r.TTL), r.TTL, &s, prior, &req, &out)
	return out, s, err
}

// Renew decides a renewal at now. A renewal of the live lease (same holder,
// same fence) extends it to now+TTL, dated from the coordinator's reading,
// and keeps its fence. Anything else, a lease that expired while nobody
// took the resource included, is refused with Reason Expired: an expired
// lease is never resurrected. A fence above Issued is an *ArgumentError.
func (r Rules) Renew(now clock.Instant, s State, req Request) (Outcome, State, error) {
	var out Outcome
	if err := r.check(now); err != nil {
		return out, s, err
	}
	if err := req.validate(KindRenew); err != nil {
		return out, s, err
	}
	if err := checkRenew(s.Issued, &req); err != nil {
		return out, s, err
	}
	decideRenew(now, clock.Millis(r.TTL), r.TTL, &s, &req, &out)
	return out, s, nil
}

// Release decides a release at now: it ends the lease tok names if it is
// the live lease of its resource, and reports whether it did. Releasing a
// lease that already ended changes nothing and is not an error.
func (r Rules) Release(now clock.Instant, s State, tok fence.Token) (bool, State, error) {
	if err := r.check(now); err != nil {
		return false, s, err
	}
	if err := tok.Validate(); err != nil {
		return false, s, err
	}
	return decideRelease(now.Millis, &s, &tok), s, nil
}

// check refuses unusable Rules and a reading that is not a finite instant
// in their domain.
func (r Rules) check(now clock.Instant) error {
	if r.Domain == "" {
		return argErr("rules.domain", "must not be empty")
	}
	if r.TTL <= 0 {
		return argErr("rules.ttl", "must be positive, got "+r.TTL.String())
	}
	if err := now.Validate(); err != nil {
		return err
	}
	if now.Domain != r.Domain {
		return &clock.DomainError{Want: r.Domain, Got: now.Domain}
	}
	return nil
}

// checkAcquire refuses what can be refused before the clock is read: a
// request id used by another holder or for another resource, and any
// acquisition but a remembered retry once the fences are used up.
func checkAcquire(issued uint64, prior *Grant, req *Request) error {
	if prior == nil && issued < maxFence {
		return nil // the common case, inlined
	}
	return checkAcquireSlow(issued, prior, req)
}

func checkAcquireSlow(issued uint64, prior *Grant, req *Request) error {
	if prior != nil {
		if prior.Resource != req.Resource || prior.HolderID != req.HolderID {
			return argErr("requestId", "was already used by "+strconv.Quote(prior.HolderID)+" for "+strconv.Quote(prior.Resource))
		}
	} else if issued >= maxFence {
		return errExhausted()
	}
	return nil
}

// decideAcquire fills in out (the zero Outcome) and moves s to the state
// after the acquisition; it reports whether s changed.
func decideAcquire(now clock.Instant, ms float64, ttl time.Duration, s *State, prior *Grant, req *Request, out *Outcome) (bool, error) {
	if s.LiveAt(now.Millis) {
		if prior != nil && prior.Fence == s.Fence {
			// A retry of the request that made the current lease.
			out.OK, out.Grant = true, *prior
			return false, nil
		}
		out.HeldBy, out.RetryAfter = s.HolderID, clock.FromMillis(s.ExpiresAt-now.Millis)
		return false, nil
	}
	// The lease the prior grant made (if any) is over: a retry is a new
	// acquisition.
	if s.Issued >= maxFence {
		return false, errExhausted()
	}
	s.Issued++
	s.Held, s.HolderID, s.Fence, s.ExpiresAt = true, req.HolderID, s.Issued, now.Millis+ms
	out.OK = true
	grantOf(&out.Grant, req, s.Fence, ttl, clock.Instant{Millis: s.ExpiresAt, Domain: now.Domain})
	return true, nil
}

// checkRenew refuses, before the clock is read, a renewal of a fence that
// was never issued.
func checkRenew(issued uint64, req *Request) error {
	if req.Fence > issued {
		return argErr("fence", "was never issued by this coordinator")
	}
	return nil
}

// decideRenew fills in out (the zero Outcome) and moves s to the state
// after the renewal; it reports whether s changed.
func decideRenew(now clock.Instant, ms float64, ttl time.Duration, s *State, req *Request, out *Outcome) bool {
	if s.HolderID != req.HolderID || s.Fence != req.Fence || !s.LiveAt(now.Millis) {
		out.Reason = Expired
		return false
	}
	s.ExpiresAt = now.Millis + ms
	out.OK = true
	grantOf(&out.Grant, req, s.Fence, ttl, clock.Instant{Millis: s.ExpiresAt, Domain: now.Domain})
	return true
}

// decideRelease moves s to the state after a release of tok at now and
// reports whether the release ended the lease (and so changed s).
func decideRelease(now float64, s *State, tok *fence.Token) bool {
	if s.HolderID != tok.HolderID || s.Fence != tok.Fence || !s.LiveAt(now) {
		return false
	}
	s.Held, s.HolderID, s.Fence, s.ExpiresAt = false, "", 0, 0
	return true
}

// grantOf fills in g, answering req with fence f until exp.
func grantOf(g *Grant, req *Request, f uint64, ttl time.Duration, exp clock.Instant) {
	g.RequestID, g.Resource, g.HolderID = req.RequestID, req.Resource, req.HolderID
	g.Fence, g.TTL, g.CoordinatorExpiresAt = f, ttl, exp
}
