package lease

import (
	"strconv"

	"github.com/lease-fence/lease-fence/core/argerr"
)

// ArgumentError reports an invalid argument or request. Nothing changed. It is
// the one argument-error type of lease-fence (every package's ArgumentError
// is this type), so errors.As with it matches an argument error from any
// package; Pkg names the package that refused the argument and prefixes the
// message.
type ArgumentError = argerr.Error

func argErr(arg, reason string) error { return argerr.New("lease", arg, reason) }

// CompletedError is returned when a request is completed a second time. A
// send instant anchors exactly one deadline.
type CompletedError struct {
	RequestID string
}

// Error names the request.
func (e *CompletedError) Error() string {
	return "lease: request " + strconv.Quote(e.RequestID) + " was already completed"
}

// MismatchError is returned when a grant does not answer the request it is
// completed with: another request id, resource, holder, or (for a renewal)
// fence. No lease is made and the request stays open.
type MismatchError struct {
	Field string // "requestId", "resource", "holderId", "fence", "kind"
	Want  string // from the request
	Got   string // from the grant
}

// Error names the field and both values.
func (e *MismatchError) Error() string {
	return "lease: grant does not answer this request: " + e.Field + " is " +
		strconv.Quote(e.Got) + ", request has " + strconv.Quote(e.Want)
}
