package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

func revokeMsg(resource, holder string, fence uint64) wire.Message {
	return wire.Message{Op: wire.OpRevoke, Request: reqOf("", "", resource, holder, fence)}
}

func proclaimMsg(id, resource, holder string, fence uint64, value string) wire.Message {
	return wire.Message{Op: wire.OpProclaim, Request: reqOf("", id, resource, holder, fence), Secret: secretOf(holder), Value: value}
}

func refusedNotHeld(t *testing.T, r *rig, m wire.Message) {
	t.Helper()
	reply, err := r.call(m)
	we, ok := errAs(reply, err)
	if !ok || we.Code != wire.CodeNotHeld || we.Status != 409 {
		t.Fatalf("want 409 not_held, got %+v %v", reply, err)
	}
}

// TestRevokeEndsTheLease: a revoke ends the live lease; the holder's
// renew, release and proclaim are answered "revoked" (for one TTL, then
// "expired"), the next fence is above the revoked one, and the revocation
// survives a restart from the store.
func TestRevokeEndsTheLease(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f := r.granted(acquireMsg("q1", "slot", "a"))
	reply, err := r.call(revokeMsg("slot", "", 0))
	if err != nil || !reply.OK || reply.Revoked == nil || *reply.Revoked != (wire.Revoked{HolderID: "a", Fence: f}) {
		t.Fatalf("revoke: %+v %v", reply, err)
	}
	if got := mustJSON(t, reply); got != `{"ok":true,"revoked":{"holderId":"a","fence":1}}` {
		t.Fatalf("revoke answered %s", got)
	}
	refusedNotHeld(t, r, revokeMsg("slot", "", 0)) // nothing left to revoke
	for _, m := range []wire.Message{renewMsg("n1", "slot", "a", f, secretOf("a")), releaseMsg("r1", "slot", "a", f, secretOf("a")),
		proclaimMsg("p1", "slot", "a", f, "x")} {
		if reply, err := r.call(m); err != nil || reply.OK || reply.Reason != wire.ReasonRevoked {
			t.Fatalf("%s after the revoke: %+v %v", m.Op, reply, err)
		}
	}
	// A restart reads the revocation back.
	r2 := newRig(t, r.disk, LocalConfig{})
	if reply, err := r2.call(renewMsg("n2", "slot", "a", f, secretOf("a"))); err != nil || reply.Reason != wire.ReasonRevoked {
		t.Fatalf("renew after restart: %+v %v", reply, err)
	}
	f2 := r2.granted(acquireMsg("q2", "slot", "b"))
	if f2 <= f {
		t.Fatalf("fence %d after revoking %d", f2, f)
	}
	// Still "revoked" under the new holder's lease, until a TTL passed.
	if reply, _ := r2.call(renewMsg("n3", "slot", "a", f, secretOf("a"))); reply.Reason != wire.ReasonRevoked {
		t.Fatalf("renew under the new lease: %+v", reply)
	}
	r2.clk.Advance(1001)
	if reply, _ := r2.call(renewMsg("n4", "slot", "a", f, secretOf("a"))); reply.Reason != string("expired") {
		t.Fatalf("renew a TTL later: %+v", reply)
	}
	if _, err := r2.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e, _ := r2.entry("slot"); e.Revoked != (Revocation{}) {
		t.Fatalf("the sweep kept the revocation: %+v", e)
	}
}

// TestRevokeMatches: a revoke with a holder id or fence ends only that
// lease; another holder or fence, or an expired lease, is not_held and
// changes nothing.
func TestRevokeMatches(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	refusedNotHeld(t, r, revokeMsg("never", "", 0))
	f := r.granted(acquireMsg("q1", "slot", "a"))
	before := r.state()
	refusedNotHeld(t, r, revokeMsg("slot", "b", 0))
	refusedNotHeld(t, r, revokeMsg("slot", "", f+1))
	refusedNotHeld(t, r, revokeMsg("slot", "a", f+1))
	if after := r.state(); mustJSON(t, after) != mustJSON(t, before) {
		t.Fatalf("a refused revoke changed the state")
	}
	if reply, err := r.call(revokeMsg("slot", "a", f)); err != nil || reply.Revoked == nil {
		t.Fatalf("revoke by holder and fence: %+v %v", reply, err)
	}
	r.granted(acquireMsg("q2", "other", "c"))
	r.clk.Advance(1000)
	refusedNotHeld(t, r, revokeMsg("other", "", 0)) // expired: nothing live to revoke
}

