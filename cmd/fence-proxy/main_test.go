//go:build !js && !wasip1

package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/serverproc"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// server is run() in a goroutine of the test.
type server struct {
	url    string
	p      *serverproc.InProcess
	stderr *syncio.Buffer
}

// start runs the proxy with args (after -listen 127.0.0.1:0) until the
// test ends, and returns once it listens.
func start(t *testing.T, args ...string) *server {
	t.Helper()
	s, err := tryStart(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryStart is start, returning the error of a proxy that did not start.
func tryStart(t *testing.T, args ...string) (*server, error) {
	t.Helper()
	s := &server{stderr: &syncio.Buffer{}}
	p, err := serverproc.StartInProcess(func(ctx context.Context, stdout io.Writer) error {
		return run(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), stdout, s.stderr, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("fence-proxy did not start: %v; stderr:\n%s", err, s.stderr)
	}
	s.url, s.p = p.URL, p
	t.Cleanup(func() { s.shutdown(t) })
	return s, nil
}

func (s *server) shutdown(t *testing.T) {
	if err := s.p.Close(); err != nil {
		t.Errorf("fence-proxy ended with %v", err)
	}
}

// runErr runs the proxy with args, expecting it to refuse to start.
func runErr(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncio.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), &out, &errOut, nil) }()
	select {
	case err := <-done:
		if strings.Contains(out.String(), "listening") {
			t.Fatalf("run %v listened before failing", args)
		}
		return err
	case <-time.After(20 * time.Second):
		cancel()
		<-done
		t.Fatalf("run %v started (stdout %q), want a refusal", args, out.String())
		return nil
	}
}

func okUpstream(t *testing.T) *httptest.Server {
	u := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(u.Close)
	return u
}

func post(t *testing.T, url, fenceHeader string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader("x"))
	if fenceHeader != "" {
		req.Header.Set("Lease-Fence", fenceHeader)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestStateMustExistUnlessInit(t *testing.T) {
	up := okUpstream(t)
	path := filepath.Join(t.TempDir(), "proxy.db")
	err := runErr(t, "-upstream", up.URL, "-state", path)
	if err == nil || !strings.Contains(err.Error(), "does not exist: create it once with -init") {
		t.Fatalf("missing state: %v", err)
	}
	if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("refusing created the file: %v", serr)
	}
	s := start(t, "-upstream", up.URL, "-state", path, "-init")
	if resp := post(t, s.url+"/w", `resource="r", holder="a", fence=7`); resp.StatusCode != 200 {
		t.Fatalf("write: %d", resp.StatusCode)
	}
	s.shutdown(t)
	err = runErr(t, "-upstream", up.URL, "-state", path, "-init")
	if err == nil || !strings.Contains(err.Error(), "already exists: drop -init") {
		t.Fatalf("-init over an existing state: %v", err)
	}
	// The floor survived the restart.
	s = start(t, "-upstream", up.URL, "-state", path)
	if resp := post(t, s.url+"/w", `resource="r", holder="b", fence=6`); resp.StatusCode != http.StatusConflict {
		t.Fatalf("stale write after restart: %d", resp.StatusCode)
	}
}

