//go:build e2e

package workere2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// The Worker with tokens: a third `wrangler dev`, whose LEASE_TOKENS secret
// (from an --env-file, as `.dev.vars` or `wrangler secret put` would give
// it) is a tokens file like the native server's -auth, and whose
// LEASE_CORS_ORIGINS lists one origin.

type workerToken struct{ name, token string }

func (w workerToken) hash() string {
	h := sha256.Sum256([]byte(w.token))
	return hex.EncodeToString(h[:])
}

var (
	wApp     = workerToken{"app", "tok-worker-app-0f1e2d3c4b5a69788796"}
	wUnknown = workerToken{"nobody", "tok-worker-unknown-ab12cd34ef56"}
	// wExpired is listed with every scope, and expired.
	wExpired = workerToken{"retired", "tok-worker-retired-77aa88bb99cc"}
)

// wOps is an admin token for app/* and holders ops-* (TestWorkerRevoke).
var wOps = workerToken{"ops", "tok-worker-ops-1a2b3c4d5e6f7a8b9c"}

// authRuntime is the Worker with tokens that TestWorkerTokens,
// TestWorkerRevoke and TestWorkerTokenLimits share (two starts less): app/*
// for wApp, every resource for wExpired (expired), app/* as admin for wOps,
// the tokens of limitedTokens, one CORS origin, and LEASE_TTL_MS of
// limitsTTL. The tests' resources do not meet (app/* and other/* for the
// first two, flood/*, free/*, shared and after-expiry for the limits), and
// a token's maxLeases counts its own leases only. The first test that needs
// it starts it; TestMain stops it.
var authRuntime struct {
	once sync.Once
	w    *wranglerDev
	dir  string
	log  syncio.Buffer
	err  error
}

// startAuthRuntime returns the URL and log of authRuntime, started if it
// was not.
func startAuthRuntime(t *testing.T) (string, *syncio.Buffer) {
	t.Helper()
	authRuntime.once.Do(func() {
		authRuntime.dir, authRuntime.err = os.MkdirTemp("", "lease-fence-e2e-auth-")
		if authRuntime.err != nil {
			return
		}
		authRuntime.w, authRuntime.err = startTokensWrangler(authRuntime.dir, &authRuntime.log, "LEASE_CORS_ORIGINS=https://app.example\n",
			[]string{"--var", "LEASE_TTL_MS:" + strconv.FormatInt(limitsTTL.Milliseconds(), 10)},
			append([]map[string]any{
				{"name": wApp.name, "tokenSha256": wApp.hash(), "resources": []string{"app/*"}},
				{"name": wExpired.name, "tokenSha256": wExpired.hash(), "resources": []string{"*"}, "holders": []string{"*"},
					"expires": "2001-01-01T00:00:00Z"},
				{"name": wOps.name, "tokenSha256": wOps.hash(), "resources": []string{"app/*"}, "holders": []string{"ops-*"}, "admin": true},
			}, limitedTokens()...)...)
	})
	if authRuntime.err != nil {
		t.Fatalf("wrangler dev with tokens: %v\n%s", authRuntime.err, authRuntime.log.String())
	}
	return authRuntime.w.url(), &authRuntime.log
}

// stopAuthRuntime ends authRuntime, if it was started.
func stopAuthRuntime() {
	if authRuntime.w != nil {
		authRuntime.w.stop()
	}
	if authRuntime.dir != "" {
		os.RemoveAll(authRuntime.dir)
	}
}

// startTokensRuntime starts a runtime whose LEASE_TOKENS secret lists
// tokens (from an env file, as .dev.vars or `wrangler secret put` would
// give it), with more lines of the env file and more arguments of wrangler
// dev; it returns its URL and log, and is stopped when the test ends.
func startTokensRuntime(t *testing.T, env string, args []string, tokens ...map[string]any) (string, *syncio.Buffer) {
	t.Helper()
	log := &syncio.Buffer{}
	w, err := startTokensWrangler(t.TempDir(), log, env, args, tokens...)
	if err != nil {
		t.Fatalf("wrangler dev with tokens: %v\n%s", err, log.String())
	}
	t.Cleanup(w.stop)
	return w.url(), log
}

// startTokensWrangler starts that runtime with its env file and state in dir.
func startTokensWrangler(dir string, log *syncio.Buffer, env string, args []string, tokens ...map[string]any) (*wranglerDev, error) {
	file, _ := json.Marshal(tokens)
	envFile := filepath.Join(dir, "tokens.env")
	if err := os.WriteFile(envFile, []byte("LEASE_TOKENS='"+string(file)+"'\n"+env), 0o600); err != nil {
		return nil, err
	}
	return startWrangler(filepath.Join(dir, "state"), log, append([]string{"--env-file", envFile}, args...)...)
}

