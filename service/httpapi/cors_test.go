package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCORS: preflights and calls from an allowed origin get the CORS
// headers, on the paths of a holder's calls only; other origins and other
// paths get none, and a preflight from another origin reaches the handler
// (405).
func TestCORS(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			w.WriteHeader(405)
			return
		}
		w.WriteHeader(200)
	})
	h := CORS([]string{"https://app.example", "http://127.0.0.1:5173"}, next)
	do := func(method, path, origin string, preflight bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader("{}"))
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if preflight {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, path := range []string{"/v1/acquire", "/v1/renew", "/v1/release", "/v1/inspect", "/v1/renewals"} {
		rec := do("OPTIONS", path, "https://app.example", true)
		hd := rec.Header()
		if rec.Code != 204 || hd.Get("Access-Control-Allow-Origin") != "https://app.example" || hd.Get("Access-Control-Allow-Methods") != "POST" ||
			!strings.Contains(hd.Get("Access-Control-Allow-Headers"), "Authorization") || hd.Get("Access-Control-Allow-Credentials") != "" ||
			!strings.Contains(strings.Join(hd.Values("Vary"), ","), "Origin") {
			t.Errorf("preflight %s: %d %v", path, rec.Code, hd)
		}
		rec = do("POST", path, "http://127.0.0.1:5173", false)
		if rec.Code != 200 || rec.Header().Get("Access-Control-Allow-Origin") != "http://127.0.0.1:5173" {
			t.Errorf("call %s: %d %v", path, rec.Code, rec.Header())
		}
	}
	for _, tc := range []struct {
		method, path, origin string
		preflight            bool
		status               int
	}{
		{"OPTIONS", "/v1/acquire", "https://evil.example", true, 405},
		{"POST", "/v1/acquire", "https://evil.example", false, 200},
		{"POST", "/v1/acquire", "", false, 200},
		{"OPTIONS", "/metrics", "https://app.example", true, 405},
		{"OPTIONS", "/v1/other", "https://app.example", true, 405},
		{"OPTIONS", "/v1/acquire", "https://app.example", false, 405}, // not a preflight
		{"POST", "/healthz", "https://app.example", false, 200},
	} {
		rec := do(tc.method, tc.path, tc.origin, tc.preflight)
		if rec.Code != tc.status || rec.Header().Get("Access-Control-Allow-Origin") != "" && tc.origin != "https://app.example" {
			t.Errorf("%+v: %d %v", tc, rec.Code, rec.Header())
		}
		if tc.origin == "https://evil.example" && rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%+v: CORS headers for another origin", tc)
		}
	}
	// An operator's order, and the calls a page is not offered (docs/js.md,
	// "From a page on another origin"), from a listed origin: the
	// preflight reaches the handler, and no answer carries CORS headers.
	for _, path := range []string{"/v1/revoke", "/v1/proclaim", "/v1/list", "/v1/watch", "/v1/session"} {
		if rec := do("OPTIONS", path, "https://app.example", true); rec.Code != 405 || rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight %s: %d %v", path, rec.Code, rec.Header())
		}
		if rec := do("POST", path, "https://app.example", false); rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("call %s: CORS headers %v", path, rec.Header())
		}
	}
	if rec := do("POST", "/healthz", "https://app.example", false); rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS headers off the API: %v", rec.Header())
	}
	any := CORS([]string{"*"}, next)
	req := httptest.NewRequest("OPTIONS", "/v1/acquire", nil)
	req.Header.Set("Origin", "https://whoever.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	rec := httptest.NewRecorder()
	any.ServeHTTP(rec, req)
	if rec.Code != 204 || rec.Header().Get("Access-Control-Allow-Origin") != "https://whoever.example" {
		t.Errorf("*: %d %v", rec.Code, rec.Header())
	}
}

func TestCheckOrigins(t *testing.T) {
	if err := CheckOrigins([]string{"*", "https://app.example", "http://127.0.0.1:8080", "https://[::1]:9"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"app.example", "https://app.example/", "https://app.example/x", "ftp://x", "https://u@x", "https://x?q", "", "https://x#f"} {
		if err := CheckOrigins([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
