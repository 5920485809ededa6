//go:build !js

package httpfence_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	"github.com/lease-fence/lease-fence/test/rig/roundtrip"
)

// seen is one request as the upstream received it.
type seen struct {
	Method, Path, Body, Fence string
	Header                    http.Header
}

// recorder is an upstream API that records every request it receives and
// answers 201 with a header and a body of its own. If handle is set, it
// runs instead of the answer (after the request is recorded).
type recorder struct {
	mu     sync.Mutex
	got    []seen
	handle func(w http.ResponseWriter, r *http.Request)
	srv    *httptest.Server
}

func newRecorder(t *testing.T) *recorder {
	u := &recorder{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("upstream: reading the body: %v", err)
		}
		u.mu.Lock()
		u.got = append(u.got, seen{r.Method, r.URL.Path, string(body), r.Header.Get("Lease-Fence"), r.Header.Clone()})
		h := u.handle
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "upstream got "+r.Method+" "+r.URL.Path)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recorder) seen() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.got...)
}

func (u *recorder) setHandle(h func(w http.ResponseWriter, r *http.Request)) {
	u.mu.Lock()
	u.handle = h
	u.mu.Unlock()
}

// openStore opens sqlfence on a fresh SQLite file, durable as
// cmd/fence-proxy opens it.
func openStore(t testing.TB) *sqlfence.Store { return openSQLite(t, "FULL") }

// openFastStore is openStore without the fsync of each commit, for tests
// that make thousands of floors.
func openFastStore(t testing.TB) *sqlfence.Store { return openSQLite(t, "OFF") }

// openSQLite opens sqlfence on a fresh SQLite file with the synchronous
// setting given.
func openSQLite(t testing.TB, synchronous string) *sqlfence.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous("+synchronous+")&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlfence.Open(context.Background(), db, sqlfence.Options{Dialect: sqlfence.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type env struct {
	up    *recorder
	store *sqlfence.Store
	proxy *httpfence.Proxy
	srv   *httptest.Server
}

func newEnv(t *testing.T, opts httpfence.Options) *env {
	t.Helper()
	e := &env{up: newRecorder(t)}
	if opts.Store == nil {
		e.store = openStore(t)
		opts.Store = e.store
	}
	if opts.Upstream == nil {
		opts.Upstream, _ = url.Parse(e.up.srv.URL)
	}
	p, err := httpfence.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = p
	e.srv = httptest.NewServer(p)
	t.Cleanup(e.srv.Close)
	t.Cleanup(p.CloseIdleConnections)
	return e
}

func hdr(resource, holder string, f uint64) string {
	return `resource="` + resource + `", holder="` + holder + `", fence=` + strconv.FormatUint(f, 10)
}

type answer struct {
	status int
	header http.Header
	body   string
}

// do sends method path with body and the Lease-Fence values given (none,
// one, or several lines).
func (e *env) do(t *testing.T, method, path, body string, fences ...string) answer {
	t.Helper()
	return e.doCtx(t, context.Background(), method, path, body, fences...)
}

func (e *env) doCtx(t *testing.T, ctx context.Context, method, path, body string, fences ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fences {
		req.Header.Add("Lease-Fence", f)
	}
	resp, b := roundtrip.Read(t, e.srv.Client().Do, req)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// leaving sends POST path with body and the Lease-Fence value fence under
// ctx, in the background, for a client that leaves (cancels ctx): its
// channel gives the client's error, the answer's body unread.
func (e *env) leaving(ctx context.Context, path, body, fence string) <-chan error {
	out := make(chan error)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Lease-Fence", fence)
		resp, err := e.srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		out <- err
	}()
	return out
}

func (e *env) floor(t *testing.T, resource string) uint64 {
	t.Helper()
	f, err := e.store.Floor(context.Background(), resource)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// proxyError decodes the proxy's own error answer and checks its marks.
func proxyError(t *testing.T, a answer, status int, code string) httpfence.ErrorBody {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d (%s)", a.status, status, a.body)
	}
	var b httpfence.ErrorBody
	if err := json.Unmarshal([]byte(a.body), &b); err != nil {
		t.Fatalf("the answer is not JSON: %q", a.body)
	}
	if b.Error.Code != code || b.Error.Message == "" {
		t.Fatalf("error %+v, want code %q with a message", b.Error, code)
	}
	if a.header.Get("Lease-Fence-Error") != code || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v lack Lease-Fence-Error: %s and a JSON content type", a.header, code)
	}
	return b
}

func TestWriteWithoutHeaderIs428(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "TRACE", "PROPFIND"} {
		a := e.do(t, m, "/deploy", "x")
		b := proxyError(t, a, http.StatusPreconditionRequired, "missing_fence")
		if !strings.Contains(b.Error.Message, "Lease-Fence") {
			t.Errorf("%s: message %q does not name the header", m, b.Error.Message)
		}
	}
	if got := e.up.seen(); len(got) != 0 {
		t.Fatalf("the upstream saw %d writes without a fence", len(got))
	}
}