func authPost(t *testing.T, url, method, path, tok string, headers map[string]string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if tok != "" {
		h["Authorization"] = "Bearer " + tok
	}
	maps.Copy(h, headers)
	return send(t, directClient, method, url+path, h, string(body))
}

func authMsg(op wire.Op, id, resource, holder string, fence uint64) []byte {
	var m wire.Message
	switch op {
	case wire.OpInspect:
		m = wire.Message{Op: op, Request: lease.Request{Resource: resource}}
	default:
		q := lease.Request{RequestID: id, Resource: resource, HolderID: holder, Fence: fence}
		if op != wire.OpRelease {
			q.Kind, q.SentAt = lease.Kind(op), clock.At("agent", 1)
		}
		m = wire.Message{Op: op, Request: q, Secret: "secret-of-" + holder + "-0123456789"}
	}
	b, _ := wire.EncodeMessage(m)
	return b
}

// TestWorkerTokens: every endpoint with no token, an unknown one, an
// expired one, one out of scope and a valid one; a refusal changes nothing (an inspection with
// the valid token sees the same); client.Client with the token; CORS for the
// listed origin only; no token in the runtime's log.
func TestWorkerTokens(t *testing.T) {
	url, log := startAuthRuntime(t)
	code := func(data []byte) string {
		if e := wire.ParseError(400, data); e != nil {
			return e.Code
		}
		return ""
	}
	inspect := func(resource string) string {
		st, _, data := authPost(t, url, "POST", "/v1/inspect", wApp.token, nil, authMsg(wire.OpInspect, "", resource, "", 0))
		var r map[string]any
		_ = json.Unmarshal(data, &r)
		delete(r, "remainingMillis")
		b, _ := json.Marshal(r)
		return string(rune('0'+st/100)) + string(b)
	}
	if st, _, data := authPost(t, url, "POST", "/v1/acquire", wApp.token, nil, authMsg(wire.OpAcquire, "a1", "app/r", "app-1", 0)); st != 200 {
		t.Fatalf("acquire with the token: %d %s", st, data)
	}
	for _, c := range []struct {
		op         wire.Op
		valid      []byte
		outOfScope [][]byte
	}{
		{wire.OpAcquire, authMsg(wire.OpAcquire, "a2", "app/s", "app-2", 0),
			[][]byte{authMsg(wire.OpAcquire, "a3", "other/r", "app-1", 0), authMsg(wire.OpAcquire, "a4", "app/t", "intruder", 0)}},
		{wire.OpRenew, authMsg(wire.OpRenew, "n1", "app/r", "app-1", 1),
			[][]byte{authMsg(wire.OpRenew, "n2", "app/r", "intruder", 1)}},
		{wire.OpInspect, authMsg(wire.OpInspect, "", "app/r", "", 0), [][]byte{authMsg(wire.OpInspect, "", "other/r", "", 0)}},
		{wire.OpRelease, authMsg(wire.OpRelease, "x1", "app/r", "app-1", 1),
			[][]byte{authMsg(wire.OpRelease, "x2", "app/r", "intruder", 1)}},
	} {
		before := inspect("app/r") + inspect("app/s")
		for _, r := range []struct {
			tok, code string
			status    int
			body      []byte
		}{{"", wire.CodeUnauthorized, 401, c.valid}, {wUnknown.token, wire.CodeUnauthorized, 401, c.valid}, {wExpired.token, wire.CodeUnauthorized, 401, c.valid}} {
			st, hd, data := authPost(t, url, "POST", c.op.Path(), r.tok, nil, r.body)
			if st != r.status || code(data) != r.code || hd.Get("WWW-Authenticate") == "" {
				t.Errorf("%s with %q: %d %s %v", c.op, r.tok, st, data, hd)
			}
		}
		for _, body := range c.outOfScope {
			if st, _, data := authPost(t, url, "POST", c.op.Path(), wApp.token, nil, body); st != 403 || code(data) != wire.CodeForbidden {
				t.Errorf("%s out of scope %s: %d %s", c.op, body, st, data)
			}
		}
		if after := inspect("app/r") + inspect("app/s"); after != before {
			t.Errorf("%s: the refusals changed the state: %s, then %s", c.op, before, after)
		}
		if st, _, data := authPost(t, url, "POST", c.op.Path(), wApp.token, nil, c.valid); st != 200 {
			t.Errorf("%s with the token: %d %s", c.op, st, data)
		}
	}
	// client.Client with the token.
	clk, _ := clock.NewMonotonic("app-9")
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "app-9"})
	wc, err := client.New(client.Config{BaseURL: url, Lease: lc, Token: wApp.token, AttemptTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, err := wc.Acquire(context.Background(), "app/client")
	if err == nil {
		l, err = wc.Renew(context.Background(), l)
	}
	if err == nil {
		err = wc.Release(context.Background(), l)
	}
	if err != nil {
		t.Fatalf("client.Client with the token: %v", err)
	}
	if _, err := wc.Acquire(context.Background(), "other/client"); !isCodeErr(err, wire.CodeForbidden) {
		t.Fatalf("client.Client out of scope: %v", err)
	}
	// CORS: a preflight from the listed origin, and from another one.
	pre := map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type"}
	st, hd, _ := authPost(t, url, "OPTIONS", "/v1/acquire", "", pre, nil)
	if st != 204 || hd.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(hd.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", st, hd)
	}
	pre["Origin"] = "https://evil.example"
	if st, hd, _ := authPost(t, url, "OPTIONS", "/v1/acquire", "", pre, nil); st == 204 || hd.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", st, hd)
	}
	if _, hd, _ := authPost(t, url, "POST", "/v1/inspect", wApp.token, map[string]string{"Origin": "https://app.example"},
		authMsg(wire.OpInspect, "", "app/r", "", 0)); hd.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("a call from the listed origin: %v", hd)
	}
	for _, w := range []workerToken{wApp, wUnknown, wExpired, wOps} {
		if strings.Contains(log.String(), w.token) || strings.Contains(strings.ToLower(log.String()), w.hash()[:16]) {
			t.Errorf("the runtime's log holds %s's token or its hash", w.name)
		}
	}
}

