package argerr_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/argerr"
	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/naive"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

func TestMessageHasPackagePrefix(t *testing.T) {
	cases := []struct {
		err  *argerr.Error
		want string
	}{
		{argerr.New("clock", "start", "must be finite"), "clock: start must be finite"},
		{&argerr.Error{Pkg: "lease", Arg: "ttl", Reason: "must be positive"}, "lease: ttl must be positive"},
		{&argerr.Error{Arg: "request.fence", Reason: "is not a number"}, "lease-fence: request.fence is not a number"},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if !c.err.InvalidArgument() {
			t.Errorf("%v: InvalidArgument() = false", c.err)
		}
	}
}

func TestAsThroughWrapping(t *testing.T) {
	err := fmt.Errorf("context: %w", argerr.New("fence", "token", "is bad"))
	var ae *argerr.Error
	if !errors.As(err, &ae) || ae.Pkg != "fence" || ae.Arg != "token" {
		t.Fatalf("errors.As = %v, %+v", errors.As(err, &ae), ae)
	}
}

// Every package's ArgumentError is this one type: errors.As with any of the
// names matches an argument error from any package, and the message carries
// the refusing package's prefix.
func TestOneTypeAcrossPackages(t *testing.T) {
	_, clockErr := clock.NewManual("", clock.ManualOptions{})
	_, leaseErr := lease.NewCoordinator(lease.CoordinatorConfig{})
	_, naiveErr := naive.Acquire(nil, time.Second)
	fenceErr := fence.Token{}.Validate()
	cases := []struct {
		err    error
		pkg    string
		prefix string
	}{
		{clockErr, "clock", "clock: "},
		{leaseErr, "lease", "lease: "},
		{naiveErr, "naive", "naive: "},
		{fenceErr, "fence", "fence: "},
		{&convert.ArgumentError{Arg: "x", Reason: "is bad"}, "", "lease-fence: "},
	}
	for _, c := range cases {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), c.prefix) {
			t.Errorf("err = %v, want prefix %q", c.err, c.prefix)
			continue
		}
		var (
			k *clock.ArgumentError
			f *fence.ArgumentError
			l *lease.ArgumentError
			n *naive.ArgumentError
			v *convert.ArgumentError
		)
		if !errors.As(c.err, &k) || !errors.As(c.err, &f) || !errors.As(c.err, &l) || !errors.As(c.err, &n) || !errors.As(c.err, &v) {
			t.Errorf("%v: not matched by every package's ArgumentError", c.err)
			continue
		}
		if k.Pkg != c.pkg {
			t.Errorf("%v: Pkg = %q, want %q", c.err, k.Pkg, c.pkg)
		}
	}
}
