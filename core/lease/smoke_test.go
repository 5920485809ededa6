package lease_test

import (
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

func TestSmoke(t *testing.T) {
	cc, _ := clock.NewManual("coordinator", clock.ManualOptions{StepPerRead: 1})
	ac, _ := clock.NewManual("agent-a", clock.ManualOptions{StepPerRead: 1})
	co, err := lease.NewCoordinator(lease.CoordinatorConfig{Clock: cc, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := lease.NewClient(lease.ClientConfig{Clock: ac, HolderID: "a", ClockSkew: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := fence.NewGate("r", fence.Options{})
	req, err := cl.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	out, err := co.Acquire(req)
	if err != nil || !out.OK {
		t.Fatal(out, err)
	}
	l, err := cl.CompleteAcquire(req, *out.Grant)
	if err != nil {
		t.Fatal(err)
	}
	if l.Deadline().Millis != 990 {
		t.Fatal(l.Deadline())
	}
	n := 0
	if err := g.Commit(l.Token(), func() error { n++; return nil }); err != nil || n != 1 {
		t.Fatal(err)
	}
	if _, err := cl.CompleteAcquire(req, *out.Grant); err == nil {
		t.Fatal("second completion")
	}
}
