//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

func revokeMsg(resource, holder string, f uint64) wire.Message {
	return wire.Message{Op: wire.OpRevoke, Request: lease.Request{Resource: resource, HolderID: holder, Fence: f}}
}

// TestRevokeRaisesTheFloor: with the fence table in the coordinator's
// database, a revoke on one replica raises the resource's floor above the
// revoked fence in its own transaction (the revoked holder's next write is
// refused at once), the holder's renewal on another replica is answered
// "revoked", and the next grant's fence is above the floor (its own raise
// succeeds). A revoke of a free resource is 409 not_held.
func TestRevokeRaisesTheFloor(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{FenceTable: "lease_fence"})
	gt, _ := gate(t, g)
	ctx := context.Background()
	fa, _ := g.grant(0, acquireMsg("a-1", "doc", "A"))
	a := fence.Token{Resource: "doc", HolderID: "A", Fence: fa}
	if err := gt.Admit(ctx, a); err != nil {
		t.Fatal(err)
	}
	st, out := g.post(1, revokeMsg("doc", "", 0))
	rv, _ := out["revoked"].(map[string]any)
	if st != 200 || out["ok"] != true || rv["holderId"] != "A" || rv["fence"] != float64(fa) {
		t.Fatalf("revoke: %d %v", st, out)
	}
	floor, err := gt.Floor(ctx, "doc")
	if err != nil || floor <= fa {
		t.Fatalf("the floor after the revoke is %d (%v), want above %d", floor, err, fa)
	}
	var stale *fence.StaleFenceError
	if err := gt.Admit(ctx, a); !errors.As(err, &stale) {
		t.Fatalf("the revoked holder's write: %v, want refused", err)
	}
	if st, out := g.post(0, renewMsg("a-2", "doc", "A", fa)); st != 200 || out["ok"] != false || out["reason"] != wire.ReasonRevoked {
		t.Fatalf("renew after the revoke: %d %v", st, out)
	}
	if st, out := g.post(1, releaseMsg("a-3", "doc", "A", fa)); st != 200 || out["reason"] != wire.ReasonRevoked {
		t.Fatalf("release after the revoke: %d %v", st, out)
	}
	if st, out := g.post(0, revokeMsg("doc", "", 0)); errCode(t, st, out) != wire.CodeNotHeld || st != 409 {
		t.Fatalf("a second revoke: %d %v", st, out)
	}
	fb, _ := g.grant(0, acquireMsg("b-1", "doc", "B"))
	if fb <= floor {
		t.Fatalf("B's fence %d is not above the floor %d", fb, floor)
	}
	if f, _ := gt.Floor(ctx, "doc"); f != fb {
		t.Fatalf("the floor after B's grant is %d, want %d", f, fb)
	}
	// The expired revocation is swept a TTL later.
	g.step(ttlMs + 1)
	if _, err := g.r[0].store.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	var rf int64
	pgtest.QueryRow(t, g.dsn, `SELECT revoked_fence FROM lease_fence_leases WHERE resource = 'doc'`, &rf)
	if rf != 0 {
		t.Fatalf("the sweep kept the revocation of fence %d", rf)
	}
}

// TestValuesAcrossReplicasAndUpgrade: a value acquired on one replica is
// inspected on another and survives a reopen; a state of schema version 3
// is upgraded to 4 at Open, its leases kept, with no value.
func TestValuesAcrossReplicasAndUpgrade(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	m := acquireMsg("a-1", "leader", "A")
	m.Value = strings.Repeat("é", wire.MaxValueBytes/2)
	fa, _ := g.grant(0, m)
	inspect := func(i int) map[string]any {
		_, out := g.post(i, wire.Message{Op: wire.OpInspect, Request: lease.Request{Resource: "leader"}})
		return out
	}
	if out := inspect(1); out["value"] != m.Value || out["fence"] != float64(fa) {
		t.Fatalf("inspect on the other replica: %v", out)
	}
	p := wire.Message{Op: wire.OpProclaim, Request: lease.Request{RequestID: "p-1", Resource: "leader", HolderID: "A", Fence: fa},
		Secret: secretOf("A"), Value: "10.0.0.2:80"}
	g.ok(1, "proclaim", p)
	p.Request.HolderID, p.Secret = "B", secretOf("B")
	if st, out := g.post(1, p); st != 200 || out["ok"] != false {
		t.Fatalf("proclaim by a non-holder: %d %v", st, out)
	}
	g.r[0].store.Close()
	g.r[1].store.Close()
	downgrade(t, g.dsn, 3, "")
	g.r = []*replica{g.open(pgstore.Options{}, false)}
	if logs := g.r[0].logs.String(); !strings.Contains(logs, "upgraded from version 3 to 8") {
		t.Fatalf("no upgrade logged: %s", logs)
	}
	if out := inspect(0); out["held"] != true || out["fence"] != float64(fa) || out["value"] != nil {
		t.Fatalf("after the upgrade: %v", out)
	}
	g.ok(0, "renew after the upgrade", renewMsg("a-2", "leader", "A", fa))
	p.Request.HolderID, p.Secret, p.Value = "A", secretOf("A"), "again"
	if st, out := g.post(0, p); st != 200 || out["ok"] != true || inspect(0)["value"] != "again" {
		t.Fatalf("proclaim after the upgrade: %d %v", st, out)
	}
}
