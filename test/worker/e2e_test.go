//go:build e2e

package workere2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/holdtest"
	"github.com/lease-fence/lease-fence/test/rig/roundtrip"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
	"github.com/lease-fence/lease-fence/test/rig/wranglerdev"
)

// The runtime is started once for the whole run (it takes seconds), with its
// state in a temporary directory; TestRestart restarts it over that same
// directory. addr holds the address it currently listens on.
var (
	addr       atomic.Value // string, host:port
	persistDir string
	runtime    *wranglerDev
	runtimeLog = &syncio.Buffer{}
)

func TestMain(m *testing.M) {
	if os.Getenv(holdtest.EnvCampaigner) == "1" {
		holdtest.CampaignerMain()
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "lease-fence-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	persistDir = dir
	// The second runtime, for the holding suite, starts meanwhile.
	go func() { _, _ = startHoldRuntime() }()
	if err := startRuntime(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting wrangler dev:", err)
		fmt.Fprintln(os.Stderr, runtimeLog.String())
		os.Exit(1)
	}
	code := m.Run()
	stopRuntime()
	stopHoldRuntime()
	stopAuthRuntime()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "--- wrangler dev output ---")
		fmt.Fprintln(os.Stderr, runtimeLog.String())
		fmt.Fprintln(os.Stderr, "--- second wrangler dev output ---")
		fmt.Fprintln(os.Stderr, holdRuntime.log.String())
		fmt.Fprintln(os.Stderr, "--- wrangler dev with tokens output ---")
		fmt.Fprintln(os.Stderr, authRuntime.log.String())
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// runtimeTTL is the first runtime's lease length. No lease may run out by
// itself during the run: the porcupine model of TestConcurrentHistory has
// no clock.
const runtimeTTL = 600 * time.Second

// startRuntime runs the runtime over persistDir, with the side runtimes'
// bounds on waiting (for the waiting tests of mainTarget; the other tests
// of this runtime do not wait).
func startRuntime() error {
	w, err := startWrangler(persistDir, runtimeLog, "--var", "LEASE_TTL_MS:"+strconv.FormatInt(runtimeTTL.Milliseconds(), 10),
		"--var", "LEASE_MAX_WAIT_MS:"+strconv.FormatInt(holdMaxWait.Milliseconds(), 10),
		"--var", "LEASE_MAX_WAITERS:"+strconv.Itoa(holdMaxWaiters))
	if err != nil {
		return err
	}
	runtime = w
	addr.Store(w.addr)
	return nil
}

// stopRuntime ends the runtime, if it runs.
func stopRuntime() {
	if runtime != nil {
		runtime.stop()
		runtime = nil
	}
}

// retarget sends every request to the runtime's current address, so a
// client made before a restart keeps working after it.
type retarget struct{ base http.RoundTripper }

func (r retarget) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Host = addr.Load().(string)
	return r.base.RoundTrip(req)
}

// httpClient reaches the runtime wherever it runs now, and sends a call
// that wrangler dev's own proxy lost again (wranglerdev.Transport).
var httpClient = &http.Client{Transport: wranglerdev.Transport{Base: retarget{http.DefaultTransport}}}

