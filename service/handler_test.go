package service

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/service/wire"
)

func TestHandlerLifecycle(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	st, out := r.post(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	f1, secret := grantOf(t, st, out)
	g := out["grant"].(map[string]any)
	if f1 != 1 || g["ttlMillis"] != 1000.0 || g["holderId"] != "a" || g["resource"] != "deploy" || g["requestId"] != "q1" {
		t.Fatalf("grant %v", g)
	}
	if exp := g["coordinatorExpiresAt"].(map[string]any); exp["millis"] != 2000.0 || exp["domain"] != "coordinator" {
		t.Fatalf("coordinatorExpiresAt %v", exp)
	}
	if e, ok := r.entry("deploy"); !ok || e.SecretHash != sha256.Sum256([]byte(secret)) || e.Fence != 1 || e.ExpiresAt != 2000 {
		t.Fatalf("stored %+v, want the secret's hash", e)
	}

	// Denied while held, to another holder and to the holder itself.
	r.clk.Advance(100)
	for _, who := range []string{"b", "a"} {
		st, out = r.post(wire.OpAcquire, acquireMsg("q-"+who, "deploy", who))
		if st != 200 || out["ok"] != false || out["heldBy"] != "a" || out["retryAfterMillis"] != 900.0 {
			t.Fatalf("deny to %s: %d %v", who, st, out)
		}
	}
	// A retry of the granting request, with its secret, gets the same grant.
	st, out = r.post(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	if f, s := grantOf(t, st, out); f != f1 || s != secret {
		t.Fatalf("retry got fence %d", f)
	}

	// Renew extends from the coordinator's reading and keeps the fence.
	r.clk.Advance(400)
	st, out = r.post(wire.OpRenew, renewMsg("q2", "deploy", "a", f1, secret))
	if f, s := grantOf(t, st, out); f != f1 || s != secret {
		t.Fatalf("renew: fence %d", f)
	}
	if exp := out["grant"].(map[string]any)["coordinatorExpiresAt"].(map[string]any); exp["millis"] != 2500.0 {
		t.Fatalf("renewed to %v", exp)
	}

	// Release ends it; a retry of that release is answered ok again; the
	// next acquisition gets a higher fence.
	for _, id := range []string{"q3", "q3"} {
		if st, out = r.post(wire.OpRelease, releaseMsg(id, "deploy", "a", f1, secret)); st != 200 || out["ok"] != true {
			t.Fatalf("release: %d %v", st, out)
		}
	}
	st, out = r.post(wire.OpRelease, releaseMsg("q4", "deploy", "a", f1, secret))
	if st != 200 || out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("second release: %d %v", st, out)
	}
	st, out = r.post(wire.OpRenew, renewMsg("q5", "deploy", "a", f1, secret))
	if st != 200 || out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("renew after release: %d %v", st, out)
	}
	st, out = r.post(wire.OpAcquire, acquireMsg("q6", "deploy", "b"))
	if f, _ := grantOf(t, st, out); f != 2 {
		t.Fatalf("after release: fence %d", f)
	}

	// Expiry: never resurrected, and the next holder gets a higher fence.
	r.clk.Advance(1000)
	st, out = r.post(wire.OpRenew, renewMsg("q7", "deploy", "b", 2, "whatever-whatever"))
	if st != 403 {
		t.Fatalf("renew with a wrong secret after expiry: %d %v", st, out)
	}
	st, out = r.post(wire.OpAcquire, acquireMsg("q8", "deploy", "c"))
	if f, _ := grantOf(t, st, out); f != 3 {
		t.Fatalf("after expiry: fence %d", f)
	}
	// Fences come from one counter for every resource.
	st, out = r.post(wire.OpAcquire, acquireMsg("q9", "other", "c"))
	if f, _ := grantOf(t, st, out); f != 4 {
		t.Fatalf("other resource: fence %d", f)
	}
}

