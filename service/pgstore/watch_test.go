//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
)

// TestWaiterOnAnotherReplica: a waiting acquisition on one replica is
// handed the resource released on another (Store.Watch), well before its
// wait ends.
func TestWaiterOnAnotherReplica(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
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
	if st, out := g.post(0, releaseMsg("rel", "r", "a", f)); st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	start := time.Now()
	select {
	case reply := <-got:
		if !reply.OK || reply.Grant == nil || reply.Grant.HolderID != "b" || reply.Grant.Fence <= f {
			t.Fatalf("b got %+v", reply)
		}
		t.Logf("handed over %v after the release on the other replica (poll %v)", time.Since(start), pgstore.WatchPoll)
	case <-time.After(10 * time.Second):
		t.Fatal("b was not handed the resource within 10 s")
	}
}
