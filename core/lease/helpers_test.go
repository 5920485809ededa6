package lease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Fixed instants (milliseconds) used by the step tables.
const (
	t0    = 0.0
	t40   = 40.0
	t500  = 500.0
	t900  = 900.0
	t950  = 950.0
	t999  = 999.0
	t1000 = 1000.0
	t1040 = 1040.0
	t1400 = 1400.0
	t1899 = 1899.0
	t1900 = 1900.0
	t2000 = 2000.0
	t3000 = 3000.0
)

const coordDomain = "coordinator"

func manual(t testing.TB, domain string, start, step float64) *clock.Manual {
	t.Helper()
	m, err := clock.NewManual(domain, clock.ManualOptions{Start: start, StepPerRead: step})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newCoordinator(t testing.TB, clk clock.Clock, ttl time.Duration, start uint64) *lease.Coordinator {
	t.Helper()
	c, err := lease.NewCoordinator(lease.CoordinatorConfig{Clock: clk, TTL: ttl, StartFence: start})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// seqIDs returns a request-id generator that yields prefix-1, prefix-2, ...
func seqIDs(prefix string) func() string {
	n := 0
	return func() string {
		n++
		return prefix + "-" + itoa(n)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

func newClient(t testing.TB, clk clock.Clock, holder string, skew time.Duration) *lease.Client {
	t.Helper()
	c, err := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: holder, ClockSkew: skew, NewRequestID: seqIDs(holder)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// acquireReq is an acquisition request as it arrives at the coordinator.
func acquireReq(id, holder, resource string) lease.Request {
	return lease.Request{Kind: lease.KindAcquire, RequestID: id, Resource: resource, HolderID: holder, SentAt: clock.At("agent-"+holder, 0)}
}

func renewReq(id, holder, resource string, f uint64) lease.Request {
	r := acquireReq(id, holder, resource)
	r.Kind, r.Fence = lease.KindRenew, f
	return r
}

func at(ms float64) clock.Instant { return clock.At(coordDomain, ms) }

// mustGrant(t)(c.AcquireAt(...)) returns the grant or fails the test.
func mustGrant(t testing.TB) func(lease.Outcome, error) lease.Grant {
	t.Helper()
	return func(out lease.Outcome, err error) lease.Grant {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if !out.OK {
			t.Fatalf("outcome %+v, want a grant", out)
		}
		return out.Grant
	}
}

// acquire begins cl's acquisition of resource, has co grant it and completes
// it, failing the test if any step fails.
func acquire(t testing.TB, cl *lease.Client, co *lease.Coordinator, resource string) *lease.Lease {
	t.Helper()
	req, err := cl.BeginAcquire(resource)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cl.CompleteAcquire(req, mustGrant(t)(co.Acquire(req)))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// errKind classifies err for the step tables.
func errKind(err error) string {
	var (
		de  *clock.DomainError
		re  *clock.ReadingError
		cae *clock.ArgumentError
		fae *fence.ArgumentError
		lae *lease.ArgumentError
		me  *lease.MismatchError
		ce  *lease.CompletedError
		se  *fence.StaleFenceError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &de):
		return "domain"
	case errors.As(err, &re):
		return "reading"
	case errors.As(err, &cae), errors.As(err, &fae), errors.As(err, &lae):
		return "arg"
	case errors.As(err, &me):
		return "mismatch"
	case errors.As(err, &ce):
		return "completed"
	case errors.As(err, &se):
		return "stale"
	}
	return "other: " + err.Error()
}

func wantErrKind(t testing.TB, err error, kind string) {
	t.Helper()
	if got := errKind(err); got != kind {
		t.Fatalf("err = %v (%s), want %s", err, got, kind)
	}
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "lease: ") && !strings.HasPrefix(msg, "clock: ") && !strings.HasPrefix(msg, "fence: ") {
			t.Fatalf("message %q has no package prefix", msg)
		}
	}
}