func TestForeignOrDamagedStateIsRefused(t *testing.T) {
	up := okUpstream(t)
	dir := t.TempDir()
	// A good state file to damage copies of.
	good := filepath.Join(dir, "good.db")
	s := start(t, "-upstream", up.URL, "-state", good, "-init")
	for i := range 50 {
		post(t, s.url+"/w", `resource="r`+string(rune('a'+i%26))+`", holder="a", fence=7`)
	}
	s.shutdown(t)
	goodBytes, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(good + "-wal"); err == nil {
		if fi, _ := os.Stat(good + "-wal"); fi.Size() > 0 {
			t.Fatalf("the WAL was not checkpointed at close (%d bytes)", fi.Size())
		}
	}
	sqliteFile := func(name string, setup ...string) string {
		p := filepath.Join(dir, name)
		db, err := sql.Open("sqlite", "file:"+p)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range setup {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	damaged := bytes.Clone(goodBytes)
	for i := 4096; i < 2*4096; i++ {
		damaged[i] = 0xA5 // page 2, the floor table's root, overwritten
	}
	badHeader := bytes.Clone(goodBytes)
	copy(badHeader[16:], []byte{0xff, 0xff, 0xff}) // page size field
	cases := []struct {
		path, says string
	}{
		{write("empty.db", nil), "is empty"},
		{write("text.db", []byte("floors: r=7\n")), "not an SQLite database"},
		{write("short.db", []byte("SQLite")), "not an SQLite database"},
		{write("truncated.db", goodBytes[:len(goodBytes)/2]), "damaged"},
		{write("damaged.db", damaged), "damaged"},
		{write("badheader.db", badHeader), "damaged"},
		{sqliteFile("foreign.db", `CREATE TABLE notes (x TEXT)`), "not a fence-proxy state file (application_id 0"},
		{sqliteFile("other-app.db", `PRAGMA application_id = 1234`), "application_id 0x4d2"},
		{sqliteFile("future.db", `PRAGMA application_id = 1279676504`, `PRAGMA user_version = 2`), "format version 2"},
		{sqliteFile("no-tables.db", `PRAGMA application_id = 1279676504`, `PRAGMA user_version = 1`), "table lease_fence_floor is missing"},
	}
	for _, c := range cases {
		before, _ := os.ReadFile(c.path)
		err := runErr(t, "-upstream", up.URL, "-state", c.path)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "refusing to start") {
			t.Errorf("%s: %v, want a refusal that says %q", filepath.Base(c.path), err, c.says)
		}
		after, _ := os.ReadFile(c.path)
		if !bytes.Equal(before, after) {
			t.Errorf("%s: refusing changed the file", filepath.Base(c.path))
		}
	}
	// A directory is not a state file either.
	if err := runErr(t, "-upstream", up.URL, "-state", dir); err == nil {
		t.Error("a directory was taken as the state file")
	}
}

func TestOneProxyPerStateFile(t *testing.T) {
	up := okUpstream(t)
	path := filepath.Join(t.TempDir(), "proxy.db")
	s := start(t, "-upstream", up.URL, "-state", path, "-init")
	err := runErr(t, "-upstream", up.URL, "-state", path)
	if err == nil || !strings.Contains(err.Error(), "in use by another fence-proxy") {
		t.Fatalf("second proxy: %v", err)
	}
	// The refused second proxy did not disturb the first's locks.
	if resp := post(t, s.url+"/w", `resource="r", holder="a", fence=7`); resp.StatusCode != 200 {
		t.Fatalf("write after the refused start: %d", resp.StatusCode)
	}
	s.shutdown(t)
	start(t, "-upstream", up.URL, "-state", path)
}

func TestFlagsAreChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.db")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-state", path, "-init"}, "-upstream is required"},
		{[]string{"-upstream", "127.0.0.1:9000", "-state", path, "-init"}, "-upstream"},
		{[]string{"-upstream", "localhost:9000", "-state", path, "-init"}, "must be an http:// or https:// URL"},
		{[]string{"-upstream", "ftp://x", "-state", path, "-init"}, "must be an http:// or https:// URL"},
		{[]string{"-upstream", "http://x", "-max-queue", "0", "-state", path, "-init"}, "-max-queue must be positive"},
		{[]string{"-upstream", "http://x", "-max-body-bytes", "-1", "-state", path, "-init"}, "-max-body-bytes must be positive"},
		{[]string{"-upstream", "http://x", "-upstream-timeout", "0s", "-state", path, "-init"}, "timeouts must be positive"},
		{[]string{"-upstream", "http://x", "-state", path, "-init", "extra"}, "unexpected arguments"},
		{[]string{"-upstream", "http://x", "-state", path, "-init", "-debug-addr", "0.0.0.0:0"}, "must be a loopback address"},
		{[]string{"-upstream", "http://x", "-state", path, "-init", "-debug-addr", "nonsense"}, "-debug-addr"},
	} {
		err := runErr(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want %q", c.args, err, c.says)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused start left a state file")
	}
}

func TestHugeHeaderIs431(t *testing.T) {
	up := okUpstream(t)
	s := start(t, "-upstream", up.URL, "-state", filepath.Join(t.TempDir(), "p.db"), "-init", "-max-header-bytes", "4096")
	resp := post(t, s.url+"/w", `resource="r", holder="a", fence=7, pad="`+strings.Repeat("x", 20000)+`"`)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431", resp.StatusCode)
	}
}

// SIGTERM (here: run's context ending) lets a write in progress finish.
func TestGracefulShutdown(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.WriteHeader(http.StatusCreated)
	}))
	defer up.Close()
	s := start(t, "-upstream", up.URL, "-state", filepath.Join(t.TempDir(), "p.db"), "-init", "-quiet")
	got := make(chan int)
	go func() {
		req, _ := http.NewRequest("POST", s.url+"/w", strings.NewReader("x"))
		req.Header.Set("Lease-Fence", `resource="r", holder="a", fence=7`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-arrived
	s.p.Cancel()
	close(release)
	if code := <-got; code != http.StatusCreated {
		t.Fatalf("the write in progress at shutdown: %d", code)
	}
	if err := s.p.Close(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// -debug-addr serves the runtime's profiles on a loopback address of its
// own, not on the proxy's.
func TestDebugAddrServesProfiles(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	// -debug-addr takes a fixed address: a free port is picked, and picked
	// again if another process took it before the proxy could bind it.
	var addr string
	var s *server
	for attempt := 1; s == nil; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
		s, err = tryStart(t, "-upstream", up.URL, "-state", filepath.Join(t.TempDir(), "proxy.db"), "-init", "-debug-addr", addr)
		if err != nil && (attempt == 5 || !strings.Contains(err.Error(), "address already in use")) {
			t.Fatal(err)
		}
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("GET /debug/pprof/goroutine: %s %.200s", resp.Status, body)
	}
	// On the proxy's own address that path is a read like any other,
	// forwarded to the upstream, whose empty answer comes back.
	resp, err = http.Get(s.url + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 0 {
		t.Fatalf("GET on the proxy's address: %s %.200s", resp.Status, body)
	}
}
