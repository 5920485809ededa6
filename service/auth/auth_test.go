package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

func hashOf(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

var (
	tokA = "token-of-indexer-0123456789"
	tokB = "token-of-deployer-0123456789"
	hA   = hashOf(tokA)
	hB   = hashOf(tokB)
)

func TestParseDefaultsAndAuthenticate(t *testing.T) {
	s, err := Parse([]byte(`[
		{"name": "indexer", "tokenSha256": "` + hA + `", "resources": ["jobs/*", "deploy-slot"]},
		{"name": "deployer", "tokenSha256": "` + strings.ToUpper(hB) + `", "resources": ["*"], "holders": ["deploy-1", "ci-*"],
		 "maxLeases": 5, "maxWaiters": 2, "metrics": true, "expires": "2030-01-01T01:00:00+01:00"}]`))
	if err != nil {
		t.Fatal(err)
	}
	a, ok := s.Authenticate(tokA)
	if !ok || a.Name != "indexer" || strings.Join(a.Holders, ",") != "indexer*" || a.MaxLeases != 0 || a.MaxWaiters != 0 || a.Metrics || !a.Expires.IsZero() {
		t.Fatalf("indexer: %+v %v", a, ok)
	}
	b, ok := s.Authenticate(tokB)
	if !ok || b.Name != "deployer" || b.MaxLeases != 5 || b.MaxWaiters != 2 || !b.Metrics || !b.Expires.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("deployer: %+v %v", b, ok)
	}
	if a.Admin || b.Admin {
		t.Fatal("a token without \"admin\" is an admin")
	}
	adm, err := Parse([]byte(`[{"name": "ops", "tokenSha256": "` + hA + `", "resources": ["jobs/*"], "admin": true}]`))
	if tok, ok := adm.Authenticate(tokA); err != nil || !ok || !tok.Admin {
		t.Fatalf("admin: %+v %v", tok, err)
	}
	for _, bad := range []string{"", tokA + " ", tokA[:len(tokA)-1], hA, strings.ToUpper(tokA)} {
		if tok, ok := s.Authenticate(bad); ok {
			t.Fatalf("%q authenticated as %s", bad, tok.Name)
		}
	}
}

