package httpapi

import (
	"errors"

	"github.com/lease-fence/lease-fence/service/wire"
)

// refusalCodes is the code on the wire of each reason of a refusal; its
// status is the code's (wire.NewError).
var refusalCodes = [...]string{
	wire.RefusedInternal:             wire.CodeInternal,
	wire.RefusedInvalidValue:         wire.CodeInvalidValue,
	wire.RefusedUnknownCall:          wire.CodeNotFound,
	wire.RefusedWrongSecret:          wire.CodeWrongSecret,
	wire.RefusedRequestIDReused:      wire.CodeRequestIDReused,
	wire.RefusedRejected:             wire.CodeRejected,
	wire.RefusedUnavailable:          wire.CodeUnavailable,
	wire.RefusedTooManyLeases:        wire.CodeTooManyLeases,
	wire.RefusedTooManyWaiters:       wire.CodeTooManyWaiters,
	wire.RefusedTooManyTokenLeases:   wire.CodeTooManyTokenLeases,
	wire.RefusedTooManyTokenWaiters:  wire.CodeTooManyTokenWaiters,
	wire.RefusedTooManyWatchers:      wire.CodeTooManyWatchers,
	wire.RefusedTooManyTokenWatchers: wire.CodeTooManyTokenWatchers,
	wire.RefusedNotSupported:         wire.CodeNotSupported,
	wire.RefusedNotHeld:              wire.CodeNotHeld,
}

// ErrorOf is the answer to a call that a Backend failed with err: an
// *wire.Error as it is, a *wire.Refusal with the code and status of its
// reason, and any other error as internal.
func ErrorOf(err error) *wire.Error {
	var we *wire.Error
	var rf *wire.Refusal
	switch {
	case errors.As(err, &we):
		return we
	case errors.As(err, &rf) && int(rf.Reason) < len(refusalCodes):
		return wire.NewError(refusalCodes[rf.Reason], rf.Message)
	}
	return wire.NewError(wire.CodeInternal, err.Error())
}