func TestHandlerExpiredRenewIsRefused(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f, secret := r.grant(wire.OpAcquire, acquireMsg("q1", "x", "a"))
	r.clk.Advance(1000) // exactly at the expiry: over
	st, out := r.post(wire.OpRenew, renewMsg("q2", "x", "a", f, secret))
	if st != 200 || out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("%d %v", st, out)
	}
	st, out = r.post(wire.OpRelease, releaseMsg("q3", "x", "a", f, secret))
	if st != 200 || out["ok"] != false || out["reason"] != "expired" {
		t.Fatalf("%d %v", st, out)
	}
}

// TestSecretGuardsTheLease: a second client that knows the holder id, the
// resource and the fence still cannot renew or release.
func TestSecretGuardsTheLease(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f, secret := r.grant(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	before := r.state()
	for _, forged := range []string{"guess-guess-guess", secret[:len(secret)-1], secret + "x", strings.ToUpper(secret), secretOf("b")} {
		r.wrongSecret("forged", "f1", "f2", f, forged)
	}
	if after := r.state(); !reflect.DeepEqual(before, after) {
		t.Fatalf("forgeries changed the state:\n%+v\n%+v", before, after)
	}
	// The holder still can.
	if st, out := r.post(wire.OpRelease, releaseMsg("q2", "deploy", "a", f, secret)); st != 200 || out["ok"] != true {
		t.Fatalf("holder release: %d %v", st, out)
	}
	if strings.Contains(r.logs.String(), secret) {
		t.Fatal("the secret appears in the log")
	}
	if !strings.Contains(r.logs.String(), "wrong_secret") || !strings.Contains(r.logs.String(), "granted") {
		t.Fatalf("the log lacks the calls: %s", r.logs.String())
	}
}

// badRequests are requests every coordinator refuses before its state is
// touched (the decoder's own table, with every kind of bad body, is in
// service/wire).
var badRequests = []struct {
	name, method, path, ctype, body string
	status                          int
	code                            string
}{
	{"wrong method", http.MethodGet, "/v1/acquire", "", "", 405, wire.CodeMethodNotAllowed},
	{"put", http.MethodPut, "/v1/renew", "application/json", goodRenew, 405, wire.CodeMethodNotAllowed},
	{"unknown path", http.MethodPost, "/v1/steal", "application/json", goodRenew, 404, wire.CodeNotFound},
	{"root", http.MethodGet, "/", "", "", 404, wire.CodeNotFound},
	{"prefix", http.MethodPost, "/v1/renew/", "application/json", goodRenew, 404, wire.CodeNotFound},
	{"other version", http.MethodPost, "/v2/renew", "application/json", goodRenew, 404, wire.CodeNotFound},
	{"too large", http.MethodPost, "/v1/renew", "application/json", `{"requestId":"` + strings.Repeat("x", wire.MaxBodyBytes) + `"}`, 413, wire.CodeBodyTooLarge},
	{"form body", http.MethodPost, "/v1/renew", "application/x-www-form-urlencoded", goodRenew, 415, wire.CodeUnsupportedMedia},
	{"malformed", http.MethodPost, "/v1/renew", "application/json", goodRenew[:20], 400, wire.CodeMalformedJSON},
	{"lone surrogate", http.MethodPost, "/v1/renew", "application/json", strings.Replace(goodRenew, "deploy", `dep\ud800`, 1), 400, wire.CodeMalformedJSON},
	{"invalid utf8", http.MethodPost, "/v1/release", "application/json; charset=utf-8", strings.Replace(goodRelease, "deploy", "dep\xff", 1), 400, wire.CodeMalformedJSON},
	{"duplicate", http.MethodPost, "/v1/renew", "application/json", strings.Replace(goodRenew, `"fence":1`, `"fence":1,"fence":2`, 1), 400, wire.CodeDuplicateField},
	{"unknown", http.MethodPost, "/v1/release", "application/json", strings.Replace(goodRelease, `"fence"`, `"ttl":5,"fence"`, 1), 400, wire.CodeUnknownField},
	{"null", http.MethodPost, "/v1/renew", "application/json", strings.Replace(goodRenew, `"holderId":"a"`, `"holderId":null`, 1), 400, wire.CodeWrongType},
	{"missing", http.MethodPost, "/v1/release", "application/json", strings.Replace(goodRelease, `"fence":1,`, ``, 1), 400, wire.CodeMissingField},
	{"fence zero", http.MethodPost, "/v1/release", "application/json", strings.Replace(goodRelease, `"fence":1`, `"fence":0`, 1), 400, wire.CodeInvalidValue},
	{"long id", http.MethodPost, "/v1/release", "application/json", strings.Replace(goodRelease, `"q3"`, `"`+strings.Repeat("q", wire.DefaultMaxIDBytes+1)+`"`, 1), 400, wire.CodeInvalidValue},
}

const (
	goodRenew   = `{"requestId":"q2","resource":"deploy","holderId":"a","sentAt":{"millis":1,"domain":"agent-a"},"kind":"renew","fence":1,"secret":"secret-of-a-0123456789"}`
	goodRelease = `{"requestId":"q3","resource":"deploy","holderId":"a","fence":1,"secret":"secret-of-a-0123456789"}`
)

// TestBadInputChangesNothing sends every kind of bad request to a
// coordinator holding a lease and checks the refusal and that the state, and
// the fence the next acquisition gets, are as if it had never come.
func TestBadInputChangesNothing(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f, _ := r.grant(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	before := r.state()
	for _, tc := range badRequests {
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		rec := httptest.NewRecorder()
		r.h.ServeHTTP(rec, req)
		if e := wire.ParseError(rec.Code, rec.Body.Bytes()); rec.Code != tc.status || e == nil || e.Code != tc.code {
			t.Fatalf("%s: got %d %s, want %d %s", tc.name, rec.Code, rec.Body.String(), tc.status, tc.code)
		}
		if tc.status == 405 && rec.Header().Get("Allow") != "POST" {
			t.Fatalf("%s: Allow is %q", tc.name, rec.Header().Get("Allow"))
		}
	}
	// A renewal that the core refuses as misuse (a fence never issued).
	st, out := r.post(wire.OpRenew, renewMsg("q3", "deploy", "a", 99, secretOf("a")))
	if st != 422 || errCodeOf(t, out) != wire.CodeRejected {
		t.Fatalf("renewing fence 99: %d %v", st, out)
	}
	// The request id of the current lease by another holder.
	st, out = r.post(wire.OpAcquire, acquireMsg("q1", "deploy", "b"))
	if st != 409 || errCodeOf(t, out) != wire.CodeRequestIDReused {
		t.Fatalf("reused id: %d %v", st, out)
	}
	if after := r.state(); !reflect.DeepEqual(before, after) {
		t.Fatalf("bad input changed the state:\n%+v\n%+v", before, after)
	}
	r.clk.Advance(1000)
	if f2, _ := r.grant(wire.OpAcquire, acquireMsg("q9", "deploy", "b")); f2 != f+1 {
		t.Fatalf("after bad input the next fence is %d, want %d", f2, f+1)
	}
}

// TestStoreFailureAnswersNothing: a change that could not be stored is
// not answered, and the coordinator behaves as if the call never came: the
// entry in memory is replaced only after its write, so there is nothing to
// undo.
func TestStoreFailureAnswersNothing(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f, secret := r.grant(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	before := r.state()
	r.disk.fail = func(Batch) error { return errDiskFull }
	r.clk.Advance(500)
	for _, c := range []struct {
		op wire.Op
		m  wire.Message
	}{
		{wire.OpRenew, renewMsg("q2", "deploy", "a", f, secret)},
		{wire.OpRelease, releaseMsg("q3", "deploy", "a", f, secret)},
		{wire.OpAcquire, acquireMsg("q4", "other", "b")},
	} {
		if st, out := r.post(c.op, c.m); st != 503 || errCodeOf(t, out) != wire.CodeUnavailable {
			t.Fatalf("%s with a failing store: %d %v", c.op, st, out)
		}
	}
	// Fences of failed grants stay issued (so they are never handed out
	// twice); nothing else moved.
	after := r.state()
	if after.Issued <= before.Issued {
		t.Fatalf("the failed grant's fence was taken back: %d", after.Issued)
	}
	after.Issued = before.Issued
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("failed writes changed the state:\n%+v\n%+v", before, after)
	}
	// The holder still holds it, until 2000: the failed renewal did not
	// extend it, the failed release did not end it.
	st, out := r.post(wire.OpAcquire, acquireMsg("q5", "deploy", "b"))
	if st != 200 || out["heldBy"] != "a" || out["retryAfterMillis"] != 500.0 {
		t.Fatalf("after failed writes: %d %v", st, out)
	}
	r.disk.fail = nil
	r.clk.Advance(500)
	f2, _ := r.grant(wire.OpAcquire, acquireMsg("q6", "deploy", "b"))
	if f2 <= f+1 {
		t.Fatalf("fence %d after a failed grant of fence %d", f2, f+1)
	}
	if e, ok := r.entry("deploy"); !ok || e.HolderID != "b" || e.Fence != f2 {
		t.Fatalf("stored %+v", e)
	}
}

// TestRestartFromStore: a new service over the same store continues above
// the last fence and remembers the live holder, its secret's hash and the
// releases of the last TTL.
func TestRestartFromStore(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	f, secret := r.grant(wire.OpAcquire, acquireMsg("q1", "deploy", "a"))
	r.clk.Advance(300)
	r.grant(wire.OpRenew, renewMsg("q2", "deploy", "a", f, secret)) // expires at 2300
	fo, so := r.grant(wire.OpAcquire, acquireMsg("q7", "other", "c"))
	if st, out := r.post(wire.OpRelease, releaseMsg("q8", "other", "c", fo, so)); st != 200 || out["ok"] != true {
		t.Fatalf("release: %d %v", st, out)
	}

	r2 := newRig(t, r.disk, LocalConfig{})
	r2.clk.Set(1500)
	st, out := r2.post(wire.OpAcquire, acquireMsg("q3", "deploy", "b"))
	if st != 200 || out["heldBy"] != "a" || out["retryAfterMillis"] != 800.0 {
		t.Fatalf("after restart: %d %v", st, out)
	}
	if f2, _ := r2.grant(wire.OpAcquire, acquireMsg("q1", "deploy", "a")); f2 != f {
		t.Fatal("a retry after the restart got another grant")
	}
	replay := acquireMsg("q1", "deploy", "a")
	replay.Secret = "someone-else-entirely"
	if st, out := r2.post(wire.OpAcquire, replay); st != 403 || errCodeOf(t, out) != wire.CodeWrongSecret {
		t.Fatalf("replay without the secret after restart: %d %v", st, out)
	}
	if st, out := r2.post(wire.OpRenew, renewMsg("q4", "deploy", "a", f, "forged-forged-forged")); st != 403 {
		t.Fatalf("%d %v", st, out)
	}
	r2.grant(wire.OpRenew, renewMsg("q5", "deploy", "a", f, secret))
	// The release made before the restart is remembered: its retry is ok.
	if st, out := r2.post(wire.OpRelease, releaseMsg("q8", "other", "c", fo, so)); st != 200 || out["ok"] != true {
		t.Fatalf("a retried release after the restart: %d %v", st, out)
	}
	r2.clk.Advance(1000)
	if f3, _ := r2.grant(wire.OpAcquire, acquireMsg("q6", "deploy", "b")); f3 != fo+1 {
		t.Fatalf("fence %d after restart, want %d", f3, fo+1)
	}
}

func TestNewChecksConfig(t *testing.T) {
	clk, _ := clock.NewManual("c", clock.ManualOptions{})
	for _, cfg := range []LocalConfig{{TTL: ttl}, {Clock: clk}, {Clock: clk, TTL: ttl, Limits: Limits{MaxLeases: -1}}, {Clock: clk, TTL: ttl, MinFence: 1 << 53}} {
		if _, err := NewLocal(cfg); err == nil {
			t.Fatalf("%+v accepted", cfg)
		}
	}
	store, _ := NewLocal(LocalConfig{Clock: clk, TTL: ttl})
	if _, err := New(Config{Store: store}); err == nil {
		t.Fatal("no ttl accepted")
	}
	if _, err := New(Config{TTL: ttl}); err == nil {
		t.Fatal("no store accepted")
	}
}

// TestHandlerBodies: the body limit holds whether or not the length is
// declared, and a valid body of exactly the limit is taken.
func TestHandlerBodies(t *testing.T) {
	r := newRig(t, nil, LocalConfig{})
	send := func(body string, declared bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/acquire", strings.NewReader(body))
		if !declared {
			req.ContentLength = -1
		}
		rec := httptest.NewRecorder()
		r.h.ServeHTTP(rec, req)
		return rec
	}
	good, _ := wire.EncodeMessage(acquireMsg("padded", "long", "p"))
	exact := string(good[:len(good)-1]) + strings.Repeat(" ", wire.MaxBodyBytes-len(good)) + "}"
	if len(exact) != wire.MaxBodyBytes {
		t.Fatal(len(exact))
	}
	for _, declared := range []bool{true, false} {
		if rec := send(exact+" ", declared); rec.Code != 413 || !strings.Contains(rec.Body.String(), wire.CodeBodyTooLarge) {
			t.Fatalf("declared %v: one byte over the limit: %d %s", declared, rec.Code, rec.Body.String())
		}
	}
	if rec := send(exact, false); rec.Code != 200 {
		t.Fatalf("a body of exactly the limit: %d %s", rec.Code, rec.Body.String())
	}
}

// TestUnreadableStoreIsRetried: a store that cannot be read is answered
// 503 and read again by the next call; one whose contents are refused
// keeps being refused (500).
func TestUnreadableStoreIsRetried(t *testing.T) {
	disk := newMemPersist()
	flaky := &flakyLoad{Persister: disk, fails: 1}
	clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	store, _ := NewLocal(LocalConfig{Clock: clk, TTL: ttl, Persist: flaky})
	svc, _ := New(Config{TTL: ttl, Store: store})
	if _, err := svc.Call(context.Background(), acquireMsg("q1", "r", "a")); !isCode(err, wire.CodeUnavailable) {
		t.Fatalf("unreadable store: %v", err)
	}
	if rep, err := svc.Call(context.Background(), acquireMsg("q1", "r", "a")); err != nil || !rep.OK {
		t.Fatalf("after the store came back: %+v %v", rep, err)
	}
	disk.entries["bad"] = []byte(`{"fence":1}`)
	store2, _ := NewLocal(LocalConfig{Clock: clk, TTL: ttl, Persist: disk})
	svc2, _ := New(Config{TTL: ttl, Store: store2})
	for range 2 {
		if _, err := svc2.Call(context.Background(), acquireMsg("q2", "r", "a")); !isCode(err, wire.CodeInternal) || !errors.Is(store2.Load(context.Background()), ErrInconsistent) {
			t.Fatalf("inconsistent store: %v", err)
		}
	}
}

type flakyLoad struct {
	Persister
	fails int
}

func (f *flakyLoad) Load(ctx context.Context) (Stored, error) {
	if f.fails > 0 {
		f.fails--
		return Stored{}, errors.New("test: the disk is not there yet")
	}
	return f.Persister.Load(ctx)
}
