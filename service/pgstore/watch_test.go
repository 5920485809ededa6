//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// TestWaiterOnAnotherReplica: a waiting acquisition on one replica is
// handed the resource released on another, told by that replica's NOTIFY
// (the waiting replica's polls are set to an hour, so nothing else can
// tell it), well before its wait ends.
func TestWaiterOnAnotherReplica(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	pgstore.SetWatchPolls(g.r[1].store, time.Hour, time.Hour, time.Hour)
	f, _ := g.grant(0, acquireMsg("q1", "r", "a"))
	m := acquireMsg("q2", "r", "b")
	m.Wait = 30 * time.Second
	got := make(chan wire.Reply, 1)
	go func() {
		reply, err := g.r[1].svc.Call(context.Background(), m)
		if err != nil {
			t.Error(err)
		}
		got <- reply
	}()
	deadline := time.Now().Add(10 * time.Second)
	for g.r[1].svc.Waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("b is not waiting")
		}
		time.Sleep(time.Millisecond)
	}
	<-pgstore.Listening(g.r[1].store)
	g.ok(0, "release", releaseMsg("rel", "r", "a", f))
	start := time.Now()
	select {
	case reply := <-got:
		if !reply.OK || reply.Grant == nil || reply.Grant.HolderID != "b" || reply.Grant.Fence <= f {
			t.Fatalf("b got %+v", reply)
		}
		t.Logf("handed over %v after the release on the other replica", time.Since(start))
	case <-time.After(20 * time.Second):
		t.Fatal("b was not handed the resource within 20 s: the notification did not come")
	}
}

// watchCounter counts a watch's reports.
type watchCounter struct {
	t     *testing.T
	calls atomic.Int64
}

// wait waits until more reports came than there were.
func (c *watchCounter) wait(more int64, why string) {
	c.t.Helper()
	c.waitFrom(c.calls.Load(), more, why)
}

// waitFrom waits until more reports than from have come.
func (c *watchCounter) waitFrom(from, more int64, why string) {
	c.t.Helper()
	want := from + more
	for deadline := time.Now().Add(20 * time.Second); c.calls.Load() < want; {
		if time.Now().After(deadline) {
			c.t.Fatalf("no report: %s", why)
		}
		time.Sleep(time.Millisecond)
	}
}

func listening(t *testing.T, dsn string, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var got int
		pgtest.QueryRow(t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN lease_fence'`, &got)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections listen, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A Watch hears the other replicas' grants and releases; when its LISTEN
// connection is killed and cannot come back, it reports every watched
// resource on the poll; once it listens again it hears them again; after
// stop, fn is not called.
func TestWatchFallsBackToThePoll(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	st := g.r[1].store
	pgstore.SetWatchPolls(st, 20*time.Millisecond, time.Hour, time.Hour)
	c := &watchCounter{t: t}
	stop := st.Watch("r", func() { c.calls.Add(1) })
	<-pgstore.Listening(st)
	f, _ := g.grant(0, acquireMsg("q1", "r", "a"))
	c.wait(1, "a grant on the other replica")

	pgstore.BlockListen(st, true)
	pgtest.Exec(t, g.dsn, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN lease_fence'`)
	c.wait(5, "the poll while not listening")

	pgstore.BlockListen(st, false)
	listening(t, g.dsn, 1)
	if code, out := g.post(0, releaseMsg("rel", "r", "a", f)); code != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", code, out)
	}
	c.wait(1, "a release on the other replica, listening again")

	stop()
	after := c.calls.Load()
	other := &watchCounter{t: t}
	stop2 := st.Watch("r", func() { other.calls.Add(1) })
	defer stop2()
	g.grant(0, acquireMsg("q2", "r", "b"))
	other.wait(1, "a grant, to a second watch")
	if n := c.calls.Load() - after; n != 0 {
		t.Fatalf("a stopped watch was called %d times", n)
	}
}

// A LISTEN connection cut off silently (a proxy that stops forwarding: no
// error ever comes) is found out by its heartbeat, and the store reports
// every watched resource on the poll until it listens again.
func TestWatchFindsASilentLink(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	px, st := g.throughProxy()
	pgstore.SetWatchPolls(st, 20*time.Millisecond, time.Hour, 100*time.Millisecond)
	c := &watchCounter{t: t}
	stop := st.Watch("r", func() { c.calls.Add(1) })
	defer stop()
	<-pgstore.Listening(st)
	px.Partition()
	c.wait(5, "the poll once the silent link is found out")
	px.Heal()
	// Counted from before the grant: once healed, the store may report r
	// on its poll, on listening again, or on the grant's notification,
	// and the first two may come after the grant's commit but before the
	// grant's answer (then no notification follows: it was sent before
	// the LISTEN).
	from := c.calls.Load()
	g.grant(0, acquireMsg("q1", "r", "a"))
	c.waitFrom(from, 1, "a grant once healed")
}

// An inspection on any replica answers the last fence of a free resource:
// after a release, and after the expired lease is swept.
func TestInspectLastFenceAcrossReplicas(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	inspect := func(i int, resource string) (bool, uint64) {
		t.Helper()
		r, err := g.r[i].svc.Call(context.Background(), wire.Message{Op: wire.OpInspect, Request: lease.Request{Resource: resource}})
		if err != nil || !r.OK || r.Held == nil || r.LastFence == nil {
			t.Fatalf("inspect %s: %+v %v", resource, r, err)
		}
		return *r.Held, *r.LastFence
	}
	f1, _ := g.grant(0, acquireMsg("a", "released", "A"))
	if code, out := g.post(0, releaseMsg("rel", "released", "A", f1)); code != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", code, out)
	}
	if held, last := inspect(1, "released"); held || last != f1 {
		t.Fatalf("after a release: held %v, last fence %d, want %d", held, last, f1)
	}
	f2, _ := g.grant(1, acquireMsg("b", "expired", "B"))
	g.step(2*ttlMs + 1)
	g.sweepAll(0)
	if held, last := inspect(1, "expired"); held || last != f2 {
		t.Fatalf("after the sweep of an expired lease: held %v, last fence %d, want %d", held, last, f2)
	}
	if held, last := inspect(0, "never"); held || last != 0 {
		t.Fatalf("never held: %v %d", held, last)
	}
}

// TestNotifiesOnlyWhileListened: while no coordinator listens, grants and
// releases send no notifications; once one listens (it marks the meta row
// before its LISTEN), every grant and release of every replica does.
func TestNotifiesOnlyWhileListened(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	cycle := func(id string) {
		f, _ := g.grant(0, acquireMsg("a-"+id, "r", "a"))
		g.ok(0, "release", releaseMsg("rel-"+id, "r", "a", f))
	}
	cycle("1")
	if n := pgstore.Notified(g.r[0].store); n != 0 {
		t.Fatalf("%d notifications with no coordinator listening", n)
	}
	stop := g.r[1].store.Watch("other", func() {})
	defer stop()
	<-pgstore.Listening(g.r[1].store)
	var marked bool
	pgtest.QueryRow(t, g.dsn, `SELECT listening_until > extract(epoch FROM clock_timestamp()) * 1000 + 50000 FROM lease_fence_meta`, &marked)
	if !marked {
		t.Fatal("the listening coordinator did not mark the meta row for a minute")
	}
	cycle("2")
	if n := pgstore.Notified(g.r[0].store); n != 2 {
		t.Fatalf("%d notifications of a grant and a release while a coordinator listens, want 2", n)
	}
}
