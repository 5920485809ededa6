//go:build e2e

package workere2e

import (
	"encoding/json"
	"testing"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// TestWorkerRevoke: on the Worker with tokens, a revoke needs a token with
// "admin": true and is kept to its resources (403 otherwise, nothing
// changed); an admin's revoke ends the lease, the holder's renewal is
// answered "revoked", a second revoke is 409 not_held, and the next grant's
// fence is above the revoked one.
func TestWorkerRevoke(t *testing.T) {
	url, _ := startAuthRuntime(t)
	revoke := func(resource string) []byte {
		b, _ := wire.EncodeMessage(wire.Message{Op: wire.OpRevoke, Request: lease.Request{Resource: resource}})
		return b
	}
	body := func(data []byte) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		return m
	}
	st, _, data := authPost(t, url, "POST", "/v1/acquire", wApp.token, nil, authMsg(wire.OpAcquire, "a1", "app/revoked", "app-1", 0))
	if st != 200 {
		t.Fatalf("acquire: %d %s", st, data)
	}
	fence := uint64(body(data)["grant"].(map[string]any)["fence"].(float64))
	for _, c := range []struct {
		what, tok, resource string
	}{{"the holder's token, not admin", wApp.token, "app/revoked"}, {"an admin token outside its resources", wOps.token, "other/r"}} {
		if st, _, data := authPost(t, url, "POST", "/v1/revoke", c.tok, nil, revoke(c.resource)); st != 403 || wire.ParseError(st, data).Code != wire.CodeForbidden {
			t.Fatalf("%s: %d %s", c.what, st, data)
		}
	}
	st, _, data = authPost(t, url, "POST", "/v1/revoke", wOps.token, nil, revoke("app/revoked"))
	if rv, _ := body(data)["revoked"].(map[string]any); st != 200 || rv["holderId"] != "app-1" || rv["fence"] != float64(fence) {
		t.Fatalf("the admin's revoke: %d %s", st, data)
	}
	if st, _, data := authPost(t, url, "POST", "/v1/revoke", wOps.token, nil, revoke("app/revoked")); st != 409 || wire.ParseError(st, data).Code != wire.CodeNotHeld {
		t.Fatalf("a second revoke: %d %s", st, data)
	}
	if st, _, data := authPost(t, url, "POST", "/v1/renew", wApp.token, nil, authMsg(wire.OpRenew, "n1", "app/revoked", "app-1", fence)); st != 200 || body(data)["reason"] != wire.ReasonRevoked {
		t.Fatalf("the holder's renewal: %d %s", st, data)
	}
	st, _, data = authPost(t, url, "POST", "/v1/acquire", wApp.token, nil, authMsg(wire.OpAcquire, "a2", "app/revoked", "app-2", 0))
	if st != 200 || uint64(body(data)["grant"].(map[string]any)["fence"].(float64)) <= fence {
		t.Fatalf("the next grant: %d %s", st, data)
	}
}