// TestRevokeHandsOverAndRemovesWaiters: the first waiter is handed the
// resource by the revoke itself; a revoke naming a waiter removes its
// place, and its call is answered "revoked".
func TestRevokeHandsOverAndRemovesWaiters(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	ctx := context.Background()
	f := r.granted(acquireMsg("q1", "slot", "a"))
	b := r.join(ctx, waitingAcquire("qb", "slot", "b", 5*time.Second), 1)
	c := r.join(ctx, waitingAcquire("qc", "slot", "c", 5*time.Second), 2)
	reply, err := r.call(revokeMsg("slot", "c", 0))
	if err != nil || !reply.OK || reply.RemovedWaiter != "c" || reply.Revoked != nil {
		t.Fatalf("revoke a waiter: %+v %v", reply, err)
	}
	if a := got(t, c); a.err != nil || a.reply.OK || a.reply.Reason != wire.ReasonRevoked {
		t.Fatalf("the removed waiter was answered %+v %v", a.reply, a.err)
	}
	pending(t, "b", b)
	if reply, err := r.call(revokeMsg("slot", "", 0)); err != nil || reply.Revoked == nil || reply.Revoked.Fence != f {
		t.Fatalf("revoke: %+v %v", reply, err)
	}
	a := got(t, b)
	if fb := mustGrant(t, a.reply, a.err); fb <= f {
		t.Fatalf("b got fence %d after %d was revoked", fb, f)
	}
	eventually(t, "no waiter", func() bool { return r.svc.Waiting() == 0 })
}

// TestRevokeNeedsLoopbackWithoutAuth: without an Authorize, the handler
// takes a revoke only from a loopback address.
func TestRevokeNeedsLoopbackWithoutAuth(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{{"127.0.0.1:5000", true}, {"[::1]:5000", true}, {"[::ffff:127.0.0.1]:1", true}, {"10.0.0.1:5000", false},
		{"192.0.2.1:80", false}, {"", false}, {"[2001:db8::1]:80", false}} {
		e := httpapi.RevokeAllowed(wire.OpRevoke, c.addr)
		if (e == nil) != c.ok || (e != nil && (e.Status != 403 || e.Code != wire.CodeForbidden)) {
			t.Fatalf("%q: %v, want allowed %v", c.addr, e, c.ok)
		}
		if e := httpapi.RevokeAllowed(wire.OpAcquire, c.addr); e != nil {
			t.Fatalf("acquire from %q refused: %v", c.addr, e)
		}
	}
	r := newRig(t, nil, LocalConfig{})
	r.granted(acquireMsg("q1", "slot", "a"))
	// httptest.NewRequest comes from 192.0.2.1: not loopback.
	if st, out := r.do("POST", "/v1/revoke", `{"resource":"slot"}`); st != 403 || errCodeOf(t, out) != wire.CodeForbidden {
		t.Fatalf("revoke from 192.0.2.1: %d %v", st, out)
	}
	if e, _ := r.entry("slot"); e.Fence == 0 {
		t.Fatal("a refused revoke ended the lease")
	}
	for _, bad := range []struct{ body, code string }{
		{`{"resource":"slot","secret":"0123456789abcdef"}`, wire.CodeUnknownField},
		{`{}`, wire.CodeMissingField},
		{`{"resource":"slot","fence":0}`, wire.CodeInvalidValue},
		{`{"resource":"slot","holderId":null}`, wire.CodeWrongType},
		{`{"resource":"slot","resource":"slot"}`, wire.CodeDuplicateField},
	} {
		if st, out := r.do("POST", "/v1/revoke", bad.body); st != 400 || errCodeOf(t, out) != bad.code {
			t.Fatalf("%s: %d %v, want %s", bad.body, st, out, bad.code)
		}
	}
}

