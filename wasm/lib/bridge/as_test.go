package bridge

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/wasm/lib/convert"
)

// multi wraps several errors with Unwrap() []error but is not errors.Join's
// type.
type multi []error

func (m multi) Error() string   { return "multi" }
func (m multi) Unwrap() []error { return m }

// TestAsMatchesErrorsAs checks as against errors.As for every error type
// status and argName look for, in every shape of wrapping: bare, wrapped by
// %w once and twice, joined (first, last, inside a join inside a wrap), in a
// custom multi-error, and absent.
func TestAsMatchesErrorsAs(t *testing.T) {
	stale := &fence.StaleFenceError{}
	domain := &clock.DomainError{Want: "a", Got: "b"}
	reading := &clock.ReadingError{Domain: "d"}
	done := &lease.CompletedError{RequestID: "r"}
	mismatch := &lease.MismatchError{Field: "f"}
	convArg := &convert.ArgumentError{Arg: "x", Reason: "bad"}
	clockArg := &clock.ArgumentError{Arg: "y"}
	fenceArg := &fence.ArgumentError{Arg: "z"}
	leaseArg := &lease.ArgumentError{Arg: "w"}
	all := []error{stale, domain, reading, done, mismatch, convArg, clockArg, fenceArg, leaseArg}
	plain := errors.New("plain")

	var shapes []error
	shapes = append(shapes, nil, plain, fmt.Errorf("wrapped: %w", plain), errors.Join(plain, plain))
	for _, e := range all {
		shapes = append(shapes,
			e,
			fmt.Errorf("once: %w", e),
			fmt.Errorf("twice: %w", fmt.Errorf("once: %w", e)),
			errors.Join(e, plain),
			errors.Join(plain, e),
			fmt.Errorf("outer: %w", errors.Join(plain, fmt.Errorf("inner: %w", e))),
			multi{plain, multi{e}},
			fmt.Errorf("two: %w and %w", plain, e),
		)
	}
	// Two candidates: both find the first in depth-first order.
	shapes = append(shapes, errors.Join(fmt.Errorf("a: %w", convArg), leaseArg), multi{multi{plain, clockArg}, fenceArg})

	for i, err := range shapes {
		check(t, i, err, stale)
		check(t, i, err, domain)
		check(t, i, err, reading)
		check(t, i, err, done)
		check(t, i, err, mismatch)
		check(t, i, err, convArg)
		check(t, i, err, clockArg)
		check(t, i, err, fenceArg)
		check(t, i, err, leaseArg)
		want, wantOK := any(nil), false
		var iface interface{ InvalidArgument() bool }
		if errors.As(err, &iface) {
			want, wantOK = iface, true
		}
		got, ok := as[interface{ InvalidArgument() bool }](err)
		if ok != wantOK || (ok && any(got) != want) {
			t.Errorf("shape %d (%v): as[InvalidArgument] = %v, %v; errors.As = %v, %v", i, err, got, ok, want, wantOK)
		}
	}
}

func check[T error](t *testing.T, i int, err error, _ T) {
	t.Helper()
	var want T
	wantOK := errors.As(err, &want)
	got, ok := as[T](err)
	if ok != wantOK || any(got) != any(want) {
		t.Errorf("shape %d (%v): as[%T] = %v, %v; errors.As = %v, %v", i, err, want, got, ok, want, wantOK)
	}
}
