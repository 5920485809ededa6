package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/test/rig/roundtrip"
	"github.com/lease-fence/lease-fence/test/rig/serverproc"
)

// fixture lays out a page folder, a module folder and a secret file beside
// them that must never be served.
func fixture(t *testing.T) (web, module, secret string) {
	t.Helper()
	base := t.TempDir()
	web = filepath.Join(base, "web")
	module = filepath.Join(base, "mod")
	secret = filepath.Join(base, "secret.txt")
	for _, d := range []string{web, module, filepath.Join(web, "sub"), filepath.Join(web, "empty")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(web, "index.html"):            "<!doctype html><title>page</title>",
		filepath.Join(web, "app.js"):                "export const app = 1;",
		filepath.Join(web, "style.css"):             "body{}",
		filepath.Join(web, ".hidden"):               "hidden",
		filepath.Join(web, "sub", "index.html"):     "sub index",
		filepath.Join(web, "blob.bin"):              "\x00\x01",
		filepath.Join(module, "lease-fence.mjs"):    "export {};",
		filepath.Join(module, "lease-fence.wasm"):   "\x00asm\x01\x00\x00\x00" + strings.Repeat("w", 4096),
		filepath.Join(module, "lease-fence.d.ts"):   "export {};",
		filepath.Join(module, "wasm_exec.js"):       "// go",
		secret:                                      "TOP-SECRET",
		filepath.Join(filepath.Dir(web), "web.txt"): "TOP-SECRET sibling",
	}
	for name, body := range files {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A symbolic link inside the page folder that points out of it.
	if err := os.Symlink(secret, filepath.Join(web, "link.txt")); err != nil {
		t.Fatal(err)
	}
	return web, module, secret
}

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	web, module, _ := fixture(t)
	h, err := NewHandler(web, module)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// get sends a raw request path (not re-encoded by net/url) and returns the
// response and its body.
func get(t *testing.T, srv *httptest.Server, method, rawPath string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = rawPath
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, body := roundtrip.Read(t, tr.RoundTrip, req)
	return resp, string(body)
}

func TestServesFilesWithTypes(t *testing.T) {
	srv := newServer(t)
	cases := []struct {
		path, ctype, body string
	}{
		{"/", "text/html; charset=utf-8", "<!doctype html><title>page</title>"},
		{"/index.html", "text/html; charset=utf-8", "<!doctype html><title>page</title>"},
		{"/app.js", "text/javascript; charset=utf-8", "export const app = 1;"},
		{"/style.css", "text/css; charset=utf-8", "body{}"},
		{"/sub/", "text/html; charset=utf-8", "sub index"},
		{"/sub", "text/html; charset=utf-8", "sub index"},
		{"/blob.bin", "application/octet-stream", "\x00\x01"},
		{"/lease-fence/lease-fence.mjs", "text/javascript; charset=utf-8", "export {};"},
		{"/lease-fence/wasm_exec.js", "text/javascript; charset=utf-8", "// go"},
		{"/lease-fence/lease-fence.d.ts", "text/plain; charset=utf-8", "export {};"},
	}
	for _, c := range cases {
		resp, body := get(t, srv, "GET", c.path, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", c.path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.ctype)
		}
		if body != c.body {
			t.Errorf("GET %s: body %q, want %q", c.path, body, c.body)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q", c.path, got)
		}
	}
}

func TestWasmIsApplicationWasm(t *testing.T) {
	srv := newServer(t)
	for _, enc := range []string{"", "gzip"} {
		resp, body := get(t, srv, "GET", "/lease-fence/lease-fence.wasm", map[string]string{"Accept-Encoding": enc})
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if got := resp.Header.Get("Content-Type"); got != "application/wasm" {
			t.Errorf("Accept-Encoding %q: Content-Type %q, want application/wasm", enc, got)
		}
		if enc == "gzip" {
			if resp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("Content-Encoding %q, want gzip", resp.Header.Get("Content-Encoding"))
			}
			zr, err := gzip.NewReader(strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			body = string(raw)
		} else if resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("identity request got Content-Encoding %q", resp.Header.Get("Content-Encoding"))
		}
		if !strings.HasPrefix(body, "\x00asm") || len(body) != 8+4096 {
			t.Errorf("Accept-Encoding %q: body of %d bytes, not the wasm file", enc, len(body))
		}
	}
}

func TestGzipCompressesAndVaries(t *testing.T) {
	srv := newServer(t)
	resp, body := get(t, srv, "GET", "/lease-fence/lease-fence.wasm", map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	if len(body) >= 4096 {
		t.Errorf("gzip body %d bytes, not smaller than the 4104-byte file", len(body))
	}
	if resp.Header.Get("Vary") != "Accept-Encoding" {
		t.Errorf("Vary %q", resp.Header.Get("Vary"))
	}
	resp, _ = get(t, srv, "GET", "/lease-fence/lease-fence.wasm", map[string]string{"Accept-Encoding": "gzip;q=0"})
	if resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 still got Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
}

func TestCacheAndSecurityHeaders(t *testing.T) {
	srv := newServer(t)
	resp, _ := get(t, srv, "GET", "/app.js", nil)
	if got := resp.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("Cache-Control %q, want no-cache", got)
	}
	et := resp.Header.Get("ETag")
	if et == "" || resp.Header.Get("Last-Modified") == "" {
		t.Fatalf("ETag %q, Last-Modified %q: want both", et, resp.Header.Get("Last-Modified"))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self' 'wasm-unsafe-eval'", "connect-src 'self'", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	resp, body := get(t, srv, "GET", "/app.js", map[string]string{"If-None-Match": et})
	if resp.StatusCode != http.StatusNotModified || body != "" {
		t.Errorf("revalidation with the ETag: status %d body %q, want 304 and no body", resp.StatusCode, body)
	}
}

func TestNoDirectoryListing(t *testing.T) {
	srv := newServer(t)
	for _, p := range []string{"/lease-fence/", "/lease-fence", "/empty/", "/empty"} {
		resp, body := get(t, srv, "GET", p, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, resp.StatusCode)
		}
		for _, leak := range []string{"lease-fence.mjs", "wasm_exec", "<pre>", "href"} {
			if strings.Contains(body, leak) {
				t.Errorf("GET %s: body lists the folder (%q): %q", p, leak, body)
			}
		}
	}
}

