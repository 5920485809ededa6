//go:build e2e

package workere2e

import (
	"context"
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
)

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
