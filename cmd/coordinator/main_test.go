//go:build !js && !wasip1

package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/serverproc"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// server is one run of the coordinator on a free loopback port.
type server struct {
	url string
	p   *serverproc.InProcess
}

// run is serve without reloads.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return serve(ctx, args, stdout, stderr, nil)
}

func start(t *testing.T, args ...string) *server {
	t.Helper()
	return startLogged(t, io.Discard, args...)
}

func startLogged(t *testing.T, stderr io.Writer, args ...string) *server {
	t.Helper()
	return startServe(t, stderr, nil, append([]string{"-quiet"}, args...)...)
}

// startServe runs serve in this process on a free loopback port (args
// after -addr 127.0.0.1:0), its SIGHUP being a send on hup (may be nil),
// and waits for its listening line; it is stopped when the test ends.
func startServe(t *testing.T, stderr io.Writer, hup <-chan struct{}, args ...string) *server {
	t.Helper()
	p, err := serverproc.StartInProcess(func(ctx context.Context, stdout io.Writer) error {
		return serve(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), stdout, stderr, hup)
	})
	if err != nil {
		t.Fatalf("coordinator: %v", err)
	}
	s := &server{url: p.URL, p: p}
	t.Cleanup(func() { s.close(t) })
	return s
}

func (s *server) close(t *testing.T) {
	if err := s.p.Close(); err != nil {
		t.Errorf("coordinator: %v", err)
	}
}

// holder is a client.Client for id, without a token.
func holder(t *testing.T, url, id string) *client.Client {
	t.Helper()
	return tokenClient(t, url, id, "")
}

// TestRestartResumesAboveTheLastFence runs the server with -state, stops it,
// starts it again over the same directory, and checks that fences go on
// climbing (from above the stored fence mark, which the first grant raised
// to fenceReserve) and the live holder is remembered.
func TestRestartResumesAboveTheLastFence(t *testing.T) {
	state := filepath.Join(t.TempDir(), "coordinator-state")
	ctx := context.Background()
	s1 := start(t, "-init", "-state", state, "-ttl", "1h")
	a := holder(t, s1.url, "agent-a")
	var l *client.Lease
	for i := 0; i < 5; i++ {
		var err error
		if l, err = a.Acquire(ctx, "deploy"); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			if err := a.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l.Token().Fence != 5 {
		t.Fatalf("fence %d", l.Token().Fence)
	}
	s1.close(t)

	// Same port, so agent-a's client reaches the new server unchanged.
	s2 := start(t, "-state", state, "-ttl", "1h", "-addr", strings.TrimPrefix(s1.url, "http://"))
	if s2.url != s1.url {
		t.Fatalf("restarted at %s, not %s", s2.url, s1.url)
	}
	b := holder(t, s2.url, "agent-b")
	var denied *client.DeniedError
	if _, err := b.Acquire(ctx, "deploy"); !errors.As(err, &denied) || denied.HeldBy != "agent-a" {
		t.Fatalf("after restart: %v", err)
	}
	// The original holder's lease (and secret) still work on the new server.
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("holder release after restart: %v", err)
	}
	l2, err := b.Acquire(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token().Fence != fenceReserve+1 {
		t.Fatalf("restarted server issued fence %d, want %d", l2.Token().Fence, fenceReserve+1)
	}
}

// TestMemoryServerForgets: with -memory a restart starts over, which is
// why the durable store is the default.
func TestMemoryServerForgets(t *testing.T) {
	ctx := context.Background()
	s1 := start(t, "-memory")
	if l, err := holder(t, s1.url, "a").Acquire(ctx, "r"); err != nil || l.Token().Fence != 1 {
		t.Fatal(l, err)
	}
	s1.close(t)
	s2 := start(t, "-memory")
	if l, err := holder(t, s2.url, "b").Acquire(ctx, "r"); err != nil || l.Token().Fence != 1 {
		t.Fatal(l, err)
	}
}

// TestServerRefusesBadRequests goes through the real HTTP stack.
func TestServerRefusesBadRequests(t *testing.T) {
	s := start(t, "-memory", "-max-id-bytes", "16")
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/v1/acquire", "", 405, wire.CodeMethodNotAllowed},
		{"POST", "/nope", "{}", 404, wire.CodeNotFound},
		{"POST", "/v1/acquire", "{", 400, wire.CodeMalformedJSON},
		{"POST", "/v1/acquire", `{"resource":1}`, 400, wire.CodeWrongType},
		{"POST", "/v1/release", strings.Repeat(" ", wire.MaxBodyBytes+1), 413, wire.CodeBodyTooLarge},
		{"POST", "/v1/acquire", `{"requestId":"r1","resource":"` + strings.Repeat("x", 17) + `","holderId":"h","sentAt":{"millis":1,"domain":"h"},"kind":"acquire","secret":"0123456789abcdef"}`, 400, wire.CodeInvalidValue},
	} {
		req, _ := http.NewRequest(tc.method, s.url+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := wire.ParseError(resp.StatusCode, body)
		if resp.StatusCode != tc.status || e == nil || e.Code != tc.code {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, body)
		}
	}
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-memory", "-ttl", "0s"}, {"-memory", "-ttl", "banana"}, {"-memory", "extra"}, {"-memory", "-addr", "256.0.0.1:0"},
		{"-memory", "-init"}, {"-memory", "-state", filepath.Join(dir, "x")}, {"-memory", "-min-fence", "5"},
		{"-init", "-state", filepath.Join(dir, "y"), "-min-fence", "9007199254740992"}, {"-init", "-state", filepath.Join(dir, "z"), "-min-fence", "-1"},
		{"-memory", "-max-leases", "0"}, {"-memory", "-max-conns", "-1"}, {"-memory", "-max-id-bytes", "1025"},
		{"-memory", "-idle-timeout", "0s"}, {"-memory", "-debug-addr", "0.0.0.0:0"}, {"-memory", "-debug-addr", "nonsense"},
	} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Fatalf("%v accepted", args)
		}
	}
}