func TestMalformedHeaderIs400AndChangesNothing(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	cases := [][]string{
		{hdr("r", "a", 7), hdr("r", "a", 7)},
		{hdr("r", "a", 7), hdr("r", "b", 9)},
	}
	for _, c := range hostile {
		cases = append(cases, []string{c.v})
	}
	for _, c := range cases {
		if strings.ContainsAny(strings.Join(c, ""), "\x00\n") {
			continue // net/http refuses to send these; the parser test has them
		}
		a := e.do(t, "POST", "/deploy", "x", c...)
		proxyError(t, a, http.StatusBadRequest, "bad_fence_header")
	}
	if got := e.up.seen(); len(got) != 0 {
		t.Fatalf("the upstream saw %d writes with malformed fences", len(got))
	}
	if f := e.floor(t, "r"); f != 0 {
		t.Fatalf("floor of r is %d after malformed writes, want 0", f)
	}
}

func TestReadsPassThroughUnfenced(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		a := e.do(t, m, "/status?x=1", "")
		if a.status != http.StatusCreated || a.header.Get("X-Upstream") != "yes" {
			t.Fatalf("%s: %d %v", m, a.status, a.header)
		}
		if a.header.Get("Lease-Fence-Floor") != "" {
			t.Errorf("%s: a read came back with a floor", m)
		}
	}
	// A read with a stale or malformed fence passes too: reads are not gated.
	e.do(t, "POST", "/w", "", hdr("r", "b", 8))
	if a := e.do(t, "GET", "/status", "", hdr("r", "a", 7)); a.status != http.StatusCreated {
		t.Fatalf("a read carrying a stale fence: %d", a.status)
	}
	if a := e.do(t, "GET", "/status", "", "fence=nonsense"); a.status != http.StatusCreated {
		t.Fatalf("a read carrying a malformed fence: %d", a.status)
	}
	if got := len(e.up.seen()); got != 6 {
		t.Fatalf("upstream saw %d requests, want 6", got)
	}
	rs, _ := e.store.Rejections(context.Background(), "r")
	if len(rs) != 0 {
		t.Fatalf("reads logged refusals: %+v", rs)
	}
}

func TestAdmittedWriteIsForwardedWithTheFloor(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	var floorDuring uint64
	e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
		// The floor is raised (and committed) before the write arrives.
		floorDuring = e.floor(t, "deploy-slot")
		w.Header().Set("Lease-Fence-Floor", "999") // the upstream cannot forge it
		w.Header().Set("Lease-Fence-Error", "stale_fence")
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "deployed")
	})
	a := e.do(t, "PUT", "/v1/deploy?env=prod", "release 42", hdr("deploy-slot", "agent-a", 7))
	if a.status != http.StatusAccepted || a.body != "deployed" || a.header.Get("X-Upstream") != "yes" {
		t.Fatalf("answer %d %q %v, want the upstream's", a.status, a.body, a.header)
	}
	if a.header.Get("Lease-Fence-Floor") != "7" || a.header.Get("Lease-Fence-Error") != "" {
		t.Fatalf("headers %v, want Lease-Fence-Floor: 7 and no Lease-Fence-Error", a.header)
	}
	if floorDuring != 7 {
		t.Fatalf("floor while the upstream handled the write = %d, want 7 (raised before forwarding)", floorDuring)
	}
	got := e.up.seen()
	if len(got) != 1 || got[0].Method != "PUT" || got[0].Path != "/v1/deploy" || got[0].Body != "release 42" || got[0].Fence != hdr("deploy-slot", "agent-a", 7) {
		t.Fatalf("upstream saw %+v", got)
	}
	if got[0].Header.Get("Content-Length") != "10" {
		t.Fatalf("the write reached the upstream without its length: %v", got[0].Header)
	}
	// An equal fence is admitted; a higher one raises the floor.
	if a := e.do(t, "POST", "/x", "", hdr("deploy-slot", "agent-a", 7)); a.status != http.StatusAccepted {
		t.Fatalf("equal fence: %d %s", a.status, a.body)
	}
	if a := e.do(t, "POST", "/x", "", hdr("deploy-slot", "agent-b", 8)); a.status != http.StatusAccepted || a.header.Get("Lease-Fence-Floor") != "8" {
		t.Fatalf("higher fence: %d %v", a.status, a.header)
	}
	if f := e.floor(t, "deploy-slot"); f != 8 {
		t.Fatalf("floor %d, want 8", f)
	}
}