func newHolder(t *testing.T, id string) *client.Client {
	t.Helper()
	c, err := benchkit.NewClient(id, 50*time.Millisecond, client.Config{BaseURL: "http://worker.invalid", HTTPClient: httpClient, AttemptTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func post(t *testing.T, method, path, ctype, body string) (int, http.Header, []byte) {
	t.Helper()
	return send(t, httpClient, method, "http://worker.invalid"+path, map[string]string{"Content-Type": ctype}, body)
}

// send makes one request through hc with headers (an empty value is left
// out) and returns the answer's status, headers and body.
func send(t *testing.T, hc *http.Client, method, url string, headers map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, data := roundtrip.Read(t, hc.Do, req)
	return resp.StatusCode, resp.Header, data
}

func denied(err error, by string) bool {
	var d *client.DeniedError
	return errors.As(err, &d) && d.HeldBy == by
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	a, b := newHolder(t, "agent-a"), newHolder(t, "agent-b")
	l, err := a.Acquire(ctx, "lifecycle")
	if err != nil {
		t.Fatal(err)
	}
	f := l.Token().Fence
	if f != 1 {
		t.Fatalf("first fence %d", f)
	}
	if _, err := b.Acquire(ctx, "lifecycle"); !denied(err, "agent-a") {
		t.Fatalf("b: %v", err)
	}
	if _, err := a.Acquire(ctx, "lifecycle"); !denied(err, "agent-a") {
		t.Fatalf("a again: %v", err)
	}
	l2, err := a.Renew(ctx, l)
	if err != nil || l2.Token() != l.Token() {
		t.Fatalf("renew: %v %v", l2, err)
	}
	if err := a.Release(ctx, l2); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Renew(ctx, l2); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("renew after release: %v", err)
	}
	lb, err := b.Acquire(ctx, "lifecycle")
	if err != nil || lb.Token().Fence != f+1 {
		t.Fatalf("b after release: %v %v", lb, err)
	}

	// Bad input over HTTP: refused with the stable code, nothing changes.
	okBody := `{"requestId":"x1","resource":"lifecycle","holderId":"agent-c","sentAt":{"millis":1,"domain":"c"},"kind":"acquire","secret":"0123456789abcdef"}`
	for _, tc := range []struct {
		method, path, ctype, body string
		status                    int
		code                      string
	}{
		{"GET", "/v1/acquire", "", "", 405, wire.CodeMethodNotAllowed},
		{"POST", "/v2/acquire", "application/json", okBody, 404, wire.CodeNotFound},
		{"POST", "/v1/acquire", "application/json", okBody[:30], 400, wire.CodeMalformedJSON},
		{"POST", "/v1/acquire", "application/json", strings.Replace(okBody, `"kind"`, `"evil":1,"kind"`, 1), 400, wire.CodeUnknownField},
		{"POST", "/v1/acquire", "application/json", strings.Replace(okBody, `"agent-c"`, `7`, 1), 400, wire.CodeWrongType},
		{"POST", "/v1/acquire", "application/json", strings.Replace(okBody, `"requestId":"x1",`, ``, 1), 400, wire.CodeMissingField},
		{"POST", "/v1/renew", "application/json", `{"pad":"` + strings.Repeat("x", wire.MaxBodyBytes) + `"}`, 413, wire.CodeBodyTooLarge},
		{"POST", "/v1/acquire", "text/plain", okBody, 415, wire.CodeUnsupportedMedia},
	} {
		st, hdr, body := post(t, tc.method, tc.path, tc.ctype, tc.body)
		e := wire.ParseError(st, body)
		if st != tc.status || e == nil || e.Code != tc.code {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, st, body)
		}
		if st == 405 && hdr.Get("Allow") != "POST" {
			t.Fatalf("405 without Allow: %v", hdr)
		}
	}
	if _, err := a.Acquire(ctx, "lifecycle"); !denied(err, "agent-b") {
		t.Fatalf("after bad input: %v", err)
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if l3, err := a.Acquire(ctx, "lifecycle"); err != nil || l3.Token().Fence != f+2 {
		t.Fatalf("after bad input the next fence is %v (%v), want %d", l3, err, f+2)
	}
}

// TestReplayNeedsTheSecret: a request id seen in a log is not enough: a
// replayed acquisition without the holder's secret is refused with nothing
// usable, with it the same grant comes back; a retried release is ok even
// after someone else held and released the resource in between.
func TestReplayNeedsTheSecret(t *testing.T) {
	body := func(id, secret string) string {
		return fmt.Sprintf(`{"requestId":%q,"resource":"replayed","holderId":"agent-r","sentAt":{"millis":1,"domain":"r"},"kind":"acquire","secret":%q}`, id, secret)
	}
	st, _, out := post(t, "POST", "/v1/acquire", "application/json", body("rid-1", "the-owners-secret-1"))
	var first wire.Reply
	if err := json.Unmarshal(out, &first); st != 200 || err != nil || first.Grant == nil || strings.Contains(string(out), "secret") {
		t.Fatalf("acquire: %d %s", st, out)
	}
	st, _, out = post(t, "POST", "/v1/acquire", "application/json", body("rid-1", "an-attackers-guess"))
	if e := wire.ParseError(st, out); st != 403 || e == nil || e.Code != wire.CodeWrongSecret || strings.Contains(string(out), "grant") {
		t.Fatalf("replay without the secret: %d %s", st, out)
	}
	st, _, out = post(t, "POST", "/v1/acquire", "application/json", body("rid-1", "the-owners-secret-1"))
	var again wire.Reply
	if err := json.Unmarshal(out, &again); st != 200 || err != nil || again.Grant == nil || again.Grant.Fence != first.Grant.Fence {
		t.Fatalf("replay with the secret: %d %s", st, out)
	}
	release := fmt.Sprintf(`{"requestId":"rel-1","resource":"replayed","holderId":"agent-r","fence":%d,"secret":"the-owners-secret-1"}`, first.Grant.Fence)
	if st, _, out := post(t, "POST", "/v1/release", "application/json", release); st != 200 || string(out) != `{"ok":true}` {
		t.Fatalf("release: %d %s", st, out)
	}
	ctx := context.Background()
	other := newHolder(t, "agent-s")
	l, err := other.Acquire(ctx, "replayed")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if st, _, out := post(t, "POST", "/v1/release", "application/json", release); st != 200 || string(out) != `{"ok":true}` {
		t.Fatalf("retried release after another holder came and went: %d %s", st, out)
	}
}

// TestSecondClientCannotActForTheHolder: a client with the same holder id,
// which sees the token, cannot renew or release without the grant's secret.
func TestSecondClientCannotActForTheHolder(t *testing.T) {
	ctx := context.Background()
	a := newHolder(t, "agent-a")
	l, err := a.Acquire(ctx, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Token()
	for _, body := range []string{
		fmt.Sprintf(`{"requestId":"i1","resource":%q,"holderId":%q,"sentAt":{"millis":1,"domain":"impostor"},"kind":"renew","fence":%d,"secret":"guess-guess-guess-guess"}`, tok.Resource, tok.HolderID, tok.Fence),
		fmt.Sprintf(`{"requestId":"i2","resource":%q,"holderId":%q,"fence":%d,"secret":"guess-guess-guess-guess"}`, tok.Resource, tok.HolderID, tok.Fence),
	} {
		path := "/v1/renew"
		if !strings.Contains(body, "kind") {
			path = "/v1/release"
		}
		st, _, out := post(t, "POST", path, "application/json", body)
		if e := wire.ParseError(st, out); st != 403 || e == nil || e.Code != wire.CodeWrongSecret {
			t.Fatalf("impostor %s: %d %s", path, st, out)
		}
	}
	if _, err := newHolder(t, "agent-b").Acquire(ctx, "guarded"); !denied(err, "agent-a") {
		t.Fatalf("the impostor freed the resource: %v", err)
	}
	if _, err := a.Renew(ctx, l); err != nil {
		t.Fatalf("holder renew: %v", err)
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("holder release: %v", err)
	}
}

// TestConcurrentHistory: 8 clients, 3 resources, at least 1,000 calls; the
// recorded history must pass Check.
func TestConcurrentHistory(t *testing.T) {
	const clients, perClient = 8, 130
	resources := []string{"hot-1", "hot-2", "hot-3"}
	ctx := context.Background()
	origin := time.Now()
	since := func() int64 { return int64(time.Since(origin)) }
	var mu sync.Mutex
	var history []Event
	record := func(e Event) {
		mu.Lock()
		history = append(history, e)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(42, uint64(c)))
			h := newHolder(t, ClientName(c))
			var held *client.Lease
			for n := 0; n < perClient; n++ {
				if held == nil {
					res := resources[rng.IntN(len(resources))]
					start := since()
					l, err := h.Acquire(ctx, res)
					e := Event{Client: c, Op: "acquire", Resource: res, Start: start, End: since()}
					if err == nil {
						g := l.Grant()
						e.OK, e.Fence, e.ExpiresAt, e.TTLMillis = true, g.Fence, g.CoordinatorExpiresAt.Millis, clock.Millis(g.TTL)
						held = l
					} else if d := new(client.DeniedError); errors.As(err, &d) {
						e.HeldBy = d.HeldBy
					} else {
						errs <- fmt.Errorf("client %d acquire: %w", c, err)
						return
					}
					record(e)
					continue
				}
				tok := held.Token()
				start := since()
				if rng.IntN(3) == 0 {
					l, err := h.Renew(ctx, held)
					e := Event{Client: c, Op: "renew", Resource: tok.Resource, Start: start, End: since(), Fence: tok.Fence}
					switch {
					case err == nil:
						g := l.Grant()
						e.OK, e.ExpiresAt, e.TTLMillis = true, g.CoordinatorExpiresAt.Millis, clock.Millis(g.TTL)
						held = l
					case errors.Is(err, client.ErrExpired):
						held = nil
					default:
						errs <- fmt.Errorf("client %d renew: %w", c, err)
						return
					}
					record(e)
					continue
				}
				err := h.Release(ctx, held)
				e := Event{Client: c, Op: "release", Resource: tok.Resource, Start: start, End: since(), Fence: tok.Fence, OK: err == nil}
				if err != nil && !errors.Is(err, client.ErrExpired) {
					errs <- fmt.Errorf("client %d release: %w", c, err)
					return
				}
				held = nil
				record(e)
			}
			if held != nil { // leave the resources free, on the record
				tok := held.Token()
				start := since()
				err := h.Release(ctx, held)
				if err != nil && !errors.Is(err, client.ErrExpired) {
					errs <- err
				}
				record(Event{Client: c, Op: "release", Resource: tok.Resource, Start: start, End: since(), Fence: tok.Fence, OK: err == nil})
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(history) < 1000 {
		t.Fatalf("only %d calls", len(history))
	}
	granted, deniedN := 0, 0
	for _, e := range history {
		if e.Op == "acquire" {
			if e.OK {
				granted++
			} else {
				deniedN++
			}
		}
	}
	if granted < 50 || deniedN == 0 {
		t.Fatalf("a history without contention proves little: %d granted, %d denied", granted, deniedN)
	}
	if err := Check(history); err != nil {
		f, _ := os.CreateTemp("", "lease-fence-history-*.txt")
		for _, e := range history {
			fmt.Fprintf(f, "%+v\n", e)
		}
		f.Close()
		t.Fatalf("%v (history in %s)", err, f.Name())
	}
	if res := Linearizable(history, time.Minute); res != porcupine.Ok {
		t.Fatalf("porcupine: the history is %s against the lease model", res)
	}
	t.Logf("%d calls in %v: %d acquisitions granted, %d denied", len(history), time.Since(origin).Round(time.Millisecond), granted, deniedN)
}

// TestRestart stops the runtime and starts it again over the same state
// directory: fences keep climbing and the live holder is remembered.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	a, b := newHolder(t, "agent-a"), newHolder(t, "agent-b")
	var l *client.Lease
	for i := 0; i < 3; i++ {
		var err error
		if l, err = a.Acquire(ctx, "restart"); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := a.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	last := l.Token().Fence
	stopRuntime()
	if err := startRuntime(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "restart"); !denied(err, "agent-a") {
		t.Fatalf("after restart: %v", err)
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("holder release after restart: %v", err)
	}
	lb, err := b.Acquire(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	if lb.Token().Fence != last+1 {
		t.Fatalf("after restart fence %d, want %d", lb.Token().Fence, last+1)
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}
