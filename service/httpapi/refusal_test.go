package httpapi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lease-fence/lease-fence/service/wire"
)

// TestErrorOf: each reason of a refusal has a code of its own, through any
// wrapping, with its message; an Error is answered as it is, and any other
// error as internal.
func TestErrorOf(t *testing.T) {
	seen := map[string]bool{}
	for r, code := range refusalCodes {
		if code == "" || seen[code] {
			t.Fatalf("reason %d: code %q missing or given twice", r, code)
		}
		seen[code] = true
		err := fmt.Errorf("wrapped: %w", &wire.Refusal{Reason: wire.Reason(r), Message: "m"})
		if e := ErrorOf(err); e.Code != code || e.Message != "m" || e.Status != wire.NewError(code, "").Status {
			t.Errorf("reason %d: %+v", r, e)
		}
	}
	if e := ErrorOf(&wire.Refusal{Reason: wire.RefusedTooManyTokenLeases}); e.Status != 429 || e.Code != wire.CodeTooManyTokenLeases {
		t.Errorf("too many token leases: %+v", e)
	}
	we := &wire.Error{Status: 502, Code: wire.CodeInternal, Message: "upstream"}
	if e := ErrorOf(we); e != we {
		t.Errorf("an Error was not answered as it is: %+v", e)
	}
	if e := ErrorOf(errors.New("boom")); e.Status != 500 || e.Code != wire.CodeInternal || e.Message != "boom" {
		t.Errorf("a plain error: %+v", e)
	}
}
