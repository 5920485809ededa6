package wire

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

const ttl = time.Second

type rig struct {
	t    *testing.T
	clk  *clock.Manual
	svc  *Service
	h    http.Handler
	logs *bytes.Buffer
}

func newRig(t *testing.T, store Store) *rig {
	t.Helper()
	clk, err := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(ServiceConfig{Clock: clk, TTL: ttl, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	h := NewHandler(svc, HandlerOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return &rig{t: t, clk: clk, svc: svc, h: h, logs: logs}
}

// do sends body to path and returns the status and the decoded answer.
func (r *rig) do(method, path, body string) (int, map[string]any) {
	r.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		r.t.Fatalf("%s %s: content type %q", method, path, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		r.t.Fatalf("%s %s: answer %q is not JSON: %v", method, path, rec.Body.String(), err)
	}
	return rec.Code, out
}

func (r *rig) post(op Op, m Message) (int, map[string]any) {
	r.t.Helper()
	body, err := EncodeMessage(m)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.do(http.MethodPost, op.Path(), string(body))
}

// secretOf is the secret holder chooses in these tests.
func secretOf(holder string) string { return "secret-of-" + holder + "-0123456789" }

func acquireMsg(id, resource, holder string) Message {
	return Message{Op: OpAcquire, Request: reqOf("acquire", id, resource, holder, 0), Secret: secretOf(holder)}
}

func renewMsg(id, resource, holder string, fence uint64, secret string) Message {
	return Message{Op: OpRenew, Request: reqOf("renew", id, resource, holder, fence), Secret: secret}
}

func releaseMsg(id, resource, holder string, fence uint64, secret string) Message {
	m := Message{Op: OpRelease, Request: reqOf("", id, resource, holder, fence), Secret: secret}
	return m
}

// grantOf returns the fence of a grant, and the secret its holder chose.
func grantOf(t *testing.T, status int, out map[string]any) (fence uint64, secret string) {
	t.Helper()
	if status != 200 || out["ok"] != true {
		t.Fatalf("not granted: %d %v", status, out)
	}
	g := out["grant"].(map[string]any)
	if _, has := g["secret"]; has {
		t.Fatalf("a grant carries a secret: %v", g)
	}
	return uint64(g["fence"].(float64)), secretOf(g["holderId"].(string))
}

func (r *rig) grant(op Op, m Message) (uint64, string) {
	r.t.Helper()
	st, out := r.post(op, m)
	return grantOf(r.t, st, out)
}

func errCodeOf(t *testing.T, out map[string]any) string {
	t.Helper()
	e, ok := out["error"].(map[string]any)
	if !ok || len(out) != 1 {
		t.Fatalf("not an error body: %v", out)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Fatalf("error without a message: %v", out)
	}
	return e["code"].(string)
}

func TestHandlerLifecycle(t *testing.T) {
	r := newRig(t, nil)
	st, out := r.post(OpAcquire, acquireMsg("q1", "deploy", "a"))
	f1, secret := grantOf(t, st, out)
	g := out["grant"].(map[string]any)
	if f1 != 1 || g["ttlMillis"] != 1000.0 || g["holderId"] != "a" || g["resource"] != "deploy" || g["requestId"] != "q1" {
		t.Fatalf("grant %v", g)
	}
	if exp := g["coordinatorExpiresAt"].(map[string]any); exp["millis"] != 2000.0 || exp["domain"] != "coordinator" {
		t.Fatalf("coordinatorExpiresAt %v", exp)
	}
	if rec, ok, _ := r.svc.store.Get(context.Background(), "deploy"); !ok || rec.SecretHash != sha256.Sum256([]byte(secret)) {
		t.Fatalf("stored %+v, want the secret's hash", rec)
	}

	// Denied while held, to another holder and to the holder itself.
	r.clk.Advance(100)
	for _, who := range []string{"b", "a"} {
		st, out = r.post(OpAcquire, acquireMsg("q-"+who, "deploy", who))
		if st != 200 || out["ok"] != false || out["heldBy"] != "a" || out["retryAfterMillis"] != 900.0 {
			t.Fatalf("deny to %s: %d %v", who, st, out)
		}
	}
	// A retry of the granting request, with its secret, gets the same grant.
	st, out = r.post(OpAcquire, acquireMsg("q1", "deploy", "a"))
	if f, s := grantOf(t, st, out); f != f1 || s != secret {
		t.Fatalf("retry got fence %d", f)
	}

	// Renew extends from the coordinator's reading and keeps the fence.
	r.clk.Advance(400)
	st, out = r.post(OpRenew, renewMsg("q2", "deploy", "a", f1, secret))
	if f, s := grantOf(t, st, out); f != f1 || s != secret {
		t.Fatalf("renew: fence %d", f)
	}
	if exp := out["grant"].(map[string]any)["coordinatorExpiresAt"].(map[string]any); exp["millis"] != 2500.0 {
		t.Fatalf("renewed to %v", exp)
	}

	// Release ends it; a retry of that release is answered ok again; the
	// next acquisition gets a higher fence.
	st, out = r.post(OpRelease, releaseMsg("q3", "deploy", "a", f1, secret))
	if st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	st, out = r.post(OpRelease, releaseMsg("q3", "deploy", "a", f1, secret))
	if st != 200 || out["ok"] != true {
		t.Fatalf("release retry: %d %v", st, out)
	}
	st, out = r.post(OpRelease, releaseMsg("q4", "deploy", "a", f1, secret))
	if st != 200 || out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("second release: %d %v", st, out)
	}
	st, out = r.post(OpRenew, renewMsg("q5", "deploy", "a", f1, secret))
	if st != 200 || out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("renew after release: %d %v", st, out)
	}
	st, out = r.post(OpAcquire, acquireMsg("q6", "deploy", "b"))
	if f, _ := grantOf(t, st, out); f != 2 {
		t.Fatalf("after release: fence %d", f)
	}

	// Expiry: never resurrected, and the next holder gets a higher fence.
	r.clk.Advance(1000)
	st, out = r.post(OpRenew, renewMsg("q7", "deploy", "b", 2, "whatever-whatever"))
	if st != 403 {
		t.Fatalf("renew with a wrong secret after expiry: %d %v", st, out)
	}
	st, out = r.post(OpAcquire, acquireMsg("q8", "deploy", "c"))
	if f, _ := grantOf(t, st, out); f != 3 {
		t.Fatalf("after expiry: fence %d", f)
	}
	// Fences come from one counter for every resource.
	st, out = r.post(OpAcquire, acquireMsg("q9", "other", "c"))
	if f, _ := grantOf(t, st, out); f != 4 {
		t.Fatalf("other resource: fence %d", f)
	}
}

func TestHandlerExpiredRenewIsRefused(t *testing.T) {
	r := newRig(t, nil)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "x", "a"))
	r.clk.Advance(1000) // exactly at the expiry: over
	st, out := r.post(OpRenew, renewMsg("q2", "x", "a", f, secret))
	if st != 200 || out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("%d %v", st, out)
	}
	st, out = r.post(OpRelease, releaseMsg("q3", "x", "a", f, secret))
	if st != 200 || out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("%d %v", st, out)
	}
}

