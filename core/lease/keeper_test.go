package lease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// TestKeeper walks one hold: renewals due every 300 ms after each
// renewal's own send instant, a renewal's time bounded by the time left, a
// failed renewal tried again sooner, the loss at the holder's deadline
// exactly, and no revival by a renewal that completes after it.
func TestKeeper(t *testing.T) {
	holder := manual(t, "agent", t0, 0)
	coord := manual(t, coordDomain, t0, 0)
	co := newCoordinator(t, coord, time.Second, 0)
	c := newClient(t, holder, "a", 50*time.Millisecond)
	at := func(ms float64) clock.Instant { return clock.At("agent", ms) }
	req, _ := c.BeginAcquire("r")
	holder.Set(t40) // the reply arrives 40 ms later
	out, err := co.Acquire(req)
	if err != nil || !out.OK {
		t.Fatal(out, err)
	}
	l, _ := c.CompleteAcquire(req, out.Grant)
	if l.Anchor() != at(t0) {
		t.Fatalf("anchor %v", l.Anchor())
	}
	k, err := lease.NewKeeper(l, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if k.Deadline() != at(t950) || k.NextRenewal() != at(300) {
		t.Fatalf("deadline %v, next renewal %v", k.Deadline(), k.NextRenewal())
	}
	if left, _ := k.Left(at(t500)); left != 450*time.Millisecond {
		t.Fatalf("left %v", left)
	}
	// A renewal sent at 300, answered at 700: anchored at 300.
	holder.Set(300)
	rr, _ := c.BeginRenewal(k.Lease())
	coord.Set(310)
	rout, _ := co.Renew(rr)
	holder.Set(700)
	l2, err := c.CompleteRenewal(rr, rout.Grant)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Renewed(l2); err != nil {
		t.Fatal(err)
	}
	if k.Deadline() != at(1250) || k.NextRenewal() != at(600) {
		t.Fatalf("after the renewal: deadline %v, next %v", k.Deadline(), k.NextRenewal())
	}
	// An older lease (the first one again) changes nothing.
	if err := k.Renewed(l); err != nil || k.Deadline() != at(1250) {
		t.Fatalf("an older lease: %v, deadline %v", err, k.Deadline())
	}
	// A renewal that got no answer at 800: tried again at 800 + 300/4.
	if err := k.Failed(at(800)); err != nil || k.NextRenewal() != at(875) {
		t.Fatalf("after a failure the next renewal is %v (%v)", k.NextRenewal(), err)
	}
	// Close to the deadline the retry comes at a quarter of the time left,
	// and never after the deadline.
	if err := k.Failed(at(1210)); err != nil || k.NextRenewal() != at(1220) {
		t.Fatalf("near the deadline the next renewal is %v (%v)", k.NextRenewal(), err)
	}
	if err := k.Failed(at(1249)); err != nil || k.NextRenewal() != at(1250) {
		t.Fatalf("at the deadline the next renewal is %v (%v)", k.NextRenewal(), err)
	}
	if lost, _ := k.Check(at(1249.999)); lost {
		t.Fatal("lost before the deadline")
	}
	if lost, _ := k.Check(at(1250)); !lost {
		t.Fatal("not lost at the deadline")
	}
	if lost, _ := k.Check(at(1000)); !lost {
		t.Fatal("the loss was not recorded")
	}
	if left, _ := k.Left(at(1000)); left != 0 {
		t.Fatalf("a lost lease has %v left", left)
	}
	// A renewal that completes now does not revive it.
	holder.Set(1100)
	rr2, _ := c.BeginRenewal(k.Lease())
	rout2, _ := co.Renew(rr2)
	l3, _ := c.CompleteRenewal(rr2, rout2.Grant)
	if err := k.Renewed(l3); !errors.Is(err, lease.ErrLost) || k.Deadline() != at(1250) {
		t.Fatalf("a late renewal: %v, deadline %v", err, k.Deadline())
	}
	if lost, _ := k.Check(at(0)); !lost {
		t.Fatal("lost is not final")
	}
}

func TestKeeperRefuses(t *testing.T) {
	if _, err := lease.NewKeeper(nil, time.Second); err == nil {
		t.Fatal("a Keeper of no lease")
	}
	holder := manual(t, "agent", t0, 0)
	co := newCoordinator(t, manual(t, coordDomain, t0, 0), time.Second, 0)
	c := newClient(t, holder, "a", 0)
	grant := func(resource string) *lease.Lease {
		req, _ := c.BeginAcquire(resource)
		out, _ := co.Acquire(req)
		l, err := c.CompleteAcquire(req, out.Grant)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := grant("r")
	if _, err := lease.NewKeeper(l, 0); err == nil {
		t.Fatal("renewing every 0")
	}
	k, _ := lease.NewKeeper(l, time.Millisecond)
	if err := k.Renewed(grant("other")); err == nil {
		t.Fatal("a lease of another resource taken as a renewal")
	}
	if _, err := k.Check(clock.At("elsewhere", 1)); err == nil {
		t.Fatal("a reading of another domain")
	}
	k.Expire()
	if lost, _ := k.Check(at(1)); !lost {
		t.Fatal("Expire did not lose it")
	}
}