// TestStartFailsClosed: a missing state database is refused unless -init
// is given, -init refuses an existing path, and a file that is not a state
// database is refused with a clear message; none of them serves.
func TestStartFailsClosed(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo")
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-state", missing}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "-init") {
		t.Fatalf("missing state: %v", err)
	}
	if _, statErr := os.Stat(missing); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatal("a refused start created the state file")
	}
	// The default path is the durable store too (in the working directory).
	t.Chdir(dir)
	if err := run(context.Background(), []string{"-addr", "127.0.0.1:0"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), defaultStatePath) {
		t.Fatalf("default path without -init: %v", err)
	}
	s := start(t, "-init", "-state", filepath.Join(dir, "ok"))
	s.close(t)
	err = run(context.Background(), []string{"-addr", "127.0.0.1:0", "-init", "-state", filepath.Join(dir, "ok")}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("-init over an existing state: %v", err)
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database\n", 2000)), 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"-addr", "127.0.0.1:0", "-state", junk}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "cannot be opened") {
		t.Fatalf("junk state: %v", err)
	}
	// A directory that is not a state, and one that holds another
	// program's Pebble database, are refused.
	if err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-state", t.TempDir()}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "holds no Pebble database") {
		t.Fatalf("an empty directory: %v", err)
	}
	// -memory says it keeps nothing.
	var errs syncio.Buffer
	m := startLogged(t, &errs, "-memory")
	m.close(t)
	if !strings.Contains(errs.String(), "NOT durable") {
		t.Fatalf("-memory did not say so: %s", errs.String())
	}
}

// TestGCPercent: the coordinator collects garbage less often than Go's
// default unless GOGC chose otherwise.
func TestGCPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	setGCPercent("")
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Fatalf("without GOGC the target is %d, want %d", got, defaultGCPercent)
	}
	setGCPercent("50") // the runtime applied GOGC=50 itself; leave it
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set the target changed to %d", got)
	}
}

// TestDebugMemory: -debug-addr serves the memory figures the memory
// benchmark reads.
func TestDebugMemory(t *testing.T) {
	var errs syncio.Buffer
	s := startLogged(t, &errs, "-memory", "-debug-addr", "127.0.0.1:0")
	if _, err := holder(t, s.url, "a").Acquire(context.Background(), "r"); err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(errs.String(), "debug on ")
	if !ok {
		t.Fatalf("no debug line in %q", errs.String())
	}
	resp, err := http.Get(strings.Fields(rest)[0])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m memory
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.LiveHeapBytes == 0 || m.Records != 1 || m.RSSBytes <= 0 {
		t.Fatalf("%+v %v", m, err)
	}
}
