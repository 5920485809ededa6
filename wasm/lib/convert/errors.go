package convert

import (
	"strconv"

	"github.com/lease-fence/lease-fence/core/argerr"
)

// ArgumentError reports an argument from JavaScript that has the wrong type or
// is out of range. Nothing was changed by the call that returned it. It is
// the core packages' argument-error type (clock.ArgumentError and the others
// are the same type); errors from this package leave Pkg empty, so their
// messages start with "lease-fence: ".
type ArgumentError = argerr.Error

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
