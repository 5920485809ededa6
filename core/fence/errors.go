package fence

import (
	"errors"
	"strconv"
	"time"

	"github.com/lease-fence/lease-fence/core/argerr"
)

// StaleFenceError is returned when a gate refuses a token whose fence is below
// its floor. It carries the rejections-log entry the refusal appended.
type StaleFenceError struct {
	Rejection
}

// Error names both holders, both fences and the rejection's sequence number.
func (e *StaleFenceError) Error() string {
	admitted := "the initial floor"
	if e.AdmittedHolderID != "" {
		admitted = "holder " + strconv.Quote(e.AdmittedHolderID)
	}
	return "fence: stale write to " + strconv.Quote(e.Resource) + " refused (rejection #" +
		strconv.FormatUint(e.Seq, 10) + "): holder " + strconv.Quote(e.RefusedHolderID) +
		" has fence " + strconv.FormatUint(e.RefusedFence, 10) + " but " + admitted +
		" was admitted at fence " + strconv.FormatUint(e.AdmittedFence, 10)
}

// IsStale reports whether err is a gate's refusal of a stale fence (a
// *StaleFenceError from Gate, sqlfence, redisfence or httpfence), however
// deeply it is wrapped: fmt.Errorf's %w chains, errors.Join, and any error
// with an Unwrap method. Use errors.As to read the refusal's fields.
func IsStale(err error) bool {
	var se *StaleFenceError
	return errors.As(err, &se)
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

// SupersededError is the context.Cause of a CommitContext write's context
// when a newer fence reached the gate while the write ran: Admit raised the
// floor past it (NewerWaiting false), or a write with a higher fence passed
// its check and waits for this one to finish (NewerWaiting true). The
// running write's lease has been superseded: it should stop and return. The
// gate does not stop it; the next write starts when it has returned.
type SupersededError struct {
	Resource string
	HolderID string // the running write's holder
	Fence    uint64 // and its fence

	NewerHolderID string // the holder of the newer fence
	NewerFence    uint64
	NewerWaiting  bool // a write with the newer fence waits for this one
}

// Error names the resource, both holders and both fences.
func (e *SupersededError) Error() string {
	how := " was admitted"
	if e.NewerWaiting {
		how = " waits for it to finish"
	}
	return "fence: the write of holder " + strconv.Quote(e.HolderID) + " with fence " + strconv.FormatUint(e.Fence, 10) +
		" to " + strconv.Quote(e.Resource) + " is superseded: holder " + strconv.Quote(e.NewerHolderID) +
		" with fence " + strconv.FormatUint(e.NewerFence, 10) + how
}

// GateBusyError is returned by CommitContext when its context ended while
// it waited for its turn. It names the write it waited for and wraps the
// context's error, so errors.Is(err, context.DeadlineExceeded) holds for a
// timeout. The write did not run, nothing was logged and the floor did not
// move.
type GateBusyError struct {
	Resource string
	HolderID string // the write that gave up
	Fence    uint64

	RunningHolderID string // the write that was running
	RunningFence    uint64
	// Running is how long that write had run when this one gave up: from its
	// start when it got the gate after waiting for its turn; otherwise (it
	// found the gate free, and the gate reads no clock then) from when the
	// first write queued behind it, so at least this long, and the message
	// says "at least".
	Running time.Duration

	Err     error // the context's error
	atLeast bool
}

// Error names both writes and how long the running one has run.
func (e *GateBusyError) Error() string {
	running := "holder " + strconv.Quote(e.RunningHolderID)
	if e.RunningHolderID == "" {
		running = "a holder"
	}
	d := "for "
	if e.atLeast {
		d = "for at least "
	}
	return "fence: the write of holder " + strconv.Quote(e.HolderID) + " with fence " + strconv.FormatUint(e.Fence, 10) +
		" to " + strconv.Quote(e.Resource) + " gave up waiting for its turn (" + errText(e.Err) + "): " + running +
		" has been writing with fence " + strconv.FormatUint(e.RunningFence, 10) + " " + d + e.Running.String()
}

// Unwrap returns the context's error.
func (e *GateBusyError) Unwrap() error { return e.Err }

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
