// Package lease provides the coordinator that grants leases with fencing
// tokens, and the client that turns its grants into leases whose deadlines are
// anchored at the instant the request was sent.
//
// A round trip goes: Client.BeginAcquire stamps the send instant into a
// Request; the request travels to Coordinator.Acquire by whatever transport
// the caller has; the Outcome travels back; Client.CompleteAcquire turns the
// grant into a Lease with
//
//	deadline = request.SentAt + grant.TTL - clockSkew
//
// The coordinator dates its own copy from the moment it processed the
// request, which is necessarily later than the send, so the holder's window
// always lies inside the coordinator's. Writes go through a fence.Gate with
// Lease.Token; a holder's own belief that its lease is valid is never enough.
package lease

import (
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
)

// Kind says what a Request asks for.
type Kind string

// The two kinds of request.
const (
	// KindAcquire asks for a new lease on a resource.
	KindAcquire Kind = "acquire"
	// KindRenew asks to extend the lease with Request.Fence.
	KindRenew Kind = "renew"
)

// Request is what a client sends to the coordinator. It is plain data: it can
// be copied, serialized and sent over any transport, and a copy completes the
// same way as the original.
type Request struct {
	Kind      Kind
	RequestID string
	Resource  string
	HolderID  string
	// SentAt is the client's reading just before the request left, in the
	// client's clock domain. The coordinator never measures against it.
	SentAt clock.Instant
	// Fence is the fence of the lease being renewed; zero for an acquisition.
	Fence uint64
}

// Grant is the coordinator's answer to a successful acquisition or renewal.
type Grant struct {
	RequestID string
	Resource  string
	HolderID  string
	Fence     uint64
	TTL       time.Duration
	// CoordinatorExpiresAt is when the coordinator's copy of the lease ends,
	// in the coordinator's clock domain. It is there for logs: measuring a
	// holder's instant against it is a *clock.DomainError.
	CoordinatorExpiresAt clock.Instant
}

// Token returns the fencing token the grant entitles its holder to.
func (g Grant) Token() fence.Token {
	return fence.Token{Resource: g.Resource, HolderID: g.HolderID, Fence: g.Fence}
}

// Reason says why a renewal was refused.
type Reason string

// Expired is the reason a renewal is refused: the lease is no longer the
// coordinator's current lease for the resource (it ran out, was released, or
// was reassigned), and an expired lease is never extended. Re-acquire.
const Expired Reason = "expired"

// Outcome is the coordinator's answer, a plain value (making one allocates
// nothing). Exactly one shape is filled in:
//
//	OK                                     granted: Grant is the grant
//	!OK && HeldBy != ""                    denied: HeldBy holds it for RetryAfter more
//	!OK && Reason == Expired               renewal refused
//
// Grant is the zero Grant unless OK.
type Outcome struct {
	OK         bool
	Grant      Grant
	HeldBy     string
	RetryAfter time.Duration
	Reason     Reason
}
