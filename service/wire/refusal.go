package wire

// Refusal is a call the coordinator's state machine (package service)
// refused: why, and a message for people. It names no code and no status:
// the HTTP layer (package httpapi) alone answers it as an Error.
type Refusal struct {
	Reason  Reason
	Message string
}

func (r *Refusal) Error() string { return "coordinator: refused: " + r.Message }

// Reason is why the state machine refused a call.
type Reason uint8

// The reasons of a Refusal.
const (
	RefusedInternal             Reason = iota // a bug, a broken clock, or stored state that was refused
	RefusedInvalidValue                       // a field of the call is out of this coordinator's bounds
	RefusedUnknownCall                        // the call is none of the protocol's
	RefusedWrongSecret                        // the secret is not the one the lease or request was made with
	RefusedRequestIDReused                    // the request id was used for another request
	RefusedRejected                           // the lease rules refused the request
	RefusedUnavailable                        // the store failed; the same call may be sent again
	RefusedTooManyLeases                      // the coordinator holds its maximum of leases
	RefusedTooManyWaiters                     // the coordinator has its maximum of waiting calls
	RefusedTooManyTokenLeases                 // the caller's token holds its maximum of leases
	RefusedTooManyTokenWaiters                // the caller's token has its maximum of waiting calls
	RefusedTooManyWatchers                    // the coordinator has its maximum of watchers
	RefusedTooManyTokenWatchers               // the caller's token has its maximum of watchers
	RefusedNotSupported                       // the store cannot make this call (a list without a Lister)
	RefusedNotHeld                            // a revoke found nothing to revoke
)
