package lease

import "strconv"

// ArgumentError reports an invalid argument or request. Nothing changed.
type ArgumentError struct {
	Arg    string
	Reason string
}

// Error names the argument and what was wrong with it.
func (e *ArgumentError) Error() string { return "lease: " + e.Arg + " " + e.Reason }

// InvalidArgument marks e as a caller error; bridges use it to pick an error
// class without knowing every package's types.
func (e *ArgumentError) InvalidArgument() bool { return true }

func argErr(arg, reason string) error { return &ArgumentError{Arg: arg, Reason: reason} }

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
