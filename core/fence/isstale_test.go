package fence_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
)

// multi is a caller's error type holding several errors, as errors.Join's
// does, and single wraps one.
type multi []error

func (m multi) Error() string   { return "several" }
func (m multi) Unwrap() []error { return m }

type single struct{ err error }

func (s single) Error() string { return "one: " + s.err.Error() }
func (s single) Unwrap() error { return s.err }

// IsStale finds a gate's refusal however it was wrapped.
func TestIsStaleThroughWrapping(t *testing.T) {
	g, err := fence.NewGate("r", fence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Admit(fence.Token{Resource: "r", HolderID: "b", Fence: 2}); err != nil {
		t.Fatal(err)
	}
	stale := g.Commit(fence.Token{Resource: "r", HolderID: "a", Fence: 1}, func() error { return nil })
	deep := stale
	for i := range 50 {
		switch i % 3 {
		case 0:
			deep = fmt.Errorf("layer %d: %w", i, deep)
		case 1:
			deep = errors.Join(errors.New("other"), deep)
		default:
			deep = single{deep}
		}
	}
	other := errors.New("disk full")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"itself", stale, true},
		{"%w", fmt.Errorf("saving: %w", stale), true},
		{"two %w", fmt.Errorf("%w and %w", other, stale), true},
		{"errors.Join", errors.Join(other, stale), true},
		{"an Unwrap() []error of the caller's", multi{other, single{stale}}, true},
		{"50 layers", deep, true},
		{"nil", nil, false},
		{"another error", other, false},
		{"%v loses it", fmt.Errorf("saving: %v", stale), false},
		{"a join without one", errors.Join(other, errors.New("closed")), false},
		{"a mismatch", &fence.ResourceMismatchError{Gate: "r", Token: "s"}, false},
	} {
		if got := fence.IsStale(c.err); got != c.want {
			t.Errorf("%s: IsStale = %v, want %v", c.name, got, c.want)
		}
	}
}
