package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/auth"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// TestListAndWatchThroughTokens: behind the tokens (auth.Guard, as
// cmd/coordinator serves with -auth), a token lists and watches only the
// resources of its patterns, a request without a token is 401, and a
// token's watchers beyond -max-watchers-per-token are 429.
func TestListAndWatchThroughTokens(t *testing.T) {
	svc, _ := memService(t, 100, Config{MaxWatchersPerToken: 1})
	sum := sha256.Sum256([]byte("token-of-indexer"))
	set, err := auth.Parse([]byte(`[{"name": "indexer", "tokenSha256": "` + hex.EncodeToString(sum[:]) + `", "resources": ["jobs/*"]}]`))
	if err != nil {
		t.Fatal(err)
	}
	g := auth.NewGuard(set, auth.Options{})
	h := g.Middleware(httpapi.NewHandler(svc, httpapi.HandlerOptions{Authorize: g.Authorize, Scope: g.Scope}))
	for _, r := range []string{"jobs/1", "other/1", "jobs/2"} {
		take(t, svc, r, "h")
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer token-of-indexer") }
	st, out := postTo(t, h, wire.ListPath, `{}`, bearer)
	if st != 200 || !strings.Contains(out, `"jobs/1"`) || !strings.Contains(out, `"jobs/2"`) || strings.Contains(out, "other") {
		t.Fatalf("list with the token: %d %s", st, out)
	}
	if st, out := postTo(t, h, wire.ListPath, `{}`, nil); st != 401 {
		t.Fatalf("list without a token: %d %s", st, out)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // before srv.Close: the watch's stream ends first
	agent, _ := clock.NewManual("agent", clock.ManualOptions{Start: 50})
	c := newClient(t, lease.ClientConfig{Clock: agent, HolderID: "w"}, client.Config{BaseURL: srv.URL, Token: "token-of-indexer"})
	var got []string
	for l, err := range c.List(ctx, client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l.Resource)
	}
	if strings.Join(got, ",") != "jobs/1,jobs/2" {
		t.Fatalf("client list %v", got)
	}
	ch := collect(ctx, c, client.WatchOptions{})
	if h := next(t, ch); h.Type != wire.EventHello {
		t.Fatalf("first %+v", h)
	}
	take(t, svc, "other/2", "h")
	take(t, svc, "jobs/3", "h")
	if ev := next(t, ch); ev.Resource != "jobs/3" {
		t.Fatalf("the token's watch saw %+v", ev)
	}
	st, out = postTo(t, h, wire.WatchPath, `{}`, bearer)
	if st != 429 || !strings.Contains(out, wire.CodeTooManyTokenWatchers) {
		t.Fatalf("a second watcher of the token: %d %s", st, out)
	}
}
