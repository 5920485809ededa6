//go:build !js && !wasip1

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/internal/sse/overflow"
)

// get sends a GET of url with the header pairs kv.
func get(t *testing.T, url string, kv ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestConsoleIsServedOnlyWithUI(t *testing.T) {
	off := start(t, "-memory")
	if res := get(t, off.url+"/ui/"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("without -ui, /ui/ answered %d", res.StatusCode)
	}
	if res := get(t, off.url+"/ui/api/rejections"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("without -ui, /ui/api/rejections answered %d", res.StatusCode)
	}
	for _, args := range [][]string{
		{"-memory", "-ui-gates", "http://127.0.0.1:1"},
		{"-memory", "-ui-gate-history", "5"},
		{"-memory", "-ui", "-ui-gates", "ftp://127.0.0.1:1"},
		{"-memory", "-ui", "-ui-gates", "http://user:pw@127.0.0.1:1"},
		{"-memory", "-ui", "-ui-gates", "http://127.0.0.1:1/?x=1"},
		{"-memory", "-ui", "-ui-gates", "http://127.0.0.1:1", "-ui-gate-history", "0"},
	} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestConsoleFiles(t *testing.T) {
	s := start(t, "-memory", "-ui")
	res := get(t, s.url+"/ui")
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/ui/" {
		t.Fatalf("/ui: %d at %s, want the page at /ui/", res.StatusCode, res.Request.URL.Path)
	}
	page := get(t, s.url+"/ui/")
	body, _ := io.ReadAll(page.Body)
	h := page.Header
	if page.StatusCode != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(string(body), `src="console.js"`) {
		t.Fatalf("/ui/: %d %q %.80q", page.StatusCode, h.Get("Content-Type"), body)
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows something unsafe", csp)
	}
	if strings.Contains(string(body), "<script>") || strings.Contains(string(body), " style=") {
		t.Error("the page has an inline script or style, which its policy refuses")
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-cache" || h.Get("ETag") == "" {
		t.Errorf("headers: %v", h)
	}
	if again := get(t, s.url+"/ui/", "If-None-Match", h.Get("ETag")); again.StatusCode != http.StatusNotModified {
		t.Errorf("a revalidation with the ETag answered %d, want 304", again.StatusCode)
	}
	for name, ctype := range map[string]string{"console.js": "text/javascript", "lease-row.js": "text/javascript", "svg.js": "text/javascript", "style.css": "text/css", "console-state.js": "text/javascript", "sse.mjs": "text/javascript"} {
		if res := get(t, s.url+"/ui/"+name); res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) || res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: %d %q", name, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	for _, p := range []string{"/ui/nothing.js", "/ui/console.html", "/ui/../go.mod", "/ui/embed.go", "/ui/service/sse.mjs", "/ui/api/other"} {
		if res := get(t, s.url+p); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s answered %d, want 404", p, res.StatusCode)
		}
	}
	res, err := http.Post(s.url+"/ui/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/ answered %d, want 405", res.StatusCode)
	}
	// Without -ui-gates there is nothing to relay: 501, as for a call a server does not offer.
	if res := get(t, s.url+"/ui/api/rejections"); res.StatusCode != http.StatusNotImplemented {
		t.Errorf("/ui/api/rejections without -ui-gates: %d, want 501", res.StatusCode)
	}
}

// fakeGate serves a fence-proxy's refusal stream as SPEC30 has it: every
// refusal kept after ?after=, then the live ones; drop() ends the streams
// open; asked records each connection's after.
type fakeGate struct {
	mu    sync.Mutex
	kept  []string // the data of each refusal, seq = index+1
	live  chan struct{}
	drops chan struct{}
	asked chan uint64
}

func newFakeGate() *fakeGate {
	return &fakeGate{live: make(chan struct{}), drops: make(chan struct{}), asked: make(chan uint64, 16)}
}

func (g *fakeGate) add(resource, refused string, fence uint64, admitted string, admittedFence uint64) {
	g.mu.Lock()
	seq := len(g.kept) + 1
	g.kept = append(g.kept, fmt.Sprintf(`{"seq":%d,"at":%d,"resource":%q,"refusedHolderId":%q,"refusedFence":%d,"admittedHolderId":%q,"admittedFence":%d}`,
		seq, 1700000000000+seq, resource, refused, fence, admitted, admittedFence))
	close(g.live)
	g.live = make(chan struct{})
	g.mu.Unlock()
}

func (g *fakeGate) drop() {
	g.mu.Lock()
	close(g.drops)
	g.drops = make(chan struct{})
	g.mu.Unlock()
}

