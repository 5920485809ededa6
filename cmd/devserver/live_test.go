package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	coordOnce sync.Once
	coordBin  string
	coordErr  error
)

// coordinatorBin is $LEASE_FENCE_COORDINATOR_BIN (make test-devserver's
// out/bin/coordinator) if set, or cmd/coordinator built once for these
// tests.
func coordinatorBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("LEASE_FENCE_COORDINATOR_BIN"); bin != "" {
		return bin
	}
	coordOnce.Do(func() {
		dir, err := os.MkdirTemp("", "devserver-live-test-")
		if err != nil {
			coordErr = err
			return
		}
		coordBin = filepath.Join(dir, "coordinator")
		// The go that runs the tests (go test puts it first on PATH).
		out, err := exec.Command("go", "build", "-o", coordBin, "../coordinator").CombinedOutput()
		if err != nil {
			coordErr = err
			coordBin = string(out)
		}
	})
	if coordErr != nil {
		t.Fatalf("building cmd/coordinator: %v\n%s", coordErr, coordBin)
	}
	return coordBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if coordBin != "" && coordErr == nil {
		os.RemoveAll(filepath.Dir(coordBin))
	}
	os.Exit(code)
}

// liveServer serves a Live over httptest and closes both at the end.
func liveServer(t *testing.T, opts LiveOptions) (*Live, *httptest.Server) {
	t.Helper()
	l := NewLive(opts)
	srv := httptest.NewServer(l)
	t.Cleanup(func() {
		srv.Close()
		l.Close()
	})
	return l, srv
}

type liveStatus struct {
	Native struct{ State, Reason string }
	Worker struct {
		State, Reason string
		TTLMillis     int64
	}
}