func isCodeErr(err error, code string) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Code == code
}

// The limits of a token on the Worker: its maxLeases counted in the
// token's own Durable Object (TokenObject, wasm/worker/tokens_js.go), its
// maxWaiters by each resource's object.

var (
	wLimited = workerToken{"limited", "tok-worker-limited-5e4d3c2b1a09"}
	wFree    = workerToken{"free", "tok-worker-free-a1b2c3d4e5f607"}
)

// limitsTTL is the lease length of authRuntime, for TestWorkerTokenLimits:
// the leases of the flood must stay live, unrenewed, through a dozen
// calls (the checks up to the waiter at its limit), which took over 10 s
// when calls took 3.2 s at load 33 (at 10 s the renewal was refused, or
// the waiter at its limit granted); and the test waits for their expiry
// at the end.
const limitsTTL = 60 * time.Second

func limitedTokens() []map[string]any {
	return []map[string]any{
		{"name": wLimited.name, "tokenSha256": wLimited.hash(), "resources": []string{"*"}, "maxLeases": 3, "maxWaiters": 1},
		{"name": wFree.name, "tokenSha256": wFree.hash(), "resources": []string{"*"}},
	}
}

// workerClient is a client.Client for holder with the token tok, which tries
// each call once.
func workerClient(t *testing.T, url, holder, tok string) *client.Client {
	t.Helper()
	c, err := benchkit.NewClient(holder, 0, client.Config{BaseURL: url, Token: tok, Attempts: 1, AttemptTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWorkerTokenLimits: a token with maxLeases 3 acquiring 12 resources at
// once (each its own object) gets exactly 3 leases while a token without a
// limit acquires; a release gives a place back; a renewal keeps its place;
// a waiter whose token is at its limit when its turn comes is refused and
// the next waiter served; once the leases expire, their places lapse; the
// token's maxWaiters holds on a resource.
func TestWorkerTokenLimits(t *testing.T) {
	url, log := startAuthRuntime(t)
	ctx := context.Background()
	var mu sync.Mutex
	got := map[string]int{}
	var leases []*client.Lease
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := workerClient(t, url, "limited-"+strconv.Itoa(i), wLimited.token)
			l, err := c.Acquire(ctx, "flood/"+strconv.Itoa(i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got["granted"]++
				leases = append(leases, l)
			case isCodeErr(err, wire.CodeTooManyTokenLeases):
				got["limited"]++
			default:
				t.Errorf("%d: %v", i, err)
			}
		}()
	}
	free := workerClient(t, url, "free-1", wFree.token)
	for i := range 5 {
		if _, err := free.Acquire(ctx, "free/"+strconv.Itoa(i)); err != nil {
			t.Errorf("the token without a limit, during the flood: %v", err)
		}
	}
	wg.Wait()
	if got["granted"] != 3 || got["limited"] != 9 {
		t.Fatalf("12 at once against a limit of 3: %v", got)
	}
	lim := workerClient(t, url, "limited-x", wLimited.token)
	if _, err := lim.Acquire(ctx, "flood/more"); !isCodeErr(err, wire.CodeTooManyTokenLeases) {
		t.Fatalf("a fourth: %v", err)
	}
	// A renewal keeps the place; a release gives it back.
	owner := func(l *client.Lease) *client.Client {
		return workerClient(t, url, l.Token().HolderID, wLimited.token)
	}
	if _, err := owner(leases[0]).Renew(ctx, leases[0]); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if err := owner(leases[1]).Release(ctx, leases[1]); err != nil {
		t.Fatalf("release: %v", err)
	}
	// The place comes back once the release's Ended (not awaited) has
	// reached the token's object.
	deadline := time.Now().Add(limitsTTL - time.Second)
	for {
		_, err := lim.Acquire(ctx, "flood/more")
		if err == nil {
			break
		}
		if !isCodeErr(err, wire.CodeTooManyTokenLeases) || time.Now().After(deadline) {
			t.Fatalf("after a release: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A resource held by the free token, with two waiters: the limited
	// token (at its limit) first, then the free token.
	held, err := free.Acquire(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	// Waiting calls, each queued before the next is sent: once the answer
	// to a copy of the call (same request id) that waits 1 ms is back, the
	// call is in the resource's queue.
	wait := func(holder, tok string, d time.Duration) (int, []byte) {
		m := wire.Message{Op: wire.OpAcquire, Request: lease.Request{Kind: lease.KindAcquire, RequestID: "w-" + holder, Resource: "shared",
			HolderID: holder, SentAt: clock.At("agent", 1)}, Secret: "secret-of-" + holder + "-0123456789", Wait: d}
		body, _ := wire.EncodeMessage(m)
		st, _, data := authPost(t, url, "POST", "/v1/acquire", tok, nil, body)
		return st, data
	}
	type answer struct {
		status int
		data   []byte
	}
	queue := func(holder, tok string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			st, data := wait(holder, tok, 20*time.Second)
			ch <- answer{st, data}
		}()
		for deadline := time.Now().Add(20 * time.Second); ; {
			if st, data := wait(holder, tok, time.Millisecond); st == 200 && strings.Contains(string(data), `"heldBy"`) {
				return ch
			} else if time.Now().After(deadline) {
				t.Fatalf("%s's waiting call: %d %s", holder, st, data)
			}
		}
	}
	first := queue("limited-w", wLimited.token)
	second := queue("free-w", wFree.token)
	// The limited token's maxWaiters (1) is kept by the resource's object.
	if st, data := wait("limited-w2", wLimited.token, 20*time.Second); st != 429 || !strings.Contains(string(data), wire.CodeTooManyTokenWaiters) {
		t.Fatalf("a second waiter of the limited token: %d %s", st, data)
	}
	if err := free.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if a := <-first; a.status != 429 || !strings.Contains(string(a.data), wire.CodeTooManyTokenLeases) {
		t.Fatalf("the waiter at its limit: %d %s", a.status, a.data)
	}
	if a := <-second; a.status != 200 || !strings.Contains(string(a.data), `"holderId":"free-w"`) {
		t.Fatalf("the next waiter: %d %s", a.status, a.data)
	}
	// Every lease expires; a place lapses a second after its lease.
	deadline = time.Now().Add(3*limitsTTL + 10*time.Second)
	for {
		_, err := lim.Acquire(ctx, "after-expiry")
		if err == nil {
			break
		}
		if !isCodeErr(err, wire.CodeTooManyTokenLeases) || time.Now().After(deadline) {
			t.Fatalf("after the leases expired: %v", err)
		}
		// Once a second: the leases run out about a TTL after the flood,
		// and each try is a call through both objects.
		time.Sleep(time.Second)
	}
	for _, w := range []workerToken{wLimited, wFree} {
		if strings.Contains(log.String(), w.token) || strings.Contains(strings.ToLower(log.String()), w.hash()[:16]) {
			t.Errorf("the runtime's log holds %s's token or its hash", w.name)
		}
	}
}

// TestWorkerTokenLimitsFailClosed: a Worker whose token objects cannot be
// reached (here: a configuration without the TOKENS binding) refuses the
// grants of a token with a maxLeases (503 unavailable) and serves the
// others.
func TestWorkerTokenLimitsFailClosed(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "wrangler.toml")
	if err := os.WriteFile(conf, []byte(`name = "lease-fence-no-tokens-binding"
main = "`+filepath.Join(root, "wasm/worker/worker.mjs")+`"
compatibility_date = "2026-04-01"
send_metrics = false

[[durable_objects.bindings]]
name = "LEASES"
class_name = "LeaseObject"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["LeaseObject"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _ := startTokensRuntime(t, "", []string{"--config", conf}, limitedTokens()...)
	ctx := context.Background()
	_, err = workerClient(t, url, "limited-1", wLimited.token).Acquire(ctx, "r")
	if !isCodeErr(err, wire.CodeUnavailable) || !strings.Contains(err.Error(), "TOKENS") {
		t.Fatalf("a limited token without its object: %v", err)
	}
	if _, err := workerClient(t, url, "free-1", wFree.token).Acquire(ctx, "r"); err != nil {
		t.Fatalf("a token without a limit: %v", err)
	}
}