// TestSecretGuardsTheLease: a second client that knows the holder id, the
// resource and the fence still cannot renew or release.
func TestSecretGuardsTheLease(t *testing.T) {
	r := newRig(t, nil)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
	before := r.state()
	for _, forged := range []string{"guess-guess-guess", secret[:len(secret)-1], secret + "x", strings.ToUpper(secret), secretOf("b")} {
		st, out := r.post(OpRenew, renewMsg("f1", "deploy", "a", f, forged))
		if st != 403 || errCodeOf(t, out) != CodeWrongSecret {
			t.Fatalf("forged renew: %d %v", st, out)
		}
		st, out = r.post(OpRelease, releaseMsg("f2", "deploy", "a", f, forged))
		if st != 403 || errCodeOf(t, out) != CodeWrongSecret {
			t.Fatalf("forged release: %d %v", st, out)
		}
	}
	if after := r.state(); !reflect.DeepEqual(before, after) {
		t.Fatalf("forgeries changed the state:\n%+v\n%+v", before, after)
	}
	// The holder still can.
	if st, out := r.post(OpRelease, releaseMsg("q2", "deploy", "a", f, secret)); st != 200 || out["ok"] != true {
		t.Fatalf("holder release: %d %v", st, out)
	}
	if strings.Contains(r.logs.String(), secret) {
		t.Fatal("the secret appears in the log")
	}
	if !strings.Contains(r.logs.String(), "wrong_secret") || !strings.Contains(r.logs.String(), "granted") {
		t.Fatalf("the log lacks the calls: %s", r.logs.String())
	}
}