// waitStatus polls /live/status until the native backend is no longer being checked.
func waitStatus(t *testing.T, srv *httptest.Server) liveStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(srv.URL + "/live/status")
		if err != nil {
			t.Fatal(err)
		}
		var st liveStatus
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Native.State != "checking" && st.Worker.State != "starting" {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status still pending: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// post sends body as JSON, as the page does, and returns the status and answer.
func post(t *testing.T, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

func acquireBody(id, holder string) string {
	return `{"requestId":"` + id + `","resource":"report.md","holderId":"` + holder + `","sentAt":{"millis":1,"domain":"` + holder + `"},"kind":"acquire","secret":"` + strings.Repeat("s", 43) + `"}`
}

var fenceRe = regexp.MustCompile(`"fence":(\d+)`)

func fenceOf(t *testing.T, answer string) string {
	t.Helper()
	m := fenceRe.FindStringSubmatch(answer)
	if m == nil {
		t.Fatalf("no fence in %s", answer)
	}
	return m[1]
}

func TestLiveStatusWithNothingConfigured(t *testing.T) {
	_, srv := liveServer(t, LiveOptions{})
	st := waitStatus(t, srv)
	if st.Native.State != "off" || !strings.Contains(st.Native.Reason, "-coordinator") {
		t.Errorf("native: %+v", st.Native)
	}
	if st.Worker.State != "off" || st.Worker.TTLMillis != 4000 {
		t.Errorf("worker: %+v", st.Worker)
	}
	code, body := post(t, srv.URL+"/live/native/start", `{"ttlMillis":1000}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"live_503"`) {
		t.Errorf("start without a coordinator: %d %s", code, body)
	}
	code, _ = post(t, srv.URL+"/live/worker/v1/acquire", acquireBody("r1", "a"))
	if code != http.StatusServiceUnavailable {
		t.Errorf("worker without one: %d", code)
	}
}

func TestLiveNativeCoordinatorRunsRestartsAndStops(t *testing.T) {
	_, srv := liveServer(t, LiveOptions{Coordinator: coordinatorBin(t)})
	if st := waitStatus(t, srv); st.Native.State != "ready" {
		t.Fatalf("native: %+v", st.Native)
	}
	code, body := post(t, srv.URL+"/live/native/start", `{"ttlMillis":60000}`)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	var started struct{ ID string }
	if err := json.Unmarshal([]byte(body), &started); err != nil || len(started.ID) != 16 {
		t.Fatalf("start answered %s", body)
	}
	base := srv.URL + "/live/native/" + started.ID
	code, body = post(t, base+"/v1/acquire", acquireBody("r1", "agent-a"))
	if code != http.StatusOK || fenceOf(t, body) != "1" || !strings.Contains(body, `"ttlMillis":60000`) {
		t.Fatalf("acquire: %d %s", code, body)
	}
	// The coordinator's own answers come through: B is denied while A holds it.
	code, body = post(t, base+"/v1/acquire", acquireBody("r2", "agent-b"))
	if code != http.StatusOK || !strings.Contains(body, `"heldBy":"agent-a"`) {
		t.Fatalf("second acquire: %d %s", code, body)
	}
	// A restart forgets (-memory): B gets the lease, with fence 1 again.
	code, body = post(t, base+"/restart", `{}`)
	if code != http.StatusOK {
		t.Fatalf("restart: %d %s", code, body)
	}
	code, body = post(t, base+"/v1/acquire", acquireBody("r3", "agent-b"))
	if code != http.StatusOK || fenceOf(t, body) != "1" || !strings.Contains(body, `"holderId":"agent-b"`) {
		t.Fatalf("acquire after the restart: %d %s", code, body)
	}
	code, _ = post(t, base+"/stop", `{}`)
	if code != http.StatusOK {
		t.Fatalf("stop: %d", code)
	}
	code, body = post(t, base+"/v1/acquire", acquireBody("r4", "agent-c"))
	if code != http.StatusNotFound {
		t.Fatalf("after stop: %d %s", code, body)
	}
}

func TestLiveRefusesWhatAnotherPageCouldSend(t *testing.T) {
	_, srv := liveServer(t, LiveOptions{Coordinator: coordinatorBin(t)})
	waitStatus(t, srv)
	host := srv.Listener.Addr().String()
	cases := []struct {
		name   string
		path   string
		body   string
		header []string
		want   int
	}{
		{"text/plain (no preflight)", "/live/native/start", `{"ttlMillis":1000}`, []string{"Content-Type", "text/plain"}, http.StatusForbidden},
		{"another origin", "/live/native/start", `{"ttlMillis":1000}`, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"a cross-site fetch", "/live/native/start", `{"ttlMillis":1000}`, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"a rebound host name", "/live/native/start", `{"ttlMillis":1000}`, []string{"Host", "evil.example:80"}, http.StatusForbidden},
		{"its own origin", "/live/native/nosuch/v1/acquire", acquireBody("r", "a"), []string{"Origin", "http://" + host, "Sec-Fetch-Site", "same-origin"}, http.StatusNotFound},
		{"no such coordinator", "/live/native/0123456789abcdef/restart", `{}`, nil, http.StatusNotFound},
		{"no such operation", "/live/worker/v1/delete", `{}`, nil, http.StatusNotFound},
		{"a TTL of 0", "/live/native/start", `{"ttlMillis":0}`, nil, http.StatusBadRequest},
		{"a TTL too long", "/live/native/start", `{"ttlMillis":600001}`, nil, http.StatusBadRequest},
		{"not JSON", "/live/native/start", `ttl=5`, nil, http.StatusBadRequest},
		{"a body too large", "/live/native/start", `{"ttlMillis":1000,"pad":"` + strings.Repeat("x", maxLiveBody) + `"}`, nil, http.StatusRequestEntityTooLarge},
		{"nothing there", "/live/elsewhere", `{}`, nil, http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := post(t, srv.URL+c.path, c.body, c.header...)
			if code != c.want {
				t.Errorf("%s: got %d %s, want %d", c.path, code, body, c.want)
			}
			if !strings.Contains(body, `"error"`) {
				t.Errorf("not the service's error shape: %s", body)
			}
		})
	}
	res, err := http.Get(srv.URL + "/live/native/start")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "POST" {
		t.Errorf("GET start: %d %q", res.StatusCode, res.Header.Get("Allow"))
	}
}

func TestLiveSaysWhyACoordinatorCannotStart(t *testing.T) {
	script := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'cannot open the state' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{script, filepath.Join(t.TempDir(), "missing")} {
		_, srv := liveServer(t, LiveOptions{Coordinator: bin})
		st := waitStatus(t, srv)
		if st.Native.State != "unavailable" || st.Native.Reason == "" {
			t.Errorf("%s: %+v", bin, st.Native)
		}
		if bin == script && !strings.Contains(st.Native.Reason, "cannot open the state") {
			t.Errorf("the reason leaves out what the coordinator said: %q", st.Native.Reason)
		}
		if code, _ := post(t, srv.URL+"/live/native/start", `{"ttlMillis":1000}`); code != http.StatusServiceUnavailable {
			t.Errorf("start: %d", code)
		}
	}
}

func TestLiveBoundsItsCoordinatorsAndEndsThemOnClose(t *testing.T) {
	l, srv := liveServer(t, LiveOptions{Coordinator: coordinatorBin(t)})
	waitStatus(t, srv)
	var ids []string
	for i := 0; i <= maxLiveCoordinators; i++ {
		code, body := post(t, srv.URL+"/live/native/start", `{"ttlMillis":1000}`)
		if code != http.StatusOK {
			t.Fatalf("start %d: %d %s", i, code, body)
		}
		var s struct{ ID string }
		_ = json.Unmarshal([]byte(body), &s)
		ids = append(ids, s.ID)
		time.Sleep(2 * time.Millisecond) // distinct last-use times
	}
	// The least recently used one made room for the last.
	if code, _ := post(t, srv.URL+"/live/native/"+ids[0]+"/v1/acquire", acquireBody("r", "a")); code != http.StatusNotFound {
		t.Errorf("the oldest coordinator is still there: %d", code)
	}
	if code, _ := post(t, srv.URL+"/live/native/"+ids[1]+"/v1/acquire", acquireBody("r", "a")); code != http.StatusOK {
		t.Errorf("the second one is gone: %d", code)
	}
	l.mu.Lock()
	n := len(l.coords)
	var addrs []string
	for _, c := range l.coords {
		addrs = append(addrs, c.proc.base.Host)
	}
	l.mu.Unlock()
	if n != maxLiveCoordinators {
		t.Errorf("%d running, want %d", n, maxLiveCoordinators)
	}
	// Idle ones end.
	l.endIdle(time.Now().Add(time.Hour))
	l.mu.Lock()
	n = len(l.coords)
	l.mu.Unlock()
	if n != 0 {
		t.Errorf("%d still running after the idle sweep", n)
	}
	for _, a := range addrs {
		if conn, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			conn.Close()
			t.Errorf("a stopped coordinator still listens on %s", a)
		}
	}
	// Close ends the ones started since.
	code, body := post(t, srv.URL+"/live/native/start", `{"ttlMillis":1000}`)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	l.mu.Lock()
	var last string
	for _, c := range l.coords {
		last = c.proc.base.Host
	}
	l.mu.Unlock()
	l.Close()
	if conn, err := net.DialTimeout("tcp", last, time.Second); err == nil {
		conn.Close()
		t.Errorf("Close left a coordinator listening on %s", last)
	}
}

