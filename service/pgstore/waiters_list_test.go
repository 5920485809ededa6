//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
)

// TestWaitersOfAnotherReplica: a waiter is kept by the replica its call
// reached, not in PostgreSQL (docs/console.md, Limits). That replica's
// list names and counts it; another replica's list does not, but its
// watch receives the waiter's "waiting" event, with no count (the count
// is the deciding replica's queue).
func TestWaitersOfAnotherReplica(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	ctx := context.Background()
	w := g.listeningWatch(1, "wq/")
	f, _ := g.grant(0, acquireMsg("q1", "wq/r", "a"))
	m := acquireMsg("q2", "wq/r", "b")
	m.Wait = 30 * time.Second
	got := make(chan wire.Reply, 1)
	go func() {
		reply, err := g.r[0].svc.Call(ctx, m)
		if err != nil {
			t.Error(err)
		}
		got <- reply
	}()
	var ev wire.Event
	for ev.Type != wire.EventWaiting {
		select {
		case ev = <-w.Events():
		case <-time.After(30 * time.Second): // against a hang only
			t.Fatal("no waiting event from the other replica")
		}
	}
	if ev.Resource != "wq/r" || ev.HolderID != "b" || ev.Waiters != nil {
		t.Fatalf("waiting event %+v, want wq/r b with no count", ev)
	}
	waiters := func(i int) (int, []string) {
		page, err := g.r[i].svc.List(ctx, wire.ListRequest{Prefix: "wq/", Waiters: true}, nil)
		if err != nil || len(page.Leases) != 1 || page.Leases[0].HolderID != "a" {
			t.Fatalf("replica %d lists %+v, %v", i, page.Leases, err)
		}
		return page.Leases[0].Waiters, page.Leases[0].WaiterIDs
	}
	if n, ids := waiters(0); n != 1 || !slices.Equal(ids, []string{"b"}) {
		t.Fatalf("the waiter's replica lists %d waiters %v, want 1 [b]", n, ids)
	}
	if n, ids := waiters(1); n != 0 || len(ids) != 0 {
		t.Fatalf("the other replica lists %d waiters %v, want none", n, ids)
	}
	g.ok(0, "release", releaseMsg("rel", "wq/r", "a", f))
	select {
	case reply := <-got:
		if !reply.OK || reply.Grant == nil || reply.Grant.HolderID != "b" {
			t.Fatalf("b got %+v", reply)
		}
	case <-time.After(30 * time.Second): // against a hang only
		t.Fatal("b was not granted after the release")
	}
}
