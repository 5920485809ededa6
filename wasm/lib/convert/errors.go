package convert

import "strconv"

// ArgumentError reports an argument from JavaScript that has the wrong type or
// is out of range. Nothing was changed by the call that returned it.
type ArgumentError struct {
	Arg    string // the argument's path, e.g. "request.sentAt.millis"
	Reason string
}

// Error names the argument and what is wrong with it.
func (e *ArgumentError) Error() string { return "lease-fence: " + e.Arg + " " + e.Reason }

// InvalidArgument marks e as a caller error, like the core packages' argument
// errors.
func (e *ArgumentError) InvalidArgument() bool { return true }

func argErr(arg, reason string) error { return &ArgumentError{Arg: arg, Reason: reason} }

// describe names what a value was, for error messages: its JavaScript type and,
// for numbers and strings, a short rendering of the value.
func describe(v Value) string {
	switch v.Tag {
	case TagNumber:
		return "number " + strconv.FormatFloat(v.Num, 'g', -1, 64)
	case TagString:
		s := v.Str
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return "string " + strconv.Quote(s)
	}
	return v.Tag.String()
}