func TestLiveForwardsToAWorker(t *testing.T) {
	var got []string
	var mu sync.Mutex
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":false,"heldBy":"x","retryAfterMillis":5}`))
	}))
	defer worker.Close()
	_, srv := liveServer(t, LiveOptions{WorkerURL: worker.URL, WorkerTTL: 3 * time.Second})
	st := waitStatus(t, srv)
	if st.Worker.State != "ready" || st.Worker.TTLMillis != 3000 {
		t.Fatalf("worker: %+v", st.Worker)
	}
	code, body := post(t, srv.URL+"/live/worker/v1/acquire", `{"requestId":"q"}`)
	if code != http.StatusOK || body != `{"ok":false,"heldBy":"x","retryAfterMillis":5}` {
		t.Fatalf("forwarded: %d %s", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != `POST /v1/acquire application/json {"requestId":"q"}` {
		t.Errorf("the Worker got %q", got)
	}
}

// The page's one inline script, its import map, is allowed by its hash in
// the policy the server sends and in the page's own meta tag.
func TestPolicyHashesTheImportMap(t *testing.T) {
	page, err := os.ReadFile("../../web/index.html")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<script type="importmap">(.*?)</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatal("web/index.html has no import map")
	}
	sum := sha256.Sum256(m[1])
	hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	if !strings.Contains(ContentSecurityPolicy, hash) {
		t.Errorf("the server's policy lacks %s", hash)
	}
	meta := regexp.MustCompile(`http-equiv="Content-Security-Policy" content="([^"]*)"`).FindSubmatch(page)
	if meta == nil || string(meta[1]) != ContentSecurityPolicy {
		t.Errorf("the meta tag's policy differs from the server's:\n%s\n%s", meta[1], ContentSecurityPolicy)
	}
}
