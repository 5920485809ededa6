package fence

import (
	"strconv"

	"github.com/lease-fence/lease-fence/internal/argerr"
)

// StaleFenceError is returned when a gate refuses a token whose fence is below
// its floor. It carries the rejections-log entry the refusal appended.
type StaleFenceError struct {
	Rejection
}

// Error names both holders, both fences and the rejection's sequence number.
func (e *StaleFenceError) Error() string {
	admitted := "the initial floor"
	if e.AdmittedHolder != "" {
		admitted = "holder " + strconv.Quote(e.AdmittedHolder)
	}
	return "fence: stale write to " + strconv.Quote(e.Resource) + " refused (rejection #" +
		strconv.FormatUint(e.Seq, 10) + "): holder " + strconv.Quote(e.RefusedHolder) +
		" has fence " + strconv.FormatUint(e.RefusedFence, 10) + " but " + admitted +
		" was admitted at fence " + strconv.FormatUint(e.AdmittedFence, 10)
}

// ResourceMismatchError is returned when a token for one resource is presented
// to the gate of another. Nothing is logged and the floor does not move.
type ResourceMismatchError struct {
	Gate  string // the gate's resource
	Token string // the token's resource
}

// Error names both resources.
func (e *ResourceMismatchError) Error() string {
	return "fence: token for resource " + strconv.Quote(e.Token) +
		" presented to the gate of " + strconv.Quote(e.Gate)
}

// InvalidArgument marks a mismatch as a caller error.
func (e *ResourceMismatchError) InvalidArgument() bool { return true }

// ArgumentError reports an invalid argument to a fence function. Nothing changed. It is
// the one argument-error type of lease-fence (every package's ArgumentError
// is this type), so errors.As with it matches an argument error from any
// package; Pkg names the package that refused the argument and prefixes the
// message.
type ArgumentError = argerr.Error
