//go:build !js && !wasip1

package main

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// TestRevokeNeedsAnAdminToken: with -auth, a revoke is refused (403,
// nothing changed) for a token without "admin": true, even one whose scopes
// hold the resource and the holder, and for an admin token outside its
// resources; an admin token revokes within them, whoever holds the lease,
// and the holder's renewal is answered "revoked".
func TestRevokeNeedsAnAdminToken(t *testing.T) {
	dir := t.TempDir()
	ops := token{name: "ops", token: "tok-ops-5566778899aabbccddee", resources: []string{"app/*"}, holders: []string{"ops-*"}, admin: true}
	file := writeTokens(t, filepath.Join(dir, "tokens.json"), appTok, adminTok, ops)
	srv := startNet(t, &syncio.Buffer{}, "-auth", file, "-init", "-state", filepath.Join(dir, "state"), "-ttl", "1h")
	hc := &http.Client{}
	for _, r := range []string{"app/r", "other/r"} {
		tok := appTok.token
		if r == "other/r" {
			tok = adminTok.token
		}
		if a := send(t, hc, "POST", srv.url, "/v1/acquire", tok, encode(t, msgOf(wire.OpAcquire, "a-"+r, r, "app-1", 0))); a.status != 200 || a.body["ok"] != true {
			t.Fatalf("acquire %s: %+v", r, a)
		}
	}
	revoke := func(resource string) []byte {
		return encode(t, wire.Message{Op: wire.OpRevoke, Request: lease.Request{Resource: resource}})
	}
	before := view(t, srv.url, "app/r", "other/r")
	for _, c := range []struct {
		what, tok, resource string
		status              int
		code                string
	}{
		{"no token", "", "app/r", 401, wire.CodeUnauthorized},
		{"the holder's own token, not admin", appTok.token, "app/r", 403, wire.CodeForbidden},
		{"a token with every scope, not admin", adminTok.token, "app/r", 403, wire.CodeForbidden},
		{"an admin token outside its resources", ops.token, "other/r", 403, wire.CodeForbidden},
	} {
		if a := send(t, hc, "POST", srv.url, "/v1/revoke", c.tok, revoke(c.resource)); a.status != c.status || a.code() != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.what, a.status, a.body, c.status, c.code)
		}
	}
	if after := view(t, srv.url, "app/r", "other/r"); after != before {
		t.Fatalf("the refused revokes changed the state:\n%s---\n%s", before, after)
	}
	a := send(t, hc, "POST", srv.url, "/v1/revoke", ops.token, revoke("app/r"))
	rv, _ := a.body["revoked"].(map[string]any)
	if a.status != 200 || rv["holderId"] != "app-1" || rv["fence"] != float64(1) {
		t.Fatalf("the admin's revoke: %d %v", a.status, a.body)
	}
	if a := send(t, hc, "POST", srv.url, "/v1/revoke", ops.token, revoke("app/r")); a.status != 409 || a.code() != wire.CodeNotHeld {
		t.Fatalf("a second revoke: %d %v", a.status, a.body)
	}
	if a := send(t, hc, "POST", srv.url, "/v1/renew", appTok.token, encode(t, msgOf(wire.OpRenew, "n1", "app/r", "app-1", 1))); a.status != 200 || a.body["reason"] != wire.ReasonRevoked {
		t.Fatalf("the holder's renewal: %d %v", a.status, a.body)
	}
	srv.close(t)
}