// serviceState is everything a service holds: its store's contents, the
// coordinator's snapshot (sorted) and the releases it remembers.
type serviceState struct {
	Stored   Stored
	Snap     lease.Snapshot
	Released int
	Records  int
}

func (r *rig) state() serviceState {
	r.t.Helper()
	st, err := r.svc.store.Load(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	r.svc.coMu.RLock()
	snap := r.svc.co.Snapshot()
	r.svc.coMu.RUnlock()
	sort.Slice(snap.Leases, func(i, j int) bool { return snap.Leases[i].Resource < snap.Leases[j].Resource })
	r.svc.rel.mu.Lock()
	n := len(r.svc.rel.byID)
	r.svc.rel.mu.Unlock()
	return serviceState{Stored: st, Snap: snap, Released: n, Records: r.svc.Records()}
}

// TestBadInputChangesNothing sends every kind of bad request to a
// coordinator holding a lease and checks the refusal and that the state, and
// the fence the next acquisition gets, are as if it had never come.
func TestBadInputChangesNothing(t *testing.T) {
	r := newRig(t, nil)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
	okRenew, _ := EncodeMessage(renewMsg("q2", "deploy", "a", f, secret))
	big := `{"requestId":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code                            string
	}{
		{"wrong method", http.MethodGet, "/v1/acquire", "", "", 405, CodeMethodNotAllowed},
		{"put", http.MethodPut, "/v1/renew", "application/json", string(okRenew), 405, CodeMethodNotAllowed},
		{"unknown path", http.MethodPost, "/v1/steal", "application/json", string(okRenew), 404, CodeNotFound},
		{"root", http.MethodGet, "/", "", "", 404, CodeNotFound},
		{"prefix", http.MethodPost, "/v1/renew/", "application/json", string(okRenew), 404, CodeNotFound},
		{"too large", http.MethodPost, "/v1/renew", "application/json", big, 413, CodeBodyTooLarge},
		{"form body", http.MethodPost, "/v1/renew", "application/x-www-form-urlencoded", string(okRenew), 415, CodeUnsupportedMedia},
		{"malformed", http.MethodPost, "/v1/renew", "application/json", string(okRenew[:20]), 400, CodeMalformedJSON},
	}
	for _, tc := range badBodies {
		cases = append(cases, struct {
			name, method, path, ctype, body string
			status                          int
			code                            string
		}{tc.name, http.MethodPost, tc.op.Path(), "application/json; charset=utf-8", tc.body, codeStatus[tc.code], tc.code})
	}
	before := r.state()
	for _, tc := range cases {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		rec := httptest.NewRecorder()
		r.h.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: answer %q is not JSON", tc.name, rec.Body.String())
		}
		if rec.Code != tc.status || errCodeOf(t, out) != tc.code {
			t.Fatalf("%s: got %d %v, want %d %s", tc.name, rec.Code, out, tc.status, tc.code)
		}
		if tc.status == 405 && rec.Header().Get("Allow") != "POST" {
			t.Fatalf("%s: Allow is %q", tc.name, rec.Header().Get("Allow"))
		}
	}
	// A renewal that the core refuses as misuse (a fence never issued).
	st, out := r.post(OpRenew, renewMsg("q3", "deploy", "a", 99, secret))
	if st != 422 || errCodeOf(t, out) != CodeRejected {
		t.Fatalf("renewing fence 99: %d %v", st, out)
	}
	// The same request id for another resource.
	st, out = r.post(OpAcquire, acquireMsg("q1", "deploy", "b"))
	if st != 409 || errCodeOf(t, out) != CodeRequestIDReused {
		t.Fatalf("reused id: %d %v", st, out)
	}
	if after := r.state(); !reflect.DeepEqual(before, after) {
		t.Fatalf("bad input changed the state:\n%+v\n%+v", before, after)
	}
	r.clk.Advance(1000)
	if f2, _ := r.grant(OpAcquire, acquireMsg("q9", "deploy", "b")); f2 != f+1 {
		t.Fatalf("after bad input the next fence is %d, want %d", f2, f+1)
	}
}

// TestStoreFailureAnswersNothing: a change that could not be stored is
// not answered, and the coordinator behaves as if the call never came.
func TestStoreFailureAnswersNothing(t *testing.T) {
	store := NewMemoryStore()
	r := newRig(t, store)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
	before := r.state()
	fail := errors.New("disk full")
	store.Fail = func(Change) error { return fail }
	r.clk.Advance(500)
	st, out := r.post(OpRenew, renewMsg("q2", "deploy", "a", f, secret))
	if st != 503 || errCodeOf(t, out) != CodeUnavailable {
		t.Fatalf("renew with a failing store: %d %v", st, out)
	}
	st, out = r.post(OpRelease, releaseMsg("q3", "deploy", "a", f, secret))
	if st != 503 || errCodeOf(t, out) != CodeUnavailable {
		t.Fatalf("release with a failing store: %d %v", st, out)
	}
	st, out = r.post(OpAcquire, acquireMsg("q4", "other", "b"))
	if st != 503 || errCodeOf(t, out) != CodeUnavailable {
		t.Fatalf("acquire with a failing store: %d %v", st, out)
	}
	after := r.state()
	// Fences of failed grants stay issued (so they are never handed out
	// twice); nothing else moved.
	after.Snap.IssuedFence = before.Snap.IssuedFence
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("failed writes changed the state:\n%+v\n%+v", before, after)
	}
	// The holder still holds it, until 2000: the failed renewal did not
	// extend it, the failed release did not end it.
	st, out = r.post(OpAcquire, acquireMsg("q5", "deploy", "b"))
	if st != 200 || out["heldBy"] != "a" || out["retryAfterMillis"] != 500.0 {
		t.Fatalf("after failed writes: %d %v", st, out)
	}
	store.Fail = nil
	r.clk.Advance(500)
	f2, _ := r.grant(OpAcquire, acquireMsg("q6", "deploy", "b"))
	if f2 <= f+1 {
		t.Fatalf("fence %d after a failed grant of fence %d", f2, f+1)
	}
	if rec, ok, _ := store.Get(context.Background(), "deploy"); !ok || rec.HolderID != "b" || rec.Fence != f2 || store.issued != f2 {
		t.Fatalf("stored %+v (high-water mark %d)", rec, store.issued)
	}
}

// TestRestartFromStore: a new service over the same store continues above
// the last fence and remembers the live holder and its secret's hash.
func TestRestartFromStore(t *testing.T) {
	store := NewMemoryStore()
	r := newRig(t, store)
	f, secret := r.grant(OpAcquire, acquireMsg("q1", "deploy", "a"))
	r.clk.Advance(300)
	r.grant(OpRenew, renewMsg("q2", "deploy", "a", f, secret)) // expires at 2300
	fo, so := r.grant(OpAcquire, acquireMsg("q7", "other", "c"))
	if st, out := r.post(OpRelease, releaseMsg("q8", "other", "c", fo, so)); st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}

	r2 := newRig(t, store)
	r2.clk.Set(1500)
	st, out := r2.post(OpAcquire, acquireMsg("q3", "deploy", "b"))
	if st != 200 || out["heldBy"] != "a" || out["retryAfterMillis"] != 800.0 {
		t.Fatalf("after restart: %d %v", st, out)
	}
	if f2, _ := r2.grant(OpAcquire, acquireMsg("q1", "deploy", "a")); f2 != f {
		t.Fatal("a retry after the restart got another grant")
	}
	replay := acquireMsg("q1", "deploy", "a")
	replay.Secret = "someone-else-entirely"
	if st, out := r2.post(OpAcquire, replay); st != 403 || errCodeOf(t, out) != CodeWrongSecret {
		t.Fatalf("replay without the secret after restart: %d %v", st, out)
	}
	if st, out := r2.post(OpRenew, renewMsg("q4", "deploy", "a", f, "forged-forged-forged")); st != 403 {
		t.Fatalf("%d %v", st, out)
	}
	r2.grant(OpRenew, renewMsg("q5", "deploy", "a", f, secret))
	// The release made before the restart is remembered: its retry is ok.
	if st, out := r2.post(OpRelease, releaseMsg("q8", "other", "c", fo, so)); st != 200 || out["ok"] != true {
		t.Fatalf("a retried release after the restart: %d %v", st, out)
	}
	r2.clk.Advance(1000)
	if f3, _ := r2.grant(OpAcquire, acquireMsg("q6", "deploy", "b")); f3 != fo+1 {
		t.Fatalf("fence %d after restart, want %d", f3, fo+1)
	}
}

func TestNewServiceChecksConfig(t *testing.T) {
	clk, _ := clock.NewManual("c", clock.ManualOptions{})
	if _, err := NewService(ServiceConfig{TTL: ttl}); err == nil {
		t.Fatal("no clock accepted")
	}
	if _, err := NewService(ServiceConfig{Clock: clk}); err == nil {
		t.Fatal("no ttl accepted")
	}
}

func reqOf(kind, id, resource, holder string, fence uint64) lease.Request {
	r := lease.Request{Kind: lease.Kind(kind), RequestID: id, Resource: resource, HolderID: holder, Fence: fence}
	if kind != "" {
		r.SentAt = clock.At("agent-"+holder, 1)
	}
	return r
}

// TestHandlerBodies: the body limit holds whether or not the length is
// declared, and a valid body of exactly the limit is taken.
func TestHandlerBodies(t *testing.T) {
	r := newRig(t, nil)
	send := func(body string, declared bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/acquire", strings.NewReader(body))
		if !declared {
			req.ContentLength = -1
		}
		rec := httptest.NewRecorder()
		r.h.ServeHTTP(rec, req)
		return rec
	}
	good, _ := EncodeMessage(acquireMsg("padded", "long", "p"))
	exact := string(good[:len(good)-1]) + strings.Repeat(" ", MaxBodyBytes-len(good)) + "}"
	if len(exact) != MaxBodyBytes {
		t.Fatal(len(exact))
	}
	for _, declared := range []bool{true, false} {
		if rec := send(exact+" ", declared); rec.Code != 413 || !strings.Contains(rec.Body.String(), CodeBodyTooLarge) {
			t.Fatalf("declared %v: one byte over the limit: %d %s", declared, rec.Code, rec.Body.String())
		}
	}
	if rec := send(exact, false); rec.Code != 200 {
		t.Fatalf("a body of exactly the limit: %d %s", rec.Code, rec.Body.String())
	}
}

// TestAppendGrantReplyMatchesMarshal: a grant written without reflection is
// byte for byte what json.Marshal writes, and any reply it does not take
// is left to json.Marshal.
func TestAppendGrantReplyMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 3))
	strs := []string{"a", "res-1", "holder_x", "", "a b", "é", "<x>", "a&b", `q"uote`, `back\slash`, "tab\t", "\u2028", "~!@#$%^*()", "\x7f", "\xff"}
	floats := []float64{0, math.Copysign(0, -1), 1, 30000, 1.5, 1e-6, 9.99e-7, 1e21, 9.99e20, 1.7e12 + 0.125, -42.5, 123456789.123456, math.SmallestNonzeroFloat64}
	taken := 0
	for i := range 5000 {
		s := func() string {
			if rng.IntN(8) == 0 {
				return strs[rng.IntN(len(strs))]
			}
			return strs[rng.IntN(3)]
		}
		f := func() float64 {
			if rng.IntN(3) == 0 {
				return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(50)-20))
			}
			return floats[rng.IntN(len(floats))]
		}
		reply := Reply{OK: true, Grant: &Grant{RequestID: s(), Resource: s(), HolderID: s(), Fence: rng.Uint64N(1 << 53),
			TTLMillis: f(), CoordinatorExpiresAt: Instant{Millis: f(), Domain: s()}}}
		switch i % 10 {
		case 7:
			reply.OK = false
		case 8:
			reply.Reason = "expired"
		case 9:
			reply = Reply{HeldBy: s(), RetryAfterMillis: f()}
		}
		want, err := json.Marshal(reply)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendGrantReply(nil, reply)
		if !ok {
			continue
		}
		taken++
		if string(got) != string(want) {
			t.Fatalf("%+v: wrote %s, json.Marshal %s", reply, got, want)
		}
		if i%10 >= 7 {
			t.Fatalf("took a reply that is not a plain grant: %+v", reply)
		}
	}
	if taken < 500 {
		t.Fatalf("only %d of 5000 grants written without reflection", taken)
	}
}