// TestElectionValues: an acquisition carries a value that inspect
// answers; its holder proclaims a new one (a non-holder, a wrong secret
// or an ended lease cannot); values up to 4 KiB, 4097 bytes refused; the
// value survives a restart; an observer with afterValue wakes when the
// value changes.
func TestElectionValues(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	m := acquireMsg("q1", "leader", "a")
	m.Value = "10.0.0.1:80"
	f := r.granted(m)
	if reply, _ := r.call(inspectMsg("leader")); reply.Value != "10.0.0.1:80" || reply.Fence != f {
		t.Fatalf("inspect: %+v", reply)
	}
	ctx := context.Background()
	ob := r.callAsync(ctx, wire.Message{Op: wire.OpInspect, Request: requestOf("leader"), After: f, HasAfter: true,
		AfterValue: "10.0.0.1:80", HasAfterValue: true, Wait: 5 * time.Second})
	eventually(t, "the observer", func() bool { return r.svc.Waiting() == 1 })
	big := strings.Repeat("v", wire.MaxValueBytes)
	if reply, err := r.call(proclaimMsg("p1", "leader", "a", f, big)); err != nil || !reply.OK {
		t.Fatalf("proclaim: %+v %v", reply, err)
	}
	a := got(t, ob)
	if a.err != nil || a.reply.Value != big || a.reply.HolderID != "a" || a.reply.Fence != f {
		t.Fatalf("the observer saw %+v %v", a.reply, a.err)
	}
	// The same value: an observer with it waits; another holder or secret cannot proclaim.
	if reply, _ := r.call(proclaimMsg("p2", "leader", "b", f, "x")); reply.OK || reply.Reason != "expired" {
		t.Fatalf("a non-holder proclaimed: %+v", reply)
	}
	wrong := proclaimMsg("p3", "leader", "a", f, "x")
	wrong.Secret = secretOf("z")
	if _, err := r.call(wrong); !isCode(err, wire.CodeWrongSecret) {
		t.Fatalf("a wrong secret proclaimed: %v", err)
	}
	r2 := newRig(t, r.disk, LocalConfig{})
	if reply, _ := r2.call(inspectMsg("leader")); reply.Value != big {
		t.Fatalf("after a restart the value is %q", reply.Value)
	}
	// Over the wire: 4096 bytes taken, 4097 refused with the error shape.
	for _, c := range []struct {
		n    int
		code string
	}{{wire.MaxValueBytes, ""}, {wire.MaxValueBytes + 1, wire.CodeInvalidValue}} {
		body := `{"requestId":"p9","resource":"leader","holderId":"a","fence":1,"secret":"` + secretOf("a") + `","value":"` + strings.Repeat("w", c.n) + `"}`
		st, out := r2.do("POST", "/v1/proclaim", body)
		if c.code == "" && (st != 200 || out["ok"] != true) || c.code != "" && (st != 400 || errCodeOf(t, out) != c.code) {
			t.Fatalf("value of %d bytes: %d %v", c.n, st, out)
		}
	}
	r2.clk.Advance(1000)
	if reply, _ := r2.call(proclaimMsg("p4", "leader", "a", f, "late")); reply.OK || reply.Reason != "expired" {
		t.Fatalf("proclaim of an expired lease: %+v", reply)
	}
}

// TestRevokeAndProclaimEvents: a revoke publishes revoked (then granted
// to the waiter it hands over to, with its value), a removed waiter left,
// and a proclamation proclaimed with its value (none when the value does
// not change).
func TestRevokeAndProclaimEvents(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	w, err := r.svc.Watch(wire.WatchRequest{}, wire.Caller{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	f := r.granted(acquireMsg("q1", "slot", "a"))
	wb := waitingAcquire("qb", "slot", "b", 5*time.Second)
	wb.Value = "b's address"
	b := r.join(ctx, wb, 1)
	c := r.join(ctx, waitingAcquire("qc", "slot", "c", 5*time.Second), 2)
	if _, err := r.call(revokeMsg("slot", "c", 0)); err != nil {
		t.Fatal(err)
	}
	got(t, c)
	if _, err := r.call(revokeMsg("slot", "", 0)); err != nil {
		t.Fatal(err)
	}
	fb := mustGrant(t, got(t, b).reply, nil)
	p := proclaimMsg("p1", "slot", "b", fb, "new")
	for range 2 {
		if reply, err := r.call(p); err != nil || !reply.OK {
			t.Fatalf("proclaim: %+v %v", reply, err)
		}
	}
	evs := drained(w)
	want := []string{"granted slot a", "waiting slot b", "waiting slot c", "left slot c", "revoked slot a", "granted slot b", "proclaimed slot b"}
	if g := kinds(t, evs, 0); strings.Join(g, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", g, want)
	}
	if ev := evs[4]; ev.Fence != f {
		t.Fatalf("revoked event %+v", ev)
	}
	if ev := evs[5]; ev.Value == nil || *ev.Value != "b's address" || ev.Fence != fb {
		t.Fatalf("granted event %+v", ev)
	}
	if ev := evs[6]; ev.Value == nil || *ev.Value != "new" || ev.Fence != fb {
		t.Fatalf("proclaimed event %+v", ev)
	}
}