func (g *fakeGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != gateStreamPath {
		http.NotFound(w, r)
		return
	}
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	g.asked <- after
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for {
		g.mu.Lock()
		for ; after < uint64(len(g.kept)); after++ {
			fmt.Fprintf(w, "id: %d\nevent: rejected\ndata: %s\n\n", after+1, g.kept[after])
		}
		live, drops := g.live, g.drops
		g.mu.Unlock()
		w.(http.Flusher).Flush()
		select {
		case <-live:
		case <-drops:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// TestGateOverflowFrame: a gate's overflow frame ends the relay's read of
// its stream, to resume after the frame's resumeFrom (never before what
// the relay already had).
func TestGateOverflowFrame(t *testing.T) {
	g := &gateRelay{gates: []string{"http://gate"}}
	after := uint64(3)
	for _, c := range []struct{ from, want uint64 }{{9, 9}, {2, 9}} {
		err := g.frame(0, overflow.Event, fmt.Appendf(nil, `{"resumeFrom":%d}`, c.from), &after)
		if err == nil || after != c.want {
			t.Fatalf("an overflow at %d: %v, after %d, want an error and %d", c.from, err, after, c.want)
		}
	}
}

// sseReader reads a console's refusal stream frame by frame.
type sseReader struct {
	t  *testing.T
	br *bufio.Reader
}

type sseEvent struct {
	id, event string
	data      map[string]any
}

func (s *sseReader) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			s.t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && ev.event != "":
			return ev
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
				s.t.Fatal(err)
			}
		}
	}
}

// nextRefusal skips the status frames to the next refusal (or other event).
func (s *sseReader) nextRefusal() sseEvent {
	s.t.Helper()
	for {
		if ev := s.next(); ev.event != "status" {
			return ev
		}
	}
}

func openRejections(t *testing.T, url, token string) (*sseReader, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // against a hang only
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return &sseReader{t: t, br: bufio.NewReader(res.Body)}, res
}

// TestGateRelay: the coordinator follows a gate's refusal stream, resumes
// it after a drop without losing or repeating a refusal, and hands each
// page only the refusals of the resources its token sees, resuming a
// page from its last refusal.
func TestGateRelay(t *testing.T) {
	gate := newFakeGate()
	gs := httptest.NewServer(gate)
	t.Cleanup(gs.Close) // after the coordinator's, which ends the relay's connection
	gate.add("app/a", "w-1", 3, "w-2", 4)
	gate.add("other/b", "w-1", 5, "w-2", 6)
	file := writeTokens(t, filepath.Join(t.TempDir(), "tokens.json"), appTok, adminTok)
	s := start(t, "-memory", "-ui", "-ui-gates", gs.URL, "-auth", file)
	if a := <-gate.asked; a != 0 {
		t.Fatalf("the first connection asked after %d", a)
	}
	url := s.url + uiRejectionsPath
	if _, res := openRejections(t, url, ""); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", res.StatusCode)
	}
	if _, res := openRejections(t, url, unknownTok.token); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unknown token: %d", res.StatusCode)
	}
	page, res := openRejections(t, url, appTok.token)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the app token: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	hello := page.next()
	stream, _ := hello.data["stream"].(string)
	if hello.event != "hello" || stream == "" {
		t.Fatalf("first frame %+v, want hello", hello)
	}
	// The relay may have read the gate's history before or after this page
	// came: either way app/a comes, and other/b never.
	first := page.nextRefusal()
	if first.event != "rejected" || first.data["resource"] != "app/a" || first.data["gate"] != gs.URL || first.data["refusedHolderId"] != "w-1" ||
		first.data["refusedFence"] != float64(3) || first.data["admittedFence"] != float64(4) || first.data["gateSeq"] != float64(1) {
		t.Fatalf("first refusal %+v", first)
	}
	gate.add("app/c", "w-3", 7, "w-4", 8)
	second := page.nextRefusal()
	if second.data["resource"] != "app/c" {
		t.Fatalf("after app/a came %+v, want app/c (other/b is outside the token's scope)", second)
	}
	admin, _ := openRejections(t, url, adminTok.token)
	admin.next()
	var seen []any
	for range 3 {
		seen = append(seen, admin.nextRefusal().data["resource"])
	}
	if fmt.Sprint(seen) != "[app/a other/b app/c]" {
		t.Fatalf("the admin token saw %v", seen)
	}

	// A dropped gate stream is resumed after the last refusal read.
	gate.drop()
	if a := <-gate.asked; a != 3 {
		t.Fatalf("the reconnection asked after %d, want 3", a)
	}
	gate.add("app/d", "w-5", 9, "w-6", 10)
	if ev := page.nextRefusal(); ev.data["resource"] != "app/d" {
		t.Fatalf("after the gate's drop came %+v, want app/d once", ev)
	}

	// A page that reconnects gets what followed its last refusal.
	again, _ := openRejections(t, url+"?after="+second.id+"&stream="+stream, appTok.token)
	if h := again.next(); h.event != "hello" {
		t.Fatalf("first frame %+v", h)
	}
	if ev := again.nextRefusal(); ev.event != "rejected" || ev.data["resource"] != "app/d" {
		t.Fatalf("the resumed page got %+v first, want app/d", ev)
	}
	// One that names another stream (a coordinator restarted since) gets a
	// reset, then all that is kept.
	other, _ := openRejections(t, url+"?after="+second.id+"&stream=elsewhere", appTok.token)
	other.next()
	if ev := other.nextRefusal(); ev.event != "reset" {
		t.Fatalf("a page of another stream got %+v, want a reset", ev)
	}
	if ev := other.nextRefusal(); ev.data["resource"] != "app/a" {
		t.Fatalf("after the reset came %+v, want app/a", ev)
	}
	if _, res := openRejections(t, url+"?after=x", appTok.token); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("?after=x answered %d", res.StatusCode)
	}
}