// TestParseRefuses: every bad file is refused with a message naming the
// entry and what is wrong, and never the token's hash.
func TestParseRefuses(t *testing.T) {
	entry := func(members string) string {
		return `[{"name": "indexer", "tokenSha256": "` + hA + `", "resources": ["jobs/*"]` + members + `}]`
	}
	for _, tc := range []struct{ name, file, want string }{
		{"not JSON", `[{`, "not a JSON array"},
		{"an object", `{"name": "x"}`, "not a JSON array"},
		{"empty", `[]`, "lists no tokens"},
		{"trailing data", entry("") + `x`, "not a JSON array"},
		{"a string entry", `["x"]`, "not a JSON array"},
		{"unknown member", entry(`, "scopes": []`), `unknown member "scopes"`},
		{"repeated member", entry(`, "name": "again"`), "not a JSON array"},
		{"null member", entry(`, "holders": null`), `member "holders" is null`},
		{"no name", `[{"tokenSha256": "` + hA + `", "resources": ["*"]}]`, `member "name" is missing`},
		{"no hash", `[{"name": "a", "resources": ["*"]}]`, `member "tokenSha256" is missing`},
		{"no resources", `[{"name": "a", "tokenSha256": "` + hA + `"}]`, `member "resources" is missing`},
		{"bad name", `[{"name": "a b", "tokenSha256": "` + hA + `", "resources": ["*"]}]`, "letters, digits"},
		{"long name", `[{"name": "` + strings.Repeat("n", 65) + `", "tokenSha256": "` + hA + `", "resources": ["*"]}]`, "1 to 64 bytes"},
		{"name a number", `[{"name": 7, "tokenSha256": "` + hA + `", "resources": ["*"]}]`, `"name" must be a string`},
		{"short hash", `[{"name": "a", "tokenSha256": "` + hA[:62] + `", "resources": ["*"]}]`, "64 hexadecimal digits"},
		{"bad hex", `[{"name": "a", "tokenSha256": "` + "zz" + hA[2:] + `", "resources": ["*"]}]`, "64 hexadecimal digits"},
		{"no resource pattern", `[{"name": "a", "tokenSha256": "` + hA + `", "resources": []}]`, "lists no pattern"},
		{"empty pattern", `[{"name": "a", "tokenSha256": "` + hA + `", "resources": [""]}]`, "empty pattern"},
		{"star inside", `[{"name": "a", "tokenSha256": "` + hA + `", "resources": ["jobs/*/x"]}]`, "may only end"},
		{"resources a string", `[{"name": "a", "tokenSha256": "` + hA + `", "resources": "*"}]`, "array of strings"},
		{"no holder pattern", entry(`, "holders": []`), "lists no pattern"},
		{"maxLeases 0", entry(`, "maxLeases": 0`), `"maxLeases" must be a whole number`},
		{"maxLeases negative", entry(`, "maxLeases": -1`), `"maxLeases" must be a whole number`},
		{"maxLeases fraction", entry(`, "maxLeases": 1.5`), `"maxLeases" must be a whole number`},
		{"maxWaiters a string", entry(`, "maxWaiters": "5"`), `"maxWaiters" must be a whole number`},
		{"metrics a string", entry(`, "metrics": "yes"`), `"metrics" must be true or false`},
		{"admin a string", entry(`, "admin": "yes"`), `"admin" must be true or false`},
		{"admin null", entry(`, "admin": null`), `member "admin" is null`},
		{"admin twice", entry(`, "admin": true, "admin": true`), `not a JSON array`},
		{"expires a number", entry(`, "expires": 1893456000`), `"expires" must be a string`},
		{"expires without a zone", entry(`, "expires": "2030-01-01T00:00:00"`), `not an RFC 3339 instant with its zone`},
		{"expires a date", entry(`, "expires": "2030-01-01"`), `not an RFC 3339 instant with its zone`},
		{"expires in words", entry(`, "expires": "next year"`), `"expires" is "next year"`},
		{"same name", `[{"name": "a", "tokenSha256": "` + hA + `", "resources": ["*"]}, {"name": "a", "tokenSha256": "` + hB + `", "resources": ["*"]}]`,
			`entry 2 ("a"): the name is also entry 1's`},
		{"same token", `[{"name": "a", "tokenSha256": "` + hA + `", "resources": ["*"]}, {"name": "b", "tokenSha256": "` + strings.ToUpper(hA) + `", "resources": ["*"]}]`,
			`entry 2 ("b"): the same tokenSha256 as entry 1 ("a")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.file))
			if err == nil {
				t.Fatalf("accepted: %+v", s.Tokens())
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("%q does not say %q", msg, tc.want)
			}
			for _, h := range []string{hA, hB} {
				if strings.Contains(strings.ToLower(msg), h[:16]) {
					t.Fatalf("the message repeats a hash: %q", msg)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "tokens file") {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte(`[{"name": "a", "tokenSha256": "`+hA+`", "resources": ["*"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Load(path); err != nil || len(s.Tokens()) != 1 {
		t.Fatalf("%v %v", s, err)
	}
	if err := os.WriteFile(path, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a huge file: %v", err)
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"deploy-slot", "deploy-slot", true},
		{"deploy-slot", "deploy-slot-2", false},
		{"deploy-slot", "deploy", false},
		{"jobs/*", "jobs/1", true},
		{"jobs/*", "jobs/", true},
		{"jobs/*", "jobs", false},
		{"jobs/*", "job/1", false},
		{"*", "anything", true},
		{"*", "", true},
	} {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
}

func msg(op wire.Op, resource, holder string) *wire.Message {
	return &wire.Message{Op: op, Request: lease.Request{Resource: resource, HolderID: holder}}
}

func TestAllows(t *testing.T) {
	tok := Token{Name: "indexer", Resources: []string{"jobs/*", "deploy-slot"}, Holders: []string{"indexer*"}}
	for _, tc := range []struct {
		m    *wire.Message
		want string
	}{
		{msg(wire.OpAcquire, "jobs/1", "indexer-1"), ""},
		{msg(wire.OpRenew, "deploy-slot", "indexer"), ""},
		{msg(wire.OpRelease, "jobs/x", "indexer-9"), ""},
		{msg(wire.OpAcquire, "other", "indexer-1"), "may not name the resource"},
		{msg(wire.OpAcquire, "jobs/1", "deployer-1"), "may not act for the holder"},
		{msg(wire.OpRelease, "jobs/1", "deployer-1"), "may not act for the holder"},
		{msg(wire.OpInspect, "jobs/1", ""), ""},
		{msg(wire.OpInspect, "secret-thing", ""), "may not name the resource"},
		{msg(wire.OpRevoke, "jobs/1", ""), "is not an admin token"},
	} {
		e := tok.Allows(tc.m)
		switch {
		case tc.want == "" && e != nil:
			t.Errorf("%s %s %s: refused %v", tc.m.Op, tc.m.Request.Resource, tc.m.Request.HolderID, e)
		case tc.want != "" && (e == nil || e.Code != wire.CodeForbidden || e.Status != 403 || !strings.Contains(e.Message, tc.want)):
			t.Errorf("%s %s %s: %v, want 403 %q", tc.m.Op, tc.m.Request.Resource, tc.m.Request.HolderID, e, tc.want)
		}
	}
}

// TestRevokeScope: an admin token revokes within its resources whatever
// the holder id (its holders patterns do not apply to a revoke), and never
// outside them; a token without "admin" never revokes.
func TestRevokeScope(t *testing.T) {
	admin := Token{Name: "ops", Resources: []string{"jobs/*", "deploy-slot"}, Holders: []string{"ops*"}, Admin: true}
	user := admin
	user.Admin = false
	for _, tc := range []struct {
		resource, holder string
		admin, user      bool
	}{
		{"jobs/1", "", true, false}, {"jobs/1", "indexer-7", true, false}, {"deploy-slot", "x", true, false},
		{"jobs", "", false, false}, {"deploy-slot-2", "", false, false}, {"other/jobs/1", "ops-1", false, false},
	} {
		for _, c := range []struct {
			tok  Token
			want bool
		}{{admin, tc.admin}, {user, tc.user}} {
			m := msg(wire.OpRevoke, tc.resource, tc.holder)
			e := c.tok.Allows(m)
			if (e == nil) != c.want || (e != nil && (e.Status != 403 || e.Code != wire.CodeForbidden)) {
				t.Errorf("admin %v: revoke %s %q: %v, want allowed %v", c.tok.Admin, tc.resource, tc.holder, e, c.want)
			}
		}
	}
}

// TestGuard: the middleware refuses requests without a known token before
// the handler sees them; Authorize fills in the caller and refuses calls
// out of scope; Swap changes the tokens for later requests.
func TestGuard(t *testing.T) {
	one, _ := Parse([]byte(`[{"name": "indexer", "tokenSha256": "` + hA + `", "resources": ["jobs/*"], "maxLeases": 3, "maxWaiters": 4}]`))
	var refused []string
	g := NewGuard(one, Options{Answered: func(op wire.Op, result string, e *wire.Error) { refused = append(refused, string(op)+" "+e.Code) }})
	var seen *Token
	h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = TokenOf(r.Context())
		if seen.Name != "indexer" {
			w.WriteHeader(204)
			return
		}
		m := msg(wire.OpAcquire, "jobs/1", "indexer-1")
		if e := g.Authorize(r, m); e != nil || m.Caller != (wire.Caller{Name: "indexer", MaxLeases: 3, MaxWaiters: 4}) {
			t.Errorf("Authorize: %v %+v", e, m.Caller)
		}
		if e := g.Authorize(r, msg(wire.OpAcquire, "other", "indexer-1")); e == nil || e.Code != wire.CodeForbidden {
			t.Errorf("out of scope: %v", e)
		}
		w.WriteHeader(204)
	}))
	do := func(headers ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/acquire", strings.NewReader("{}"))
		for _, v := range headers {
			req.Header.Add("Authorization", v)
		}
		rec := httptest.NewRecorder()
		seen = nil
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, hs := range [][]string{nil, {"Basic " + tokA}, {"Bearer"}, {"Bearer "}, {"Bearer " + tokB}, {"Bearer " + tokA, "Bearer " + tokA},
		{"Bearer " + strings.Repeat("x", MaxTokenBytes+1)}, {"Bearer" + tokA}} {
		rec := do(hs...)
		e := wire.ParseError(rec.Code, rec.Body.Bytes())
		if rec.Code != 401 || e == nil || e.Code != wire.CodeUnauthorized || seen != nil ||
			rec.Header().Get("WWW-Authenticate") != `Bearer realm="lease-fence"` {
			t.Errorf("%q: %d %s %v", hs, rec.Code, rec.Body, rec.Header())
		}
		if strings.Contains(rec.Body.String(), tokA) || strings.Contains(rec.Body.String(), tokB) {
			t.Errorf("the answer repeats the token: %s", rec.Body)
		}
	}
	if len(refused) != 8 || refused[0] != "acquire unauthorized" {
		t.Fatalf("Answered was told %v", refused)
	}
	for _, v := range []string{"Bearer " + tokA, "bearer " + tokA, "BEARER  " + tokA} {
		if rec := do(v); rec.Code != 204 || seen == nil || seen.Name != "indexer" {
			t.Fatalf("%q: %d %s", v, rec.Code, rec.Body)
		}
	}
	two, _ := Parse([]byte(`[{"name": "deployer", "tokenSha256": "` + hB + `", "resources": ["jobs/*"]}]`))
	g.Swap(two)
	if rec := do("Bearer " + tokA); rec.Code != 401 {
		t.Fatalf("a token removed by the swap: %d", rec.Code)
	}
	if rec := do("Bearer " + tokB); rec.Code != 204 || seen.Name != "deployer" {
		t.Fatalf("a token added by the swap: %d", rec.Code)
	}
	// A request that did not pass the middleware is not authorized.
	if e := g.Authorize(httptest.NewRequest("POST", "/v1/acquire", nil), msg(wire.OpAcquire, "jobs/1", "x")); e == nil || e.Status != 401 {
		t.Fatalf("without the middleware: %v", e)
	}
}

// TestGuardExpiry: a token is served until the instant of its "expires",
// and from that instant on refused with 401 saying so (the clock is the
// guard's Now); one without "expires" never expires.
func TestGuardExpiry(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := Parse([]byte(`[{"name": "indexer", "tokenSha256": "` + hA + `", "resources": ["*"], "expires": "2030-01-01T00:00:00Z"},
		{"name": "deployer", "tokenSha256": "` + hB + `", "resources": ["*"]}]`))
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(-time.Nanosecond)
	var refused []string
	g := NewGuard(s, Options{Now: func() time.Time { return now }, Answered: func(op wire.Op, _ string, e *wire.Error) { refused = append(refused, e.Code) }})
	h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	do := func(tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/acquire", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, step := range []struct {
		at       time.Time
		indexer  int
		deployer int
	}{
		{t0.Add(-time.Nanosecond), 204, 204},
		{t0, 401, 204},
		{t0.Add(100 * 365 * 24 * time.Hour), 401, 204},
	} {
		now = step.at
		a, b := do(tokA), do(tokB)
		if a.Code != step.indexer || b.Code != step.deployer {
			t.Fatalf("at %v: indexer %d %s, deployer %d", step.at, a.Code, a.Body, b.Code)
		}
		if a.Code == 401 {
			e := wire.ParseError(a.Code, a.Body.Bytes())
			if e == nil || e.Code != wire.CodeUnauthorized || !strings.Contains(e.Message, `"indexer" expired at 2030-01-01T00:00:00Z`) ||
				a.Header().Get("WWW-Authenticate") == "" || strings.Contains(a.Body.String(), tokA) {
				t.Fatalf("at %v: %s %v", step.at, a.Body, a.Header())
			}
		}
	}
	if len(refused) != 2 || refused[0] != wire.CodeUnauthorized {
		t.Fatalf("Answered was told %v", refused)
	}
	if tok, _ := s.Authenticate(tokA); !tok.Expired(t0) || tok.Expired(t0.Add(-time.Nanosecond)) {
		t.Fatalf("Expired around %v: %v", t0, tok.Expires)
	}
}

// TokenSHA256 is what sha256sum prints (FIPS 180-2's "abc"), and what
// Authenticate finds the token by.
func TestTokenSHA256(t *testing.T) {
	if got := TokenSHA256("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("TokenSHA256(abc) = %s", got)
	}
	s, err := Parse([]byte(`[{"name": "ops", "tokenSha256": "` + TokenSHA256(tokA) + `", "resources": ["*"]}]`))
	if tok, ok := s.Authenticate(tokA); err != nil || !ok || tok.Name != "ops" {
		t.Fatalf("the entry with TokenSHA256 does not authenticate its token: %+v %v", tok, err)
	}
}
