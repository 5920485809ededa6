// Package argerr defines the one error type that every lease-fence package
// returns for an invalid argument. The public packages re-export it under
// their own names (clock.ArgumentError, fence.ArgumentError,
// lease.ArgumentError, naive.ArgumentError) as type aliases, so
// errors.As with any of those names matches an argument error from any
// package, and Pkg says which package refused the argument.
package argerr

// Error reports an invalid argument or request. The call that returned it
// changed nothing.
type Error struct {
	// Pkg is the package that refused the argument ("clock", "fence",
	// "lease", "naive"). Empty means the library as a whole (the JavaScript
	// bridge), and the message starts with "lease-fence: ".
	Pkg string
	// Arg names the argument, e.g. "ttl" or "request.sentAt.millis".
	Arg string
	// Reason says what was wrong with it.
	Reason string
}

// New returns an *Error from package pkg.
func New(pkg, arg, reason string) *Error {
	return &Error{Pkg: pkg, Arg: arg, Reason: reason}
}

// Error is "<package>: <argument> <reason>".
func (e *Error) Error() string {
	pkg := e.Pkg
	if pkg == "" {
		pkg = "lease-fence"
	}
	return pkg + ": " + e.Arg + " " + e.Reason
}

// InvalidArgument marks e as a caller error. Bridges use it, through an
// interface, to classify errors of other types too (fence's
// ResourceMismatchError has it).
func (e *Error) InvalidArgument() bool { return true }
