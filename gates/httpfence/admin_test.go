//go:build !js

package httpfence_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	"github.com/lease-fence/lease-fence/test/rig/promtest"
	"github.com/lease-fence/lease-fence/test/rig/roundtrip"
)

func (e *env) floorsPage(t *testing.T, query string) httpfence.FloorsPage {
	t.Helper()
	a := e.do(t, "GET", "/.lease-fence/floors"+query, "")
	if a.status != http.StatusOK {
		t.Fatalf("GET floors%s: %d %s", query, a.status, a.body)
	}
	var p httpfence.FloorsPage
	if err := json.Unmarshal([]byte(a.body), &p); err != nil {
		t.Fatalf("floors%s: %v in %s", query, err, a.body)
	}
	return p
}

// Paged to the end while floors are raised and resources are added between
// and during the pages: every resource that existed before the first page
// is listed exactly once, with a floor not below the one it had then; the
// pages come in resource order, each at most its limit; the last has no
// next cursor.
func TestFloorsArePagedToTheEndWhileFloorsChange(t *testing.T) {
	st := openFastStore(t)
	e := newEnv(t, httpfence.Options{Store: st})
	ctx := context.Background()
	const n = 2500
	name := func(i int) string { return fmt.Sprintf("r%05d", i) }
	for i := range n {
		if err := st.Admit(ctx, fence.Token{Resource: name(i), HolderID: "a", Fence: uint64(i%7 + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Raise an existing floor, and add a resource between two.
			if err := st.Admit(ctx, fence.Token{Resource: name(i * 37 % n), HolderID: "b", Fence: uint64(100 + i)}); err != nil {
				t.Error(err)
				return
			}
			if err := st.Admit(ctx, fence.Token{Resource: name(i*53%n) + "-new", HolderID: "c", Fence: 1}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	seen := map[string]int{}
	last := ""
	pages := 0
	for cursor, limit := "", 97; ; limit = 97 + pages%3*400 {
		q := "?limit=" + strconv.Itoa(limit)
		if cursor != "" {
			q += "&after=" + url.QueryEscape(cursor)
		}
		p := e.floorsPage(t, q)
		pages++
		if len(p.Floors) > limit {
			t.Fatalf("page %d has %d floors, limit %d", pages, len(p.Floors), limit)
		}
		for _, f := range p.Floors {
			if f.Resource <= last {
				t.Fatalf("page %d: %q after %q: not in order", pages, f.Resource, last)
			}
			last = f.Resource
			seen[f.Resource]++
			if i, err := strconv.Atoi(strings.TrimPrefix(f.Resource, "r")); err == nil && f.Floor < uint64(i%7+1) {
				t.Fatalf("%s listed with floor %d, below its %d", f.Resource, f.Floor, i%7+1)
			}
		}
		if p.Next == "" {
			break
		}
		if len(p.Floors) != limit || p.Next != last {
			t.Fatalf("page %d: %d floors and next %q (last %q): a next cursor on a short page, or not the last resource", pages, len(p.Floors), p.Next, last)
		}
		cursor = p.Next
	}
	close(stop)
	wg.Wait()
	for i := range n {
		if seen[name(i)] != 1 {
			t.Fatalf("%s listed %d times, want once", name(i), seen[name(i)])
		}
	}
	for r, k := range seen {
		if k != 1 {
			t.Fatalf("%s listed %d times", r, k)
		}
	}
	if pages < n/500 {
		t.Fatalf("%d pages for %d resources", pages, n)
	}
}

// A prefix lists only the resources that start with it, and the default
// page is MaxFloorsPage.
func TestFloorsPrefixAndDefaultLimit(t *testing.T) {
	st := openFastStore(t)
	e := newEnv(t, httpfence.Options{Store: st})
	ctx := context.Background()
	for i := range httpfence.MaxFloorsPage + 5 {
		if err := st.Admit(ctx, fence.Token{Resource: fmt.Sprintf("jobs/%05d", i), HolderID: "a", Fence: 3}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []string{"job", "jobs", "jobsx", "jobs0", "other/1", "deploy"} {
		if err := st.Admit(ctx, fence.Token{Resource: r, HolderID: "h", Fence: 9}); err != nil {
			t.Fatal(err)
		}
	}
	p := e.floorsPage(t, "?prefix=jobs/")
	if len(p.Floors) != httpfence.MaxFloorsPage || p.Next != "jobs/00999" || p.Floors[0] != (httpfence.FloorJSON{Resource: "jobs/00000", Floor: 3, HolderID: "a"}) {
		t.Fatalf("first page: %d floors, next %q, first %+v", len(p.Floors), p.Next, p.Floors[0])
	}
	p = e.floorsPage(t, "?prefix=jobs/&after="+url.QueryEscape(p.Next))
	if len(p.Floors) != 5 || p.Next != "" || p.Floors[4].Resource != "jobs/01004" {
		t.Fatalf("second page: %+v", p)
	}
	p = e.floorsPage(t, "?prefix=o")
	if len(p.Floors) != 1 || p.Floors[0] != (httpfence.FloorJSON{Resource: "other/1", Floor: 9, HolderID: "h"}) || p.Next != "" {
		t.Fatalf("prefix o: %+v", p)
	}
	p = e.floorsPage(t, "?prefix=nothing")
	if len(p.Floors) != 0 || p.Next != "" {
		t.Fatalf("prefix nothing: %+v", p)
	}
}

// Bad queries on the proxy's endpoints are answered 400 bad_query in the
// error shape, and change nothing.
func TestAdminBadQueriesAre400(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	if a := e.do(t, "POST", "/w", "", hdr("r", "a", 5)); a.status != http.StatusCreated {
		t.Fatalf("write: %d %s", a.status, a.body)
	}
	long := strings.Repeat("x", fence.MaxIDBytes+1)
	for _, q := range []string{
		"/.lease-fence/floors?limit=0",
		"/.lease-fence/floors?limit=1001",
		"/.lease-fence/floors?limit=ten",
		"/.lease-fence/floors?limit=1&limit=2",
		"/.lease-fence/floors?prefix=" + long,
		"/.lease-fence/floors?after=" + long,
		"/.lease-fence/floors?resource=r",
		"/.lease-fence/floors?%zz",
		"/.lease-fence/healthz?verbose=1",
		"/.lease-fence/metrics?x=1",
		"/.lease-fence/rejections/stream?after=-1",
		"/.lease-fence/rejections/stream?after=1&follow=1",
		"/.lease-fence/floor?resource=r&after=1",
		"/.lease-fence/rejections?resource=r&limit=0",
		"/.lease-fence/rejections?resource=r&unknown=1",
	} {
		t.Run(q[len("/.lease-fence/"):min(len(q), 50)], func(t *testing.T) {
			proxyError(t, e.do(t, "GET", q, ""), http.StatusBadRequest, "bad_query")
		})
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/.lease-fence/rejections/stream", nil)
	req.Header.Set("Last-Event-ID", "seven")
	resp, _ := roundtrip.Read(t, e.srv.Client().Do, req)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad Last-Event-ID: %d", resp.StatusCode)
	}
	proxyError(t, e.do(t, "POST", "/.lease-fence/floors", ""), http.StatusMethodNotAllowed, "method_not_allowed")
	if f := e.floor(t, "r"); f != 5 {
		t.Fatalf("floor %d, want 5", f)
	}
	if got := e.up.seen(); len(got) != 1 {
		t.Fatalf("upstream saw %d requests, want the one write", len(got))
	}
}

// brokenFloorStore is a store whose reads fail, as a closed database's do.
type brokenFloorStore struct{ *sqlfence.Store }

func (brokenFloorStore) Floor(context.Context, string) (uint64, error) {
	return 0, &sqlfence.DBError{Op: "reading the floor", Err: errors.New("sql: database is closed")}
}

func TestHealthz(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	if a := e.do(t, "GET", "/.lease-fence/healthz", ""); a.status != http.StatusOK || a.body != `{"status":"ok"}`+"\n" {
		t.Fatalf("healthy: %d %s", a.status, a.body)
	}
	e.proxy.Drain()
	proxyError(t, e.do(t, "GET", "/.lease-fence/healthz", ""), http.StatusServiceUnavailable, "shutting_down")

	broken := newEnv(t, httpfence.Options{Store: brokenFloorStore{openStore(t)}})
	b := proxyError(t, broken.do(t, "GET", "/.lease-fence/healthz", ""), http.StatusServiceUnavailable, "store_failed")
	if !strings.Contains(b.Error.Message, "closed") {
		t.Fatalf("message %q", b.Error.Message)
	}
	if got := append(e.up.seen(), broken.up.seen()...); len(got) != 0 {
		t.Fatalf("healthz was forwarded: %+v", got)
	}
}

// scrape reads GET /.lease-fence/metrics with Prometheus's text parser.
func (e *env) scrape(t *testing.T) promtest.Families {
	t.Helper()
	a := e.do(t, "GET", "/.lease-fence/metrics", "")
	if a.status != http.StatusOK {
		t.Fatalf("metrics: %d %s", a.status, a.body)
	}
	fams, err := promtest.Parse(strings.NewReader(a.body))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// The metrics move with what the proxy does: a raise, an equal fence, a
// stale one, a write without a header, an upstream that fails; the
// write-in-flight gauges are back to zero.
func TestMetricsCountWhatHappens(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	before := e.scrape(t)
	for _, name := range []string{"leasefence_proxy_writes_forwarded_total", "leasefence_proxy_admitted_total", "leasefence_proxy_floor_raises_total", "go_goroutines", "process_cpu_seconds_total"} {
		if before.Value(name) < 0 {
			t.Fatalf("no %s before any write", name)
		}
	}
	e.do(t, "POST", "/w", "", hdr("r", "a", 5))
	e.do(t, "POST", "/w", "", hdr("r", "a", 5))
	e.do(t, "POST", "/w", "", hdr("r", "b", 6))
	e.do(t, "POST", "/w", "", hdr("r", "a", 5))
	e.do(t, "POST", "/w", "")
	e.do(t, "POST", "/.lease-fence/admit", "", hdr("r", "c", 7))
	e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
		if hj, ok := w.(http.Hijacker); ok {
			c, _, _ := hj.Hijack()
			c.Close()
		}
	})
	e.do(t, "POST", "/w", "", hdr("r", "c", 7))
	e.do(t, "GET", "/read", "")
	after := e.scrape(t)
	for _, c := range []struct {
		name   string
		labels []string
		delta  float64
	}{
		{"leasefence_proxy_writes_forwarded_total", nil, 4},
		{"leasefence_proxy_admitted_total", nil, 5},
		{"leasefence_proxy_floor_raises_total", nil, 3},
		{"leasefence_proxy_refusals_total", []string{"reason", "stale_fence"}, 1},
		{"leasefence_proxy_refusals_total", []string{"reason", "missing_fence"}, 1},
		{"leasefence_proxy_refusals_total", []string{"reason", "queue_full"}, 0},
		{"leasefence_proxy_upstream_errors_total", []string{"kind", "write"}, 1},
		{"leasefence_proxy_upstream_errors_total", []string{"kind", "read"}, 1},
		{"leasefence_proxy_write_duration_seconds", []string{"outcome", "forwarded"}, 4},
		{"leasefence_proxy_write_duration_seconds", []string{"outcome", "refused"}, 2},
		{"leasefence_proxy_writes_in_flight", []string{"state", "waiting"}, 0},
		{"leasefence_proxy_writes_in_flight", []string{"state", "forwarding"}, 0},
	} {
		b, a := before.Value(c.name, c.labels...), after.Value(c.name, c.labels...)
		if b < 0 || a < 0 || a-b != c.delta {
			t.Errorf("%s%v went from %v to %v, want +%v", c.name, c.labels, b, a, c.delta)
		}
	}
	if got := e.up.seen(); len(got) != 5 {
		t.Fatalf("upstream saw %d requests, want 5: four writes and the read (metrics are not forwarded)", len(got))
	}
}

// sseEvent is one event of a refusal stream.
type sseEvent struct {
	id, event, data string
}

// sseReader reads events from a stream's body, comment lines skipped.
type sseReader struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func (e *env) openStream(t *testing.T, query string, lastID string) *sseReader {
	t.Helper()
	// A guard against a hang only: the reads end after a minute.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/.lease-fence/rejections/stream"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseReader{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

func (s *sseReader) next(t *testing.T) sseEvent {
	t.Helper()
	var ev sseEvent
	for s.sc.Scan() {
		l := s.sc.Text()
		switch {
		case l == "" && ev.event != "":
			return ev
		case strings.HasPrefix(l, ":"):
		case strings.HasPrefix(l, "id: "):
			ev.id = l[4:]
		case strings.HasPrefix(l, "event: "):
			ev.event = l[7:]
		case strings.HasPrefix(l, "data: "):
			ev.data = l[6:]
		}
	}
	t.Fatalf("the stream ended: %v", s.sc.Err())
	return ev
}

func (s *sseReader) rejection(t *testing.T) httpfence.StreamedRejection {
	t.Helper()
	ev := s.next(t)
	var r httpfence.StreamedRejection
	if ev.event != "rejected" || json.Unmarshal([]byte(ev.data), &r) != nil || ev.id != strconv.FormatUint(r.Seq, 10) {
		t.Fatalf("event %+v, want a rejected event whose id is its seq", ev)
	}
	return r
}

// refuse makes the proxy refuse holder's fence 1 on resource (whose floor
// is above it), through a write or an admit.
func (e *env) refuse(t *testing.T, resource, holder string, write bool) {
	t.Helper()
	path := "/.lease-fence/admit"
	if write {
		path = "/w"
	}
	if a := e.do(t, "POST", path, "", hdr(resource, holder, 1)); a.status != http.StatusConflict {
		t.Fatalf("a stale %s on %s: %d %s", path, resource, a.status, a.body)
	}
}

// A stream reader that disconnects and resumes (from the query's after, or
// the Last-Event-ID header) gets every refusal exactly once, in order,
// across resources, with the refusals made while it was away.
func TestRejectionStreamResumesExactlyOnce(t *testing.T) {
	const clock = 1_700_000_000_000
	e := newEnv(t, httpfence.Options{Now: func() time.Time { return time.UnixMilli(clock) }})
	for _, r := range []string{"r1", "r2", "r3"} {
		if a := e.do(t, "POST", "/.lease-fence/admit", "", hdr(r, "owner-"+r, 9)); a.status != http.StatusOK {
			t.Fatal(a.body)
		}
	}
	var got []httpfence.StreamedRejection
	made := 0
	refuse := func() {
		made++
		e.refuse(t, "r"+strconv.Itoa(made%3+1), "h"+strconv.Itoa(made), made%2 == 0)
	}
	for round, resume := range []func(last uint64) *sseReader{
		func(uint64) *sseReader { return e.openStream(t, "", "") },
		func(last uint64) *sseReader { return e.openStream(t, "?after="+strconv.FormatUint(last, 10), "") },
		func(last uint64) *sseReader { return e.openStream(t, "", strconv.FormatUint(last, 10)) },
		func(last uint64) *sseReader { return e.openStream(t, "?after="+strconv.FormatUint(last, 10), "999") },
	} {
		var last uint64
		if len(got) > 0 {
			last = got[len(got)-1].Seq
		}
		s := resume(last)
		// Some refusals made while it is connected, read as they come.
		for range 3 {
			refuse()
			got = append(got, s.rejection(t))
		}
		// Some made after it has read its last event and before it goes.
		for range 2 {
			refuse()
		}
		if round < 3 {
			got = append(got, s.rejection(t))
		}
		s.resp.Body.Close()
		refuse()
	}
	s := e.openStream(t, "?after="+strconv.FormatUint(got[len(got)-1].Seq, 10), "")
	for len(got) < made {
		got = append(got, s.rejection(t))
	}
	for i, r := range got {
		if r.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: %+v", i, r.Seq, got)
		}
		want := httpfence.StreamedRejection{Seq: uint64(i + 1), At: clock, Resource: "r" + strconv.Itoa((i+1)%3+1),
			RefusedHolderID: "h" + strconv.Itoa(i+1), RefusedFence: 1, AdmittedHolderID: "owner-r" + strconv.Itoa((i+1)%3+1), AdmittedFence: 9}
		if r != want {
			t.Fatalf("event %d: %+v, want %+v", i, r, want)
		}
	}
}

// A resume after refusals that the history no longer keeps starts with a
// reset naming the oldest kept, then the kept ones in order.
func TestRejectionStreamResetWhenHistoryWasDropped(t *testing.T) {
	e := newEnv(t, httpfence.Options{RejectionHistory: 4})
	e.do(t, "POST", "/.lease-fence/admit", "", hdr("r", "owner", 9))
	for i := range 10 {
		e.refuse(t, "r", "h"+strconv.Itoa(i+1), false)
	}
	s := e.openStream(t, "?after=2", "")
	if ev := s.next(t); ev.event != "reset" || ev.data != `{"oldest":7}` {
		t.Fatalf("first event %+v, want reset to 7", ev)
	}
	for want := uint64(7); want <= 10; want++ {
		if r := s.rejection(t); r.Seq != want || r.RefusedHolderID != "h"+strconv.FormatUint(want, 10) {
			t.Fatalf("got %+v, want seq %d", r, want)
		}
	}
	// A resume within the history has no reset.
	s = e.openStream(t, "?after=8", "")
	if r := s.rejection(t); r.Seq != 9 {
		t.Fatalf("got %+v, want seq 9", r)
	}
}

// The stream's numbers continue from the refusals already in the state
// file: a proxy started again does not number a refusal as an earlier one.
func TestRejectionStreamSeqContinuesAcrossRestarts(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	for i, tok := range []fence.Token{{Resource: "r", HolderID: "a", Fence: 5}, {Resource: "r", HolderID: "b", Fence: 4}, {Resource: "q", HolderID: "a", Fence: 5}, {Resource: "q", HolderID: "b", Fence: 4}} {
		err := st.Admit(ctx, tok)
		if (i%2 == 1) != fence.IsStale(err) {
			t.Fatalf("Admit(%v) = %v", tok, err)
		}
	}
	e := newEnv(t, httpfence.Options{Store: st})
	s := e.openStream(t, "?after=1", "")
	if ev := s.next(t); ev.event != "reset" || ev.data != `{"oldest":3}` {
		t.Fatalf("first event %+v, want a reset to 3 (refusals 1 and 2 were made before this proxy started)", ev)
	}
	e.refuse(t, "r", "c", true)
	if r := s.rejection(t); r.Seq != 3 || r.RefusedHolderID != "c" {
		t.Fatalf("got %+v, want seq 3", r)
	}
}

// The cap on streams: one more is answered 503 too_many_streams; a stream
// that ends frees its place; Drain ends the streams.
func TestRejectionStreamCapAndDrain(t *testing.T) {
	e := newEnv(t, httpfence.Options{MaxStreams: 2})
	a, b := e.openStream(t, "", ""), e.openStream(t, "", "")
	proxyError(t, e.do(t, "GET", "/.lease-fence/rejections/stream", ""), http.StatusServiceUnavailable, "too_many_streams")
	a.resp.Body.Close()
	waitFor(t, "the closed stream to leave", func() bool { return e.proxy.Streams() == 1 })
	c := e.openStream(t, "", "")
	e.proxy.Drain()
	for _, s := range []*sseReader{b, c} {
		for s.sc.Scan() {
			if l := s.sc.Text(); l != "" && !strings.HasPrefix(l, ":") {
				t.Fatalf("a drained stream sent %q", l)
			}
		}
	}
	proxyError(t, e.do(t, "GET", "/.lease-fence/rejections/stream", ""), http.StatusServiceUnavailable, "too_many_streams")
}

// blockingWriter is a ResponseWriter whose writes wait until released: a
// reader that stopped reading, with its connection's buffers full.
type blockingWriter struct {
	header  http.Header
	mu      sync.Mutex
	out     strings.Builder
	writes  int
	free    int           // writes let through before blocking
	blocked chan struct{} // closed when a write blocks
	release chan struct{}
}

func (w *blockingWriter) Header() http.Header { return w.header }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Flush()              {}
func (w *blockingWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	block := w.writes > w.free
	w.mu.Unlock()
	if block {
		select {
		case <-w.blocked:
		default:
			close(w.blocked)
		}
		<-w.release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.WriteString(string(b))
}

// A reader too slow for its buffer is closed with one overflow event that
// says where to resume, while the proxy holds no more than the buffer for
// it and the history; resuming from there gives the rest exactly once.
func TestRejectionStreamSlowReaderOverflows(t *testing.T) {
	const buffer, history = 4, 64
	e := newEnv(t, httpfence.Options{StreamBuffer: buffer, RejectionHistory: history})
	e.do(t, "POST", "/.lease-fence/admit", "", hdr("r", "owner", 9))
	w := &blockingWriter{header: http.Header{}, free: 1, blocked: make(chan struct{}), release: make(chan struct{})}
	req := httptest.NewRequest("GET", "/.lease-fence/rejections/stream", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.proxy.ServeHTTP(w, req)
	}()
	waitFor(t, "the stream to start", func() bool { return e.proxy.Streams() == 1 })
	e.refuse(t, "r", "h1", false) // the first event is written...
	e.refuse(t, "r", "h2", false) // ...its writer blocks on the second
	<-w.blocked
	for i := 3; e.proxy.Streams() == 1; i++ {
		if i > 3*history {
			t.Fatalf("the stream was not cut off after %d refusals with a buffer of %d", i, buffer)
		}
		e.refuse(t, "r", "h"+strconv.Itoa(i), false)
	}
	for i := 0; i < history; i++ {
		e.refuse(t, "r", "x"+strconv.Itoa(i), false)
	}
	if h := e.proxy.HistoryLen(); h != history {
		t.Fatalf("history holds %d refusals, want %d", h, history)
	}
	close(w.release)
	<-done
	out := w.out.String()
	blocks := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
	lastBlock := blocks[len(blocks)-1]
	if !strings.HasPrefix(lastBlock, "event: overflow\ndata: {\"resumeFrom\":") {
		t.Fatalf("the stream ended with %q, want an overflow event", lastBlock)
	}
	if n := len(blocks) - 1; n > buffer+2 {
		t.Fatalf("%d events were written to a reader with a buffer of %d", n, buffer)
	}
	var over struct{ ResumeFrom uint64 }
	_ = json.Unmarshal([]byte(strings.TrimPrefix(lastBlock, "event: overflow\ndata: ")), &over)
	if want := "id: " + strconv.FormatUint(over.ResumeFrom, 10) + "\n"; !strings.HasPrefix(blocks[len(blocks)-2], want) {
		t.Fatalf("resumeFrom %d is not the last event written (%q)", over.ResumeFrom, blocks[len(blocks)-2])
	}
	// Resuming gives the rest that the history keeps, in order, once.
	s := e.openStream(t, "?after="+strconv.FormatUint(over.ResumeFrom, 10), "")
	first := s.next(t)
	next := over.ResumeFrom + 1
	if first.event == "reset" {
		var rs struct{ Oldest uint64 }
		_ = json.Unmarshal([]byte(first.data), &rs)
		next = rs.Oldest
		first = s.next(t)
	}
	var r httpfence.StreamedRejection
	if err := json.Unmarshal([]byte(first.data), &r); err != nil || r.Seq != next {
		t.Fatalf("resumed with %+v, want seq %d", first, next)
	}
}