func TestNothingOutsideTheFolders(t *testing.T) {
	srv := newServer(t)
	paths := []string{
		"/../secret.txt",
		"/..%2fsecret.txt",
		"/%2e%2e/secret.txt",
		"/%2e%2e%2fsecret.txt",
		"/%2E%2E%2Fsecret.txt",
		"/sub/../../secret.txt",
		"/sub/%2e%2e/%2e%2e/secret.txt",
		"/lease-fence/../secret.txt",
		"/lease-fence/..%2f..%2fsecret.txt",
		"/lease-fence/%2e%2e/%2e%2e/secret.txt",
		"/..\\secret.txt",
		"/..%5csecret.txt",
		"/%252e%252e/secret.txt",
		"/.%2e/secret.txt",
		"//secret.txt",
		"/sub//../../secret.txt",
		"/link.txt",
		"/.hidden",
		"/%2ehidden",
		"/lease-fence/../web.txt",
		"/app.js%00.html",
		"/./app.js",
	}
	for _, p := range paths {
		resp, body := get(t, srv, "GET", p, nil)
		if strings.Contains(body, "TOP-SECRET") || strings.Contains(body, "hidden") && p != "/%2ehidden" {
			t.Errorf("GET %s leaked: %q", p, body)
		}
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET %s: status 200 (%q), want a refusal", p, body)
		}
	}
}

func TestRawRequestLineTraversal(t *testing.T) {
	// Go's client cleans nothing in Opaque, but send the request line by hand
	// as well, the way a hostile client would.
	srv := newServer(t)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, target := range []string{"/../secret.txt", "/lease-fence/../../secret.txt", "/%2e%2e/%2e%2e/secret.txt"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode == 200 || bytes.Contains(body, []byte("TOP-SECRET")) {
			t.Errorf("raw %s: status %d body %q", target, resp.StatusCode, body)
		}
	}
}

func TestMethods(t *testing.T) {
	srv := newServer(t)
	for _, m := range []string{"POST", "PUT", "DELETE", "OPTIONS"} {
		resp, _ := get(t, srv, m, "/index.html", nil)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", m, resp.StatusCode)
		}
		if resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: Allow %q", m, resp.Header.Get("Allow"))
		}
	}
	resp, body := get(t, srv, "HEAD", "/app.js", nil)
	if resp.StatusCode != 200 || body != "" || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Errorf("HEAD: status %d, body %q, type %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
}

func TestNewHandlerMissingFolder(t *testing.T) {
	web, _, _ := fixture(t)
	_, err := NewHandler(web, filepath.Join(t.TempDir(), "nope"))
	if err == nil || !strings.Contains(err.Error(), "build-wasm") {
		t.Errorf("missing module folder: err %v, want one that names make build-wasm", err)
	}
}

func TestRunPrintsURLAndServes(t *testing.T) {
	web, module, _ := fixture(t)
	p, err := serverproc.StartInProcess(func(ctx context.Context, stdout io.Writer) error {
		return run(ctx, []string{"-port", "0", "-quiet", "-web", web, "-module", module}, stdout)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := p.URL
	if !strings.HasPrefix(url, "http://127.0.0.1:") || strings.HasSuffix(url, ":0/") {
		t.Fatalf("first line %q, want http://127.0.0.1:<port>/", url)
	}
	resp, err := http.Get(url + "lease-fence/lease-fence.wasm")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/wasm" {
		t.Errorf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if err := p.Close(); err != nil {
		t.Errorf("run after cancel: %v", err)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-port", "70000"}, {"-port", "-1"}, {"extra"}, {"-nope"}} {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "-quiet"), &out)
		if err == nil {
			t.Errorf("run %v: no error", args)
		}
		if out.Len() != 0 {
			t.Errorf("run %v printed %q before failing", args, out.String())
		}
	}
}

func TestWarmAndConcurrentGzip(t *testing.T) {
	web, module, _ := fixture(t)
	h, err := NewHandler(web, module)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.Warm()
	h.mu.Lock()
	_, wasm := h.gzip[h.module.Name()+"\x00lease-fence.wasm"]
	_, hidden := h.gzip[h.web.Name()+"\x00.hidden"]
	h.mu.Unlock()
	if !wasm {
		t.Error("Warm did not compress lease-fence.wasm")
	}
	if hidden {
		t.Error("Warm compressed a hidden file")
	}

	srv := httptest.NewServer(h)
	defer srv.Close()
	type result struct {
		body string
		err  error
	}
	results := make(chan result, 8)
	for i := 0; i < 8; i++ {
		go func() {
			req, _ := http.NewRequest("GET", srv.URL+"/app.js", nil)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				results <- result{err: err}
				return
			}
			b, err := io.ReadAll(zr)
			results <- result{string(b), err}
		}()
	}
	for i := 0; i < 8; i++ {
		r := <-results
		if r.err != nil || r.body != "export const app = 1;" {
			t.Errorf("concurrent gzip request: %q, %v", r.body, r.err)
		}
	}
}