func TestStaleWriteIsRefusedLoggedAndNeverForwarded(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	if a := e.do(t, "POST", "/deploy", "b's", hdr("deploy-slot", "agent-b", 8)); a.status != http.StatusCreated {
		t.Fatalf("agent-b: %d %s", a.status, a.body)
	}
	for i := 1; i <= 2; i++ {
		a := e.do(t, "POST", "/deploy", "a's", hdr("deploy-slot", "agent-a", 7))
		b := proxyError(t, a, http.StatusConflict, "stale_fence")
		want := httpfence.RejectionJSON{Seq: uint64(i), Resource: "deploy-slot", RefusedHolderID: "agent-a", RefusedFence: 7, AdmittedHolderID: "agent-b", AdmittedFence: 8}
		if b.Error.Rejection == nil || *b.Error.Rejection != want {
			t.Fatalf("rejection %+v, want %+v", b.Error.Rejection, want)
		}
		if a.header.Get("Lease-Fence-Floor") != "8" {
			t.Fatalf("a refusal's floor header is %q, want 8", a.header.Get("Lease-Fence-Floor"))
		}
		// The JSON has exactly the field names.
		var raw struct {
			Error struct {
				Rejection map[string]any `json:"rejection"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(a.body), &raw)
		for _, k := range []string{"seq", "resource", "refusedHolderId", "refusedFence", "admittedHolderId", "admittedFence"} {
			if _, ok := raw.Error.Rejection[k]; !ok {
				t.Fatalf("rejection JSON %s lacks %q", a.body, k)
			}
		}
	}
	for _, s := range e.up.seen() {
		if s.Body == "a's" {
			t.Fatalf("the stale write reached the upstream: %+v", s)
		}
	}
	// The refusals are in the store (durable), and served by the proxy.
	rs, err := e.store.Rejections(context.Background(), "deploy-slot")
	if err != nil || len(rs) != 2 {
		t.Fatalf("store rejections %+v, %v", rs, err)
	}
	a := e.do(t, "GET", "/.lease-fence/rejections?resource=deploy-slot", "")
	var list struct {
		Resource   string                    `json:"resource"`
		Rejections []httpfence.RejectionJSON `json:"rejections"`
	}
	if err := json.Unmarshal([]byte(a.body), &list); err != nil || a.status != 200 || list.Resource != "deploy-slot" || len(list.Rejections) != 2 ||
		list.Rejections[1].Rejection() != rs[1] {
		t.Fatalf("GET rejections: %d %s", a.status, a.body)
	}
	a = e.do(t, "GET", "/.lease-fence/floor?resource=deploy-slot", "")
	if a.status != 200 || strings.TrimSpace(a.body) != `{"resource":"deploy-slot","floor":8}` {
		t.Fatalf("GET floor: %d %s", a.status, a.body)
	}
	if len(e.up.seen()) != 1 {
		t.Fatalf("the proxy's own endpoints were forwarded: %+v", e.up.seen())
	}
}

func TestAdmitRaisesTheFloorWithoutForwarding(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	a := e.do(t, "POST", "/.lease-fence/admit", "", hdr("deploy-slot", "agent-b", 9))
	if a.status != 200 || a.header.Get("Lease-Fence-Floor") != "9" || strings.TrimSpace(a.body) != `{"resource":"deploy-slot","holder":"agent-b","fence":9}` {
		t.Fatalf("admit: %d %v %s", a.status, a.header, a.body)
	}
	if f := e.floor(t, "deploy-slot"); f != 9 {
		t.Fatalf("floor %d after admit, want 9", f)
	}
	// The holder that was pushed out is refused at its first write.
	b := proxyError(t, e.do(t, "POST", "/deploy", "", hdr("deploy-slot", "agent-a", 8)), http.StatusConflict, "stale_fence")
	if r := b.Error.Rejection; r.AdmittedHolderID != "agent-b" || r.AdmittedFence != 9 || r.Seq != 1 {
		t.Fatalf("rejection %+v", r)
	}
	// An older admit is refused and logged too.
	b = proxyError(t, e.do(t, "POST", "/.lease-fence/admit", "", hdr("deploy-slot", "agent-a", 8)), http.StatusConflict, "stale_fence")
	if b.Error.Rejection.Seq != 2 {
		t.Fatalf("rejection %+v", b.Error.Rejection)
	}
	proxyError(t, e.do(t, "POST", "/.lease-fence/admit", ""), http.StatusPreconditionRequired, "missing_fence")
	proxyError(t, e.do(t, "POST", "/.lease-fence/admit", "", `resource="r"`), http.StatusBadRequest, "bad_fence_header")
	a = e.do(t, "GET", "/.lease-fence/admit", "")
	proxyError(t, a, http.StatusMethodNotAllowed, "method_not_allowed")
	if a.header.Get("Allow") != "POST" {
		t.Fatalf("Allow %q", a.header.Get("Allow"))
	}
	proxyError(t, e.do(t, "POST", "/.lease-fence/floor?resource=r", ""), http.StatusMethodNotAllowed, "method_not_allowed")
	for _, q := range []string{"", "?resource=", "?resource=a&resource=b", "?resource=%zz", "?resource=" + strings.Repeat("r", fence.MaxIDBytes+1)} {
		proxyError(t, e.do(t, "GET", "/.lease-fence/rejections"+q, ""), http.StatusBadRequest, "bad_query")
		proxyError(t, e.do(t, "GET", "/.lease-fence/floor"+q, ""), http.StatusBadRequest, "bad_query")
	}
	proxyError(t, e.do(t, "GET", "/.lease-fence/other", ""), http.StatusNotFound, "not_found")
	proxyError(t, e.do(t, "POST", "/.lease-fence/", "", hdr("deploy-slot", "agent-b", 9)), http.StatusNotFound, "not_found")
	if got := e.up.seen(); len(got) != 0 {
		t.Fatalf("the upstream saw %+v", got)
	}
}

func TestUpstreamFailureIs502AndTheFloorStaysRaised(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead, _ := url.Parse("http://" + ln.Addr().String())
		ln.Close()
		e := newEnv(t, httpfence.Options{Upstream: dead})
		b := proxyError(t, e.do(t, "POST", "/deploy", "x", hdr("deploy-slot", "agent-a", 7)), http.StatusBadGateway, "upstream_failed")
		if !strings.Contains(b.Error.Message, "floor stays at 7") {
			t.Fatalf("message %q", b.Error.Message)
		}
		if f := e.floor(t, "deploy-slot"); f != 7 {
			t.Fatalf("floor %d after the failed forward, want 7", f)
		}
		proxyError(t, e.do(t, "POST", "/deploy", "x", hdr("deploy-slot", "agent-z", 6)), http.StatusConflict, "stale_fence")
		// A read to a dead upstream is a 502 too, and moves nothing.
		proxyError(t, e.do(t, "GET", "/status", ""), http.StatusBadGateway, "upstream_failed")
	})
	t.Run("connection cut mid-answer", func(t *testing.T) {
		e := newEnv(t, httpfence.Options{})
		e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		})
		proxyError(t, e.do(t, "POST", "/deploy", "x", hdr("deploy-slot", "agent-a", 7)), http.StatusBadGateway, "upstream_failed")
		if f := e.floor(t, "deploy-slot"); f != 7 {
			t.Fatalf("floor %d, want 7", f)
		}
		if n := len(e.up.seen()); n != 1 {
			t.Fatalf("upstream saw %d requests, want 1 (no retry of a write)", n)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		e := newEnv(t, httpfence.Options{UpstreamTimeout: 100 * time.Millisecond})
		defer close(release)
		e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		proxyError(t, e.do(t, "POST", "/deploy", "x", hdr("deploy-slot", "agent-a", 7)), http.StatusBadGateway, "upstream_timeout")
		if f := e.floor(t, "deploy-slot"); f != 7 {
			t.Fatalf("floor %d, want 7", f)
		}
	})
}

// failingStore fails every Admit, as a broken disk would.
type failingStore struct{ *sqlfence.Store }

func (failingStore) Admit(context.Context, fence.Token) error {
	return &sqlfence.DBError{Op: "commit", Err: errors.New("disk I/O error")}
}

func TestStoreFailureIs503AndNothingIsForwarded(t *testing.T) {
	st := openStore(t)
	e := newEnv(t, httpfence.Options{Store: failingStore{st}})
	b := proxyError(t, e.do(t, "POST", "/deploy", "x", hdr("r", "a", 7)), http.StatusServiceUnavailable, "store_failed")
	if !strings.Contains(b.Error.Message, "disk I/O error") || !strings.Contains(b.Error.Message, "not forwarded") {
		t.Fatalf("message %q", b.Error.Message)
	}
	proxyError(t, e.do(t, "POST", "/.lease-fence/admit", "", hdr("r", "a", 7)), http.StatusServiceUnavailable, "store_failed")
	if got := e.up.seen(); len(got) != 0 {
		t.Fatalf("upstream saw %+v", got)
	}
}

func TestBodyBounds(t *testing.T) {
	e := newEnv(t, httpfence.Options{MaxBodyBytes: 10})
	if a := e.do(t, "POST", "/w", "0123456789", hdr("r", "a", 7)); a.status != http.StatusCreated {
		t.Fatalf("a body at the limit: %d %s", a.status, a.body)
	}
	proxyError(t, e.do(t, "POST", "/w", "0123456789x", hdr("r", "a", 8)), http.StatusRequestEntityTooLarge, "body_too_large")
	// Chunked (no Content-Length): refused once the limit is passed.
	req, _ := http.NewRequest("POST", e.srv.URL+"/w", io.MultiReader(strings.NewReader("01234"), strings.NewReader("56789xy")))
	req.Header.Set("Lease-Fence", hdr("r", "a", 8))
	resp, _ := roundtrip.Read(t, e.srv.Client().Do, req)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body over the limit: %d", resp.StatusCode)
	}
	if f := e.floor(t, "r"); f != 7 {
		t.Fatalf("floor %d after refused bodies, want 7", f)
	}
	if got := e.up.seen(); len(got) != 1 || got[0].Body != "0123456789" {
		t.Fatalf("upstream saw %+v", got)
	}
}

func TestBufferBudget(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, httpfence.Options{MaxBodyBytes: 10, MaxBufferBytes: 15})
	inUpstream := make(chan struct{}, 1)
	e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			inUpstream <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	})
	done := make(chan answer)
	go func() { done <- e.do(t, "POST", "/slow", "0123456789", hdr("r", "a", 7)) }()
	<-inUpstream
	// 10 bytes are held by the write in progress; 6 more do not fit.
	proxyError(t, e.do(t, "POST", "/w", "012345", hdr("other", "a", 7)), http.StatusServiceUnavailable, "busy")
	if a := e.do(t, "POST", "/w", "01234", hdr("other", "a", 7)); a.status != http.StatusCreated {
		t.Fatalf("5 bytes fit: %d %s", a.status, a.body)
	}
	close(release)
	if a := <-done; a.status != http.StatusCreated {
		t.Fatalf("first write: %d", a.status)
	}
	if a := e.do(t, "POST", "/w", "0123456789", hdr("other", "a", 7)); a.status != http.StatusCreated {
		t.Fatalf("after the first write, its bytes are free again: %d %s", a.status, a.body)
	}
}

// Writes to one resource with different fences never overlap at the
// upstream; with shared admission, writes with the same fence do (8
// writers at one fence are all in flight at once), and with Exclusive no
// two writes to a resource overlap at all. Different resources do not wait
// for each other.
func TestWritesToOneResourceOverlapOnlyAtOneFence(t *testing.T) {
	for _, exclusive := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "exclusive"}[exclusive], func(t *testing.T) {
			e := newEnv(t, httpfence.Options{Exclusive: exclusive})
			var mu sync.Mutex
			inFlight := map[string]map[string]int{} // resource -> fence -> writes
			most := map[string]int{}
			mixed := ""
			e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
				res, f := r.URL.Query().Get("res"), r.URL.Query().Get("f")
				mu.Lock()
				if inFlight[res] == nil {
					inFlight[res] = map[string]int{}
				}
				inFlight[res][f]++
				n := 0
				for g, k := range inFlight[res] {
					if g != f && k > 0 {
						mixed = "fences " + f + " and " + g + " in flight at once on " + res
					}
					n += k
				}
				most[res] = max(most[res], n)
				mu.Unlock()
				// Give other writes every chance to overlap this one.
				for range 3 {
					_, _ = e.store.Floor(context.Background(), res)
				}
				mu.Lock()
				inFlight[res][f]--
				mu.Unlock()
				w.WriteHeader(http.StatusNoContent)
			})
			var wg sync.WaitGroup
			for i := range 16 {
				res := []string{"a", "b"}[i%2]
				wg.Go(func() {
					for j := range 5 {
						f := strconv.Itoa(1 + j)
						a := e.do(t, "POST", "/w?res="+res+"&f="+f, "x", hdr(res, "h", uint64(1+j)))
						if a.status != http.StatusNoContent && a.status != http.StatusConflict {
							t.Errorf("status %d %s", a.status, a.body)
						}
					}
				})
			}
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if mixed != "" {
				t.Fatal(mixed)
			}
			if exclusive && (most["a"] != 1 || most["b"] != 1) {
				t.Fatalf("most writes in flight at once per resource: %v, want 1 each", most)
			}
		})
	}
}

func TestAWriteToAnotherResourceDoesNotWait(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	release := make(chan struct{})
	held := make(chan struct{})
	e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(held)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	done := make(chan answer)
	go func() { done <- e.do(t, "POST", "/slow", "", hdr("a", "h", 1)) }()
	<-held
	if a := e.do(t, "POST", "/fast", "", hdr("b", "h", 1)); a.status != http.StatusNoContent {
		t.Fatalf("write to b while a's is in flight: %d %s", a.status, a.body)
	}
	if a := e.do(t, "GET", "/read", ""); a.status != http.StatusNoContent {
		t.Fatalf("read while a's write is in flight: %d", a.status)
	}
	close(release)
	<-done
}

func TestUpgradeAndConnectAreRefused(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	req, _ := http.NewRequest("GET", e.srv.URL+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, _ := roundtrip.Read(t, e.srv.Client().Do, req)
	if resp.StatusCode != http.StatusNotImplemented || resp.Header.Get("Lease-Fence-Error") != "upgrade_not_supported" {
		t.Fatalf("upgrade: %d %v", resp.StatusCode, resp.Header)
	}
	// CONNECT, written by hand (net/http's client sends it only to proxies).
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	if got := e.up.seen(); len(got) != 0 {
		t.Fatalf("upstream saw %+v", got)
	}
}

func TestHopByHopHeadersAreNotForwarded(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Secret-Hop")
		w.Header().Set("X-Secret-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-End-To-End", "kept")
		w.WriteHeader(http.StatusOK)
	})
	req, _ := http.NewRequest("POST", e.srv.URL+"/w", strings.NewReader("x"))
	req.Header.Set("Lease-Fence", hdr("r", "a", 1))
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("Proxy-Authorization", "Basic Zm9vOmJhcg==")
	req.Header.Set("Te", "gzip")
	req.Header.Set("X-End-To-End", "kept")
	resp, _ := roundtrip.Read(t, e.srv.Client().Do, req)
	if resp.Header.Get("X-Secret-Hop") != "" || resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("X-End-To-End") != "kept" {
		t.Fatalf("answer headers %v", resp.Header)
	}
	got := e.up.seen()
	if len(got) != 1 {
		t.Fatalf("upstream saw %+v", got)
	}
	h := got[0].Header
	for _, k := range []string{"X-Hop", "Proxy-Authorization", "Te"} {
		if h.Get(k) != "" {
			t.Errorf("hop-by-hop %s reached the upstream: %v", k, h)
		}
	}
	if h.Get("X-End-To-End") != "kept" || h.Get("X-Forwarded-For") == "" || h.Get("Lease-Fence") != hdr("r", "a", 1) {
		t.Errorf("upstream headers %v", h)
	}
}

// A client that hangs up after its write was admitted does not cut the
// write short: the upstream gets all of it, and the next write to the
// resource waits until the upstream has answered.
func TestAClientLeavingDoesNotCutAForwardedWrite(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		if r.URL.Path == "/first" {
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	ctx, cancel := context.WithCancel(context.Background())
	first := e.leaving(ctx, "/first", "all of it", hdr("r", "a", 1))
	<-arrived
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first client: %v, want canceled", err)
	}
	// The next fence waits for the first write to end at the upstream.
	second := make(chan answer)
	go func() { second <- e.do(t, "POST", "/second", "", hdr("r", "b", 2)) }()
	waitFor(t, "the second write to queue", func() bool { return e.proxy.Waiting("r") == 1 })
	if len(arrived) != 0 {
		t.Fatal("the second write reached the upstream while the first was still in it")
	}
	close(release)
	if a := <-second; a.status != http.StatusNoContent {
		t.Fatalf("second: %d %s", a.status, a.body)
	}
	got := e.up.seen()
	if len(got) != 2 || got[0].Body != "all of it" {
		t.Fatalf("upstream saw %+v", got)
	}
}

// waitFor waits until cond holds, checking often, for at most 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	st := openStore(t)
	u, _ := url.Parse("http://127.0.0.1:1")
	for _, o := range []httpfence.Options{
		{Store: st},
		{Upstream: u},
		{Upstream: &url.URL{Scheme: "ftp", Host: "x"}, Store: st},
		{Upstream: &url.URL{Path: "/relative"}, Store: st},
		{Upstream: u, Store: st, MaxQueue: -1},
		{Upstream: u, Store: st, MaxBodyBytes: -1},
		{Upstream: u, Store: st, UpstreamTimeout: -time.Second},
	} {
		var ae *fence.ArgumentError
		if _, err := httpfence.New(o); !errors.As(err, &ae) {
			t.Errorf("New(%+v) = %v, want an ArgumentError", o, err)
		}
	}
}

// blockFirst makes the upstream hold the write to path /hold until release
// is closed; held is closed when it arrives. Other requests are answered
// 204 at once.
func blockFirst(e *env) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(held)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return held, release
}

// A write that waits in its resource's queue is checked when its turn
// comes, not when it arrived: a newer fence admitted meanwhile refuses it.
func TestAQueuedWriteIsCheckedAtItsTurn(t *testing.T) {
	for _, c := range []struct {
		name      string
		exclusive bool
		queued    uint64 // the fence of the queued write: higher than the running one's, or (Exclusive) the same
	}{{"shared", false, 8}, {"exclusive", true, 7}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, httpfence.Options{Exclusive: c.exclusive})
			held, release := blockFirst(e)
			first := make(chan answer)
			go func() { first <- e.do(t, "POST", "/hold", "", hdr("deploy-slot", "agent-a", 7)) }()
			<-held
			queued := make(chan answer)
			go func() { queued <- e.do(t, "POST", "/queued", "late", hdr("deploy-slot", "agent-b", c.queued)) }()
			waitFor(t, "the second write to queue", func() bool { return e.proxy.Waiting("deploy-slot") == 1 })
			// The coordinator pushes agent-c's fence while the writes are
			// in flight and queued; the push does not wait for the queue.
			if a := e.do(t, "POST", "/.lease-fence/admit", "", hdr("deploy-slot", "agent-c", 9)); a.status != 200 {
				t.Fatalf("admit: %d %s", a.status, a.body)
			}
			close(release)
			if a := <-first; a.status != http.StatusNoContent {
				t.Fatalf("the write in flight: %d %s", a.status, a.body)
			}
			b := proxyError(t, <-queued, http.StatusConflict, "stale_fence")
			if r := b.Error.Rejection; r.RefusedFence != c.queued || r.AdmittedFence != 9 || r.AdmittedHolderID != "agent-c" || r.Seq != 1 {
				t.Fatalf("rejection %+v", r)
			}
			for _, s := range e.up.seen() {
				if s.Path == "/queued" {
					t.Fatal("the queued stale write reached the upstream")
				}
			}
			if n := e.proxy.Lanes(); n != 0 {
				t.Fatalf("%d lanes left after every write ended", n)
			}
		})
	}
}

func TestQueueBounds(t *testing.T) {
	e := newEnv(t, httpfence.Options{MaxQueue: 1})
	held, release := blockFirst(e)
	first := make(chan answer)
	go func() { first <- e.do(t, "POST", "/hold", "", hdr("r", "a", 1)) }()
	<-held
	second := make(chan answer)
	go func() { second <- e.do(t, "POST", "/second", "", hdr("r", "a", 2)) }()
	waitFor(t, "the second write to queue", func() bool { return e.proxy.Waiting("r") == 1 })
	a := e.do(t, "POST", "/third", "", hdr("r", "a", 3))
	proxyError(t, a, http.StatusServiceUnavailable, "queue_full")
	if a.header.Get("Retry-After") == "" {
		t.Fatal("queue_full without Retry-After")
	}
	// The refused write changed nothing: its fence 3 was not admitted.
	if f := e.floor(t, "r"); f != 1 {
		t.Fatalf("floor %d, want 1", f)
	}
	close(release)
	<-first
	if a := <-second; a.status != http.StatusNoContent {
		t.Fatalf("the queued write: %d %s", a.status, a.body)
	}
	for _, s := range e.up.seen() {
		if s.Path == "/third" {
			t.Fatalf("upstream saw %+v", s)
		}
	}
}

func TestAQueuedClientThatLeavesChangesNothing(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	held, release := blockFirst(e)
	first := make(chan answer)
	go func() { first <- e.do(t, "POST", "/hold", "", hdr("q", "a", 1)) }()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	left := e.leaving(ctx, "/never", "x", hdr("q", "b", 5))
	waitFor(t, "the write to queue", func() bool { return e.proxy.Waiting("q") == 1 })
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	waitFor(t, "the write to leave the queue", func() bool { return e.proxy.Waiting("q") == 0 })
	close(release)
	<-first
	if f := e.floor(t, "q"); f != 1 {
		t.Fatalf("floor %d, want 1: the write that left was admitted", f)
	}
	if rs, _ := e.store.Rejections(context.Background(), "q"); len(rs) != 0 {
		t.Fatalf("rejections %+v", rs)
	}
	if got := e.up.seen(); len(got) != 1 {
		t.Fatalf("upstream saw %+v", got)
	}
	waitFor(t, "the lanes to empty", func() bool { return e.proxy.Lanes() == 0 })
}

func TestQueueTimeout(t *testing.T) {
	e := newEnv(t, httpfence.Options{QueueTimeout: 50 * time.Millisecond, UpstreamTimeout: time.Minute})
	held, release := blockFirst(e)
	first := make(chan answer)
	go func() { first <- e.do(t, "POST", "/hold", "", hdr("q", "a", 1)) }()
	<-held
	proxyError(t, e.do(t, "POST", "/late", "", hdr("q", "a", 2)), http.StatusServiceUnavailable, "queue_timeout")
	close(release)
	<-first
	if f := e.floor(t, "q"); f != 1 {
		t.Fatalf("floor %d, want 1", f)
	}
}

// countingStore counts the Admits that reach the store.
type countingStore struct {
	*sqlfence.Store
	admits atomic.Int64
}

func (s *countingStore) Admit(ctx context.Context, tok fence.Token) error {
	s.admits.Add(1)
	return s.Store.Admit(ctx, tok)
}

// A write at the floor it already raised needs no transaction; every other
// fence (higher, lower, or on a resource not seen yet) goes to the store.
func TestWritesAtTheFloorSkipTheStore(t *testing.T) {
	st := &countingStore{Store: openStore(t)}
	e := newEnv(t, httpfence.Options{Store: st})
	for range 20 {
		if a := e.do(t, "POST", "/w", "", hdr("r", "a", 7)); a.status != http.StatusCreated {
			t.Fatalf("%d %s", a.status, a.body)
		}
	}
	if n := st.admits.Load(); n != 1 {
		t.Fatalf("%d admits reached the store for 20 writes at one fence, want 1", n)
	}
	e.do(t, "POST", "/w", "", hdr("r", "b", 7)) // equal fence, other holder: admitted, nothing to write
	e.do(t, "POST", "/w", "", hdr("r", "c", 8))
	proxyError(t, e.do(t, "POST", "/w", "", hdr("r", "a", 7)), http.StatusConflict, "stale_fence")
	e.do(t, "POST", "/w", "", hdr("s", "a", 7))
	if n := st.admits.Load(); n != 4 {
		t.Fatalf("%d admits reached the store, want 4 (the first, 8, the stale 7, resource s)", n)
	}
	if rs, _ := st.Rejections(context.Background(), "r"); len(rs) != 1 || rs[0].AdmittedHolderID != "c" {
		t.Fatalf("rejections %+v", rs)
	}
}

// GET /.lease-fence/rejections answers a page at a time: after and limit
// choose it, more says whether refusals follow it, and bad values are 400.
func TestRejectionsArePaged(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	if a := e.do(t, "POST", "/.lease-fence/admit", "", hdr("r", "new", 10)); a.status != 200 {
		t.Fatal(a.status, a.body)
	}
	const n = 5
	for i := 1; i <= n; i++ {
		proxyError(t, e.do(t, "POST", "/w", "x", hdr("r", "old", uint64(i))), http.StatusConflict, "stale_fence")
	}
	get := func(query string) httpfence.RejectionsPage {
		t.Helper()
		a := e.do(t, "GET", "/.lease-fence/rejections?resource=r"+query, "")
		var p httpfence.RejectionsPage
		if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.status != 200 || p.Rejections == nil {
			t.Fatalf("%s: %d %s", query, a.status, a.body)
		}
		return p
	}
	seqs := func(p httpfence.RejectionsPage) string {
		var out []string
		for _, r := range p.Rejections {
			out = append(out, strconv.FormatUint(r.Seq, 10))
		}
		return strings.Join(out, ",") + " more=" + strconv.FormatBool(p.More)
	}
	for query, want := range map[string]string{
		"":                           "1,2,3,4,5 more=false",
		"&limit=2":                   "1,2 more=true",
		"&after=2&limit=2":           "3,4 more=true",
		"&after=4&limit=2":           "5 more=false",
		"&after=3&limit=2":           "4,5 more=false",
		"&after=5":                   " more=false",
		"&after=9223372036854775807": " more=false",
		"&limit=1000":                "1,2,3,4,5 more=false",
		"&after=0&limit=1":           "1 more=true",
	} {
		if got := seqs(get(query)); got != want {
			t.Errorf("%q: %s, want %s", query, got, want)
		}
	}
	for _, query := range []string{"&limit=0", "&limit=1001", "&limit=-1", "&limit=x", "&after=-1", "&after=x", "&after=1.5",
		"&after=9223372036854775808", "&after=1&after=2", "&limit=1&limit=2", "&after=", "&limit="} {
		proxyError(t, e.do(t, "GET", "/.lease-fence/rejections?resource=r"+query, ""), http.StatusBadRequest, "bad_query")
	}
}

// pausingStore stops after the Store has admitted fence at, before the
// proxy hears back: paused is closed then, and Admit returns once resume
// is closed.
type pausingStore struct {
	*sqlfence.Store
	at             uint64
	paused, resume chan struct{}
}

func (s *pausingStore) Admit(ctx context.Context, tok fence.Token) error {
	err := s.Store.Admit(ctx, tok)
	if tok.Fence == s.at {
		close(s.paused)
		<-s.resume
	}
	return err
}

// A stale write that arrives while the write that raised the Store's floor
// has not heard back from it is refused by the Store and logged, not taken
// as admitted at the floor the proxy cached before.
func TestAStaleWriteBesideAnUnfinishedRaiseIsRefused(t *testing.T) {
	st := &pausingStore{Store: openStore(t), at: 9, paused: make(chan struct{}), resume: make(chan struct{})}
	e := newEnv(t, httpfence.Options{Store: st})
	if a := e.do(t, "POST", "/w", "", hdr("r", "a", 7)); a.status != http.StatusCreated {
		t.Fatalf("%d %s", a.status, a.body)
	}
	var resume sync.Once
	t.Cleanup(func() { resume.Do(func() { close(st.resume) }) }) // before the server's Close, which waits for the raise
	raise := make(chan answer, 1)
	go func() { raise <- e.do(t, "POST", "/raise", "", hdr("r", "b", 9)) }()
	<-st.paused
	b := proxyError(t, e.do(t, "POST", "/stale", "", hdr("r", "a", 7)), http.StatusConflict, "stale_fence")
	if r := b.Error.Rejection; r.RefusedFence != 7 || r.AdmittedFence != 9 || r.AdmittedHolderID != "b" || r.Seq != 1 {
		t.Fatalf("rejection %+v", r)
	}
	resume.Do(func() { close(st.resume) })
	if a := <-raise; a.status != http.StatusCreated {
		t.Fatalf("the raising write: %d %s", a.status, a.body)
	}
	for _, s := range e.up.seen() {
		if s.Path == "/stale" {
			t.Fatal("the stale write reached the upstream")
		}
	}
}
