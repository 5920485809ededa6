//go:build !js && !wasip1

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/roundtrip"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
	"github.com/lease-fence/lease-fence/test/rig/testpki"
)

// The tests of the server on a network: tokens and scopes, the limits of a
// token, the logs, health and readiness, run in this process (serve) on a
// free loopback port.

// token is one entry of a tokens file the tests write, with its token.
type token struct {
	name, token string
	resources   []string
	holders     []string // nil: the default
	maxLeases   int
	maxWaiters  int
	metrics     bool
	admin       bool
	expires     string // RFC 3339; "" for none
}

func (tk token) hash() string {
	h := sha256.Sum256([]byte(tk.token))
	return hex.EncodeToString(h[:])
}

// writeTokens writes a tokens file of toks at path.
func writeTokens(t *testing.T, path string, toks ...token) string {
	t.Helper()
	var out []map[string]any
	for _, tk := range toks {
		e := map[string]any{"name": tk.name, "tokenSha256": tk.hash(), "resources": tk.resources}
		if tk.holders != nil {
			e["holders"] = tk.holders
		}
		if tk.maxLeases > 0 {
			e["maxLeases"] = tk.maxLeases
		}
		if tk.maxWaiters > 0 {
			e["maxWaiters"] = tk.maxWaiters
		}
		if tk.metrics {
			e["metrics"] = true
		}
		if tk.admin {
			e["admin"] = true
		}
		if tk.expires != "" {
			e["expires"] = tk.expires
		}
		out = append(out, e)
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	appTok   = token{name: "app", token: "tok-app-9f8e7d6c5b4a39281706", resources: []string{"app/*"}}
	adminTok = token{name: "admin", token: "tok-admin-0a1b2c3d4e5f60718293", resources: []string{"*"}, holders: []string{"*"}, metrics: true}
	// unknownTok is a token no file lists.
	unknownTok = token{name: "nobody", token: "tok-unknown-5566778899aabbccdd"}
	// expiredTok is listed, with the scopes of adminTok, but expired.
	expiredTok = token{name: "retired", token: "tok-retired-a1b2c3d4e5f6a7b8c9", resources: []string{"*"}, holders: []string{"*"}, metrics: true,
		expires: "2001-01-01T00:00:00Z"}
)

// netServer is a server run by serve in this process, with a SIGHUP
// channel.
type netServer struct {
	*server
	hup chan struct{}
}

func startNet(t *testing.T, stderr io.Writer, args ...string) *netServer {
	t.Helper()
	hup := make(chan struct{}, 1)
	return &netServer{startServe(t, stderr, hup, args...), hup}
}

// answer is a decoded answer.
type answer struct {
	status int
	body   map[string]any
	header http.Header
}

func (a answer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// send posts body (or GETs, if method says so) to url+path with the token
// (none if empty).
func send(t *testing.T, hc *http.Client, method, url, path, tok string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, data := roundtrip.Read(t, hc.Do, req)
	a := answer{status: resp.StatusCode, header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(data, &a.body); err != nil {
			t.Fatalf("%s %s: %q: %v", method, path, data, err)
		}
	} else {
		a.body = map[string]any{"text": string(data)}
	}
	return a
}

func encode(t *testing.T, m wire.Message) []byte {
	t.Helper()
	b, err := wire.EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func msgOf(op wire.Op, id, resource, holder string, fence uint64) wire.Message {
	if op == wire.OpInspect {
		return wire.Message{Op: op, Request: lease.Request{Resource: resource}}
	}
	return killMsg(op, id, resource, holder, fence)
}

// view is what the admin token sees of the resources and the counters: a
// refusal must leave it exactly as it was.
func view(t *testing.T, url string, resources ...string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range resources {
		a := send(t, http.DefaultClient, "POST", url, "/v1/inspect", adminTok.token, encode(t, msgOf(wire.OpInspect, "", r, "", 0)))
		delete(a.body, "remainingMillis")
		j, _ := json.Marshal(a.body)
		b.WriteString(r + " " + strconv.Itoa(a.status) + " " + string(j) + "\n")
	}
	m := scrape(t, http.DefaultClient, url+"/metrics", adminTok.token)
	for _, name := range []string{"leasefence_grants_total", "leasefence_renewals_total", "leasefence_releases_total",
		"leasefence_leases_held", "leasefence_fence_issued"} {
		b.WriteString(name + " " + strconv.FormatFloat(m.Value(name), 'f', -1, 64) + "\n")
	}
	return b.String()
}

// TestEveryEndpointNeedsItsToken: each of the four calls and /metrics with
// no token (401), a token the server does not know (401), a token that
// expired (401, though its scopes would allow the call), a token whose
// scopes leave the resource or the holder out (403), and a valid one
// (200); a refusal changes nothing. /healthz and /readyz need no token.
func TestEveryEndpointNeedsItsToken(t *testing.T) {
	dir := t.TempDir()
	logs := &syncio.Buffer{}
	file := writeTokens(t, filepath.Join(dir, "tokens.json"), appTok, adminTok, expiredTok)
	srv := startNet(t, logs, "-auth", file, "-init", "-state", filepath.Join(dir, "state"), "-ttl", "1h")
	hc := &http.Client{}
	resources := []string{"app/r", "other/r"}
	// A lease of app's to renew and release.
	acq := msgOf(wire.OpAcquire, "a1", "app/r", "app-1", 0)
	if a := send(t, hc, "POST", srv.url, "/v1/acquire", appTok.token, encode(t, acq)); a.status != 200 || a.body["ok"] != true {
		t.Fatalf("acquire: %+v", a)
	}
	fence := uint64(1)
	calls := map[wire.Op]struct {
		valid      wire.Message
		outOfScope []wire.Message
	}{
		wire.OpAcquire: {msgOf(wire.OpAcquire, "a2", "app/s", "app-2", 0),
			[]wire.Message{msgOf(wire.OpAcquire, "a3", "other/r", "app-1", 0), msgOf(wire.OpAcquire, "a4", "app/t", "intruder", 0)}},
		wire.OpRenew: {msgOf(wire.OpRenew, "n1", "app/r", "app-1", fence),
			[]wire.Message{msgOf(wire.OpRenew, "n2", "other/r", "app-1", fence), msgOf(wire.OpRenew, "n3", "app/r", "intruder", fence)}},
		wire.OpInspect: {msgOf(wire.OpInspect, "", "app/r", "", 0), []wire.Message{msgOf(wire.OpInspect, "", "other/r", "", 0)}},
		wire.OpRelease: {msgOf(wire.OpRelease, "x1", "app/r", "app-1", fence),
			[]wire.Message{msgOf(wire.OpRelease, "x2", "other/r", "app-1", fence), msgOf(wire.OpRelease, "x3", "app/r", "intruder", fence)}},
	}
	for _, op := range []wire.Op{wire.OpAcquire, wire.OpRenew, wire.OpInspect, wire.OpRelease} {
		c := calls[op]
		before := view(t, srv.url, resources...)
		refusals := []struct {
			what, tok, code string
			status          int
			m               wire.Message
		}{
			{"no token", "", wire.CodeUnauthorized, 401, c.valid},
			{"unknown token", unknownTok.token, wire.CodeUnauthorized, 401, c.valid},
			{"expired token", expiredTok.token, wire.CodeUnauthorized, 401, c.valid},
		}
		for _, m := range c.outOfScope {
			refusals = append(refusals, struct {
				what, tok, code string
				status          int
				m               wire.Message
			}{"out of scope (" + m.Request.Resource + ", " + m.Request.HolderID + ")", appTok.token, wire.CodeForbidden, 403, m})
		}
		for _, r := range refusals {
			a := send(t, hc, "POST", srv.url, op.Path(), r.tok, encode(t, r.m))
			if a.status != r.status || a.code() != r.code {
				t.Errorf("%s %s: %d %v, want %d %s", op, r.what, a.status, a.body, r.status, r.code)
			}
			if r.status == 401 && a.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: no WWW-Authenticate", op, r.what)
			}
		}
		if after := view(t, srv.url, resources...); after != before {
			t.Errorf("%s: the refusals changed the state:\n%s---\n%s", op, before, after)
		}
		a := send(t, hc, "POST", srv.url, op.Path(), appTok.token, encode(t, c.valid))
		if a.status != 200 || a.body["ok"] != true {
			t.Errorf("%s with a valid token: %d %v", op, a.status, a.body)
		}
	}
	// /metrics: only a token that may read it.
	for _, tc := range []struct {
		tok    string
		status int
	}{{"", 401}, {unknownTok.token, 401}, {expiredTok.token, 401}, {appTok.token, 403}, {adminTok.token, 200}} {
		if a := send(t, hc, "GET", srv.url, "/metrics", tc.tok, nil); a.status != tc.status {
			t.Errorf("/metrics with %q: %d", tc.tok, a.status)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if a := send(t, hc, "GET", srv.url, path, "", nil); a.status != 200 {
			t.Errorf("%s: %d %v", path, a.status, a.body)
		}
		if a := send(t, hc, "POST", srv.url, path, "", []byte("{}")); a.status != 405 || a.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %d %v", path, a.status, a.body)
		}
	}
	srv.close(t)
	assertNoSecrets(t, logs.String(), appTok, adminTok, unknownTok, expiredTok)
	if !strings.Contains(logs.String(), "token=app") {
		t.Errorf("the log does not name the token of the calls:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `the token \"retired\" expired at 2001-01-01T00:00:00Z`) {
		t.Errorf("the log does not warn of the expired token at start:\n%s", logs)
	}
}

// assertNoSecrets fails if log holds any of the tokens, or the first 16
// hex digits of their hashes (in either case).
func assertNoSecrets(t *testing.T, log string, toks ...token) {
	t.Helper()
	if log == "" {
		t.Fatal("nothing was logged")
	}
	lower := strings.ToLower(log)
	for _, tk := range toks {
		if strings.Contains(log, tk.token) || strings.Contains(lower, strings.ToLower(tk.token)) {
			t.Errorf("the log holds the token of %s", tk.name)
		}
		if h := tk.hash(); strings.Contains(lower, h[:16]) {
			t.Errorf("the log holds the hash of %s's token", tk.name)
		}
	}
}

// floodTok floods, calmTok does not; the server's -max-leases is 50.
var (
	floodTok = token{name: "flood", token: "tok-flood-00112233445566778899", resources: []string{"*"}, maxLeases: 40}
	calmTok  = token{name: "calm", token: "tok-calm-99887766554433221100", resources: []string{"*"}}
)

// TestTokenFloodLeavesRoomForOthers: one token acquiring as fast as it can,
// from 16 clients at once, gets its maxLeases and no more, while another
// token still acquires; the server's own limit is not reached.
func TestTokenFloodLeavesRoomForOthers(t *testing.T) {
	dir := t.TempDir()
	srv := startNet(t, io.Discard, "-quiet", "-memory", "-max-leases", "50", "-ttl", "1h",
		"-auth", writeTokens(t, filepath.Join(dir, "tokens.json"), floodTok, calmTok))
	flood(t, srv.url, srv.url)
}

// flood runs floodTok's 16 clients against floodURL until they have been
// refused 100 times, then takes the ten places left with calmTok on
// calmURL, and checks that the server is then full.
func flood(t *testing.T, floodURL, calmURL string) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, limited := 0, 0
	stop := make(chan struct{})
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := tokenClient(t, floodURL, "flood-"+strconv.Itoa(c), floodTok.token)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := wc.Acquire(context.Background(), "f-"+strconv.Itoa(c)+"-"+strconv.Itoa(i))
				var we *wire.Error
				mu.Lock()
				switch {
				case err == nil:
					granted++
				case errors.As(err, &we) && we.Code == wire.CodeTooManyTokenLeases && we.Status == 429:
					limited++
				default:
					t.Errorf("flood: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	// While the flood goes on, the other token takes the ten places left.
	for deadline := time.Now().Add(30 * time.Second); ; {
		mu.Lock()
		n := limited
		mu.Unlock()
		if n >= 100 {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("the flood was not limited within 30 s: %d granted", granted)
		}
		time.Sleep(time.Millisecond)
	}
	cc := tokenClient(t, calmURL, "calm-1", calmTok.token)
	for i := range 10 {
		if _, err := cc.Acquire(context.Background(), "c-"+strconv.Itoa(i)); err != nil {
			t.Fatalf("the calm token's acquisition %d during the flood: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	if granted != 40 || limited < 100 {
		t.Fatalf("the flood got %d leases (want 40) and %d refusals", granted, limited)
	}
	// Now the server is full: the next acquisition is the server's refusal.
	if _, err := cc.Acquire(context.Background(), "c-10"); !isWireCode(err, wire.CodeTooManyLeases) {
		t.Fatalf("past the server's limit: %v", err)
	}
}

func isWireCode(err error, code string) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Code == code
}

// newClient is a client.Client of holder on a monotonic clock, with cfg's
// other settings.
func newClient(t *testing.T, holder string, cfg client.Config) *client.Client {
	t.Helper()
	c, err := benchkit.NewClient(holder, 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tokenClient is a client.Client for holder with a bearer token.
func tokenClient(t *testing.T, url, holder, tok string) *client.Client {
	// Without a token the calls go on call sessions (a coordinator
	// without -auth offers them), so the tests of the real server run on
	// them; with one, as requests.
	return newClient(t, holder, client.Config{BaseURL: url, Token: tok, Backoff: func(int) time.Duration { return 0 }, Sessions: tok == ""})
}

// TestListenAddress: without -auth, an -addr or -metrics-addr that is not
// loopback is refused (nothing is opened: the state is not created) unless
// -insecure-listen; with tokens it is allowed (checked without listening
// there: tests bind loopback only).
func TestListenAddress(t *testing.T) {
	dir := t.TempDir()
	for _, flag := range []string{"-addr", "-metrics-addr"} {
		for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
			state := filepath.Join(dir, "state"+flag+strconv.Itoa(len(addr)))
			err := run(context.Background(), []string{flag, addr, "-init", "-state", state}, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "without -auth") || !strings.Contains(err.Error(), "-insecure-listen") ||
				(flag == "-metrics-addr") != strings.Contains(err.Error(), "-metrics-addr") {
				t.Fatalf("%s %s: %v", flag, addr, err)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Fatalf("%s %s: the state was created before the refusal", flag, addr)
			}
		}
	}
	var logs strings.Builder
	log := newTestLogger(&logs)
	apiCheck := func(addr string, tokens, insecure, tls bool) (bool, error) {
		loopback, _ := isLoopback(addr)
		return loopback, checkListen(addr, tokens, insecure, tls, log)
	}
	metricsCheck := func(addr string, tokens, insecure, tls bool) (bool, error) {
		return checkMetricsListen(addr, tokens, insecure, tls, log)
	}
	for _, tc := range []struct {
		addr              string
		tokens, insecure  bool
		tls               bool
		loopback          bool
		wantErr, wantWarn string
	}{
		{"127.0.0.1:0", false, false, false, true, "", ""},
		{"[::1]:0", false, false, false, true, "", ""},
		{"localhost:0", false, false, false, true, "", ""},
		{"0.0.0.0:0", false, true, false, false, "", "without tokens"},
		{"0.0.0.0:0", true, false, false, false, "", "without TLS"},
		{"0.0.0.0:0", true, false, true, false, "", ""},
		{"0.0.0.0:0", false, false, true, false, "without -auth", ""},
		{"192.0.2.1:0", false, false, false, false, "without -auth", ""},
		{"nonsense", true, false, false, false, "-addr", ""},
	} {
		for name, check := range map[string]func(string, bool, bool, bool) (bool, error){"-addr": apiCheck, "-metrics-addr": metricsCheck} {
			logs.Reset()
			loopback, err := check(tc.addr, tc.tokens, tc.insecure, tc.tls)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) ||
				!strings.Contains(logs.String(), tc.wantWarn) || (tc.wantWarn == "" && logs.Len() > 0) || (err == nil && loopback != tc.loopback) {
				t.Errorf("%s %+v: %v, loopback %v; log %q", name, tc, err, loopback, logs.String())
			}
		}
	}
}

// TestMetricsAddress: a -metrics-addr that is not loopback (127.0.0.1 taken
// for an address of the network) with tokens serves /metrics only to a
// token with "metrics": true and, with -tls-cert, over TLS; with
// -insecure-listen and no tokens, to anyone; /healthz and /readyz stay
// open there; on loopback /metrics needs no token.
func TestMetricsAddress(t *testing.T) {
	dir := t.TempDir()
	// Whole servers, with 127.0.0.1 taken for an address of the network.
	pki, err := testpki.New(dir, "metrics")
	if err != nil {
		t.Fatal(err)
	}
	tokens := writeTokens(t, filepath.Join(dir, "tokens.json"), appTok, adminTok)
	tlsHC := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.CAPool}}}
	for _, tc := range []struct {
		name      string
		args      []string
		scheme    string
		hc        *http.Client
		anonymous int // the status of /metrics without a token
	}{
		{"loopback", []string{"-auth", tokens}, "http", http.DefaultClient, 200},
		{"tokens", []string{"-auth", tokens}, "http", http.DefaultClient, 401},
		{"tokens and TLS", []string{"-auth", tokens, "-tls-cert", pki.Server, "-tls-key", pki.ServerKey}, "https", tlsHC, 401},
		{"insecure", []string{"-insecure-listen"}, "http", http.DefaultClient, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "loopback" {
				was := isLoopback
				isLoopback = func(string) (bool, error) { return false, nil }
				t.Cleanup(func() { isLoopback = was })
			}
			var logs syncio.Buffer
			startNet(t, &logs, append([]string{"-memory", "-metrics-addr", "127.0.0.1:0"}, tc.args...)...)
			m := regexp.MustCompile(`metrics on (https?://[^ "]+)/metrics`).FindStringSubmatch(logs.String())
			if m == nil {
				t.Fatalf("no metrics line: %s", logs.String())
			}
			opsURL := m[1]
			if !strings.HasPrefix(opsURL, tc.scheme+"://127.0.0.1:") {
				t.Fatalf("metrics at %s, want %s", opsURL, tc.scheme)
			}
			if a := send(t, tc.hc, "GET", opsURL, "/metrics", "", nil); a.status != tc.anonymous {
				t.Errorf("/metrics without a token: %d %v", a.status, a.body)
			}
			if tc.anonymous == 401 {
				for _, c := range []struct {
					tok    string
					status int
				}{{unknownTok.token, 401}, {appTok.token, 403}, {adminTok.token, 200}} {
					if a := send(t, tc.hc, "GET", opsURL, "/metrics", c.tok, nil); a.status != c.status {
						t.Errorf("/metrics with %s: %d %v", c.tok, a.status, a.body)
					}
				}
				if !strings.Contains(logs.String(), `for a token with \"metrics\": true`) {
					t.Errorf("the metrics line does not say it needs a token: %s", logs.String())
				}
			}
			for _, path := range []string{"/healthz", "/readyz"} {
				if a := send(t, tc.hc, "GET", opsURL, path, "", nil); a.status != 200 {
					t.Errorf("%s: %d %v", path, a.status, a.body)
				}
			}
			if tc.scheme == "https" {
				// Go's TLS server answers a plain HTTP request 400.
				if a := send(t, http.DefaultClient, "GET", "http"+strings.TrimPrefix(opsURL, "https"), "/healthz", "", nil); a.status != 400 {
					t.Errorf("the TLS metrics listener answered plain HTTP: %d %v", a.status, a.body)
				}
			}
			if tc.name == "insecure" && !strings.Contains(logs.String(), "metrics on 127.0.0.1:0 without tokens") {
				t.Errorf("no warning for metrics without tokens: %s", logs.String())
			}
		})
	}
}

// TestTokenWithoutAuthIsLoggedOnce: a coordinator started without -auth
// answers calls that carry a token as it answers any other, and logs, once
// for the process, that tokens are sent to it and not checked.
func TestTokenWithoutAuthIsLoggedOnce(t *testing.T) {
	logs := &syncio.Buffer{}
	srv := startNet(t, logs, "-memory")
	hc := &http.Client{}
	const warning = "was started without -auth: tokens are not checked"
	if a := send(t, hc, "POST", srv.url, "/v1/inspect", "", encode(t, msgOf(wire.OpInspect, "", "r", "", 0))); a.status != 200 {
		t.Fatalf("inspect without a token: %+v", a)
	}
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("logged for a call without a token: %s", logs.String())
	}
	for i := range 3 {
		acq := msgOf(wire.OpAcquire, "t"+strconv.Itoa(i), "r"+strconv.Itoa(i), "h", 0)
		if a := send(t, hc, "POST", srv.url, "/v1/acquire", appTok.token, encode(t, acq)); a.status != 200 || a.body["ok"] != true {
			t.Fatalf("acquire %d with a token: %+v", i, a)
		}
	}
	c := tokenClient(t, srv.url, "h2", adminTok.token)
	l, err := c.Acquire(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), appTok.token) || strings.Contains(logs.String(), adminTok.token) {
		t.Fatalf("a token in the log:\n%s", logs.String())
	}
}
