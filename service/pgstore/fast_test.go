//go:build !js && !wasip1

package pgstore_test

import (
	"testing"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
)

// A replica that decided last on a resource decides the next call on it in
// one round trip (lease_fence_decide); the first call on a resource it
// does not know locks the row first.
func TestOneRoundTripPerDecision(t *testing.T) {
	g := newRig(t, 1, pgstore.Options{})
	f, _ := g.grant(0, acquireMsg("a-1", "doc", "A"))
	for i := range 3 {
		if st, out := g.post(0, renewMsg("r-"+string(rune('0'+i)), "doc", "A", f)); st != 200 || out["ok"] != true {
			t.Fatalf("renew: %d %v", st, out)
		}
	}
	if st, out := g.post(0, acquireMsg("b-1", "doc", "B")); st != 200 || out["heldBy"] != "A" {
		t.Fatalf("acquire of a held resource: %d %v", st, out)
	}
	if st, out := g.post(0, releaseMsg("rel-1", "doc", "A", f)); st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	if st, out := g.post(0, releaseMsg("rel-1", "doc", "A", f)); st != 200 || out["ok"] != true {
		t.Fatalf("the release's retry: %d %v", st, out)
	}
	if f2, _ := g.grant(0, acquireMsg("b-2", "doc", "B")); f2 <= f {
		t.Fatalf("fence %d after %d", f2, f)
	}
	one, two, locked := pgstore.Paths(g.r[0].store)
	if one != 7 || two != 0 || locked != 1 {
		t.Fatalf("decisions in one round trip %d (want 7), after a read %d (want 0), locking the row %d (want 1)", one, two, locked)
	}
}

// A replica's knowledge of a row goes out of date when another replica, a
// sweep or anyone else writes the row: its decision is then made again on
// the row as it is, never on what it knew.
func TestDecisionsOnAChangedRow(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	fa, _ := g.grant(0, acquireMsg("a-1", "doc", "A"))
	// Released through the other replica: replica 0 still knows A's lease.
	if st, out := g.post(1, releaseMsg("rel-1", "doc", "A", fa)); st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	fb, _ := g.grant(0, acquireMsg("b-1", "doc", "B"))
	if fb <= fa {
		t.Fatalf("fence %d after %d", fb, fa)
	}
	// Changed behind every replica's back: B's lease expired.
	exec(t, g.dsn, `UPDATE lease_fence_leases SET expires_at = 1, decided_at = 0 WHERE resource = 'doc'`)
	if st, out := g.post(0, renewMsg("r-1", "doc", "B", fb)); st != 200 || out["reason"] != string(lease.Expired) {
		t.Fatalf("renewal of a lease expired meanwhile: %d %v", st, out)
	}
	// Deleted behind its back: the fence still goes up.
	exec(t, g.dsn, `DELETE FROM lease_fence_leases`)
	if fc, _ := g.grant(0, acquireMsg("c-1", "doc", "C")); fc <= fb {
		t.Fatalf("fence %d after %d", fc, fb)
	}
	// Another replica granted meanwhile (its counter moved past what this
	// one knows): the fence taken is the counter's, and the answer says it.
	if st, out := g.post(0, wire.Message{Op: wire.OpInspect, Request: lease.Request{Resource: "third"}}); st != 200 || out["held"] != false {
		t.Fatalf("inspect: %d %v", st, out)
	}
	f1, _ := g.grant(1, acquireMsg("d-1", "other", "D"))
	one, _, _ := pgstore.Paths(g.r[0].store)
	fe, _ := g.grant(0, acquireMsg("e-1", "third", "E"))
	if fe <= f1 {
		t.Fatalf("fence %d after %d", fe, f1)
	}
	if one2, _, _ := pgstore.Paths(g.r[0].store); one2 != one+1 {
		t.Fatalf("the grant after the counter moved was not made in one round trip (%d, %d)", one, one2)
	}
	var stored uint64
	queryRow(t, g.dsn, `SELECT fence FROM lease_fence_leases WHERE resource = 'third'`, &stored)
	if stored != fe {
		t.Fatalf("the row holds fence %d, the answer %d", stored, fe)
	}
}
