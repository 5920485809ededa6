package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// watchClient is a client of srv that retries at once.
func watchClient(t *testing.T, url string) *client.Client {
	t.Helper()
	agent, _ := clock.NewManual("agent", clock.ManualOptions{Start: 50})
	return newClient(t, lease.ClientConfig{Clock: agent, HolderID: "watcher"}, client.Config{BaseURL: url})
}

// collect runs a watch in the background and hands over its frames.
func collect(ctx context.Context, c *client.Client, opts client.WatchOptions) <-chan client.Event {
	out := make(chan client.Event, 1024)
	go func() {
		defer close(out)
		for ev, err := range c.Watch(ctx, opts) {
			if err != nil {
				out <- client.Event{Event: wire.Event{Type: "error:" + err.Error()}}
				return
			}
			out <- ev
		}
	}()
	return out
}

func next(t *testing.T, ch <-chan client.Event) client.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(30 * time.Second): // against a hang only
		t.Fatal("no event")
	}
	panic("unreachable")
}

// TestWatchResumesAfterDisconnect: a client whose connection is cut
// connects again and resumes from the last event it got: every event is
// yielded exactly once, in sequence, with no second hello. A watch that
// names a stream that is not the server's starts with a hello that says
// it did not resume.
func TestWatchResumesAfterDisconnect(t *testing.T) {
	svc, _ := memService(t, 1000, Config{})
	srv := httptest.NewServer(httpapi.NewHandler(svc, httpapi.HandlerOptions{}))
	defer srv.Close()
	c := watchClient(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := collect(ctx, c, client.WatchOptions{Prefix: "job/"})
	hello := next(t, ch)
	if hello.Type != wire.EventHello || hello.Resumed || hello.Stream == "" {
		t.Fatalf("first frame %+v", hello)
	}
	seq := hello.Seq
	got := 0
	for round := range 5 {
		for i := range 40 {
			take(t, svc, "job/"+strconv.Itoa(round)+"/"+strconv.Itoa(i), "h")
			take(t, svc, "other/"+strconv.Itoa(round)+"/"+strconv.Itoa(i), "h")
			if i == 20 {
				srv.CloseClientConnections() // mid-round: events are published while it is away
			}
		}
		for range 40 {
			ev := next(t, ch)
			if ev.Type != wire.EventGranted || ev.Seq <= seq || !strings.HasPrefix(ev.Resource, "job/") {
				t.Fatalf("after seq %d: %+v", seq, ev)
			}
			seq = ev.Seq
			got++
		}
	}
	select {
	case ev := <-ch:
		t.Fatalf("an extra frame %+v", ev)
	default:
	}
	if got != 200 {
		t.Fatalf("%d events", got)
	}
	// Each seq once: the job/ and other/ grants alternate, so the job/
	// events are every other seq.
	ch2 := collect(ctx, c, client.WatchOptions{Prefix: "job/", Stream: "not-this-one", AfterSeq: 3})
	if h := next(t, ch2); h.Type != wire.EventHello || h.Resumed {
		t.Fatalf("a watch of another stream began with %+v", h)
	}
	// Resuming from an old seq of the right stream replays what followed.
	ch3 := collect(ctx, c, client.WatchOptions{Prefix: "job/", Stream: hello.Stream, AfterSeq: seq - 4})
	for _, want := range []uint64{seq - 2, seq} {
		if ev := next(t, ch3); ev.Seq != want || ev.Type != wire.EventGranted {
			t.Fatalf("replay gave %+v, want seq %d", ev, want)
		}
	}
}

// gatedWriter is a ResponseWriter whose writes after the first wait for
// open: a client that stopped reading.
type gatedWriter struct {
	hd     http.Header
	open   chan struct{}
	hello  chan struct{} // closed at the first write
	mu     sync.Mutex
	body   strings.Builder
	writes int
}

func (g *gatedWriter) Header() http.Header { return g.hd }
func (g *gatedWriter) WriteHeader(int)     {}
func (g *gatedWriter) Flush()              {}
func (g *gatedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.writes++
	first := g.writes == 1
	g.mu.Unlock()
	if first {
		close(g.hello)
	} else {
		<-g.open
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.body.Write(p)
}

// TestWatchOverflowClosesSlowWatcher: a watcher that does not read gets,
// once its buffer is full, what the buffer held, then one overflow frame
// naming the last seq it was sent, and is closed; the history stays
// within its bound.
func TestWatchOverflowClosesSlowWatcher(t *testing.T) {
	svc, _ := memService(t, 1000, Config{WatchBuffer: 4, WatchHistory: 16})
	h := httpapi.NewHandler(svc, httpapi.HandlerOptions{})
	g := &gatedWriter{hd: http.Header{}, open: make(chan struct{}), hello: make(chan struct{})}
	req := httptest.NewRequest(http.MethodPost, wire.WatchPath, strings.NewReader(`{}`))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(g, req)
	}()
	// The watcher is registered before its hello is written; then the
	// handler blocks on its next write and the events fill the buffer.
	select {
	case <-g.hello:
	case <-done:
		t.Fatal("the watch ended")
	}
	for i := range 100 {
		take(t, svc, "r"+strconv.Itoa(i), "h")
	}
	if svc.Watchers() != 0 {
		t.Fatal("the slow watcher is still open")
	}
	close(g.open)
	<-done
	out := g.body.String()
	// The buffer's 4, and the few the handler took before its write
	// blocked.
	if n := strings.Count(out, "event: granted"); n < 4 || n > 60 {
		t.Fatalf("%d events before the overflow:\n%s", n, out)
	}
	i := strings.LastIndex(out, "id: ")
	j := strings.Index(out[i:], "\n")
	last := out[i+4 : i+j]
	if !strings.HasSuffix(out, "event: overflow\ndata: {\"resumeFrom\":"+last+"}\n\n") {
		t.Fatalf("no overflow frame naming seq %s at the end:\n%s", last, out)
	}
	svc.h.mu.Lock()
	n := len(svc.h.hist)
	svc.h.mu.Unlock()
	if n != 16 {
		t.Fatalf("the history holds %d events", n)
	}
}

// TestServiceWatchOverflow: at the Service, the watcher gets exactly its
// buffer's worth, then its channel closes with the overflow reported.
func TestServiceWatchOverflow(t *testing.T) {
	svc, _ := memService(t, 1000, Config{WatchBuffer: 4})
	w, err := svc.Watch(wire.WatchRequest{}, wire.Caller{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		take(t, svc, "r"+strconv.Itoa(i), "h")
	}
	var seqs []uint64
	for ev := range w.Events() {
		seqs = append(seqs, ev.Seq)
	}
	from, over := w.Overflow()
	if len(seqs) != 4 || !over || from != seqs[3] {
		t.Fatalf("got %v, overflow %v from %d", seqs, over, from)
	}
	// Resuming from there replays the rest.
	w2, err := svc.Watch(wire.WatchRequest{Stream: w.Hello().Stream, AfterSeq: &from}, wire.Caller{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if r := w2.Replay(); !w2.Hello().Resumed || len(r) != 6 || r[0].Seq != from+1 {
		t.Fatalf("resume: %+v %+v", w2.Hello(), r)
	}
}

// TestWatcherLimits: beyond the watchers of one token, 429
// too_many_token_watchers; beyond all watchers, 503 too_many_watchers.
func TestWatcherLimits(t *testing.T) {
	svc, _ := memService(t, 10, Config{MaxWatchers: 2, MaxWatchersPerToken: 1})
	w1, err := svc.Watch(wire.WatchRequest{}, wire.Caller{Name: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	if _, err := svc.Watch(wire.WatchRequest{}, wire.Caller{Name: "t"}, nil); !isCode(err, wire.CodeTooManyTokenWatchers) || httpapi.ErrorOf(err).Status != 429 {
		t.Fatalf("a second watcher of t: %v", err)
	}
	w2, err := svc.Watch(wire.WatchRequest{}, wire.Caller{Name: "u"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.NewHandler(svc, httpapi.HandlerOptions{})
	if st, out := postTo(t, h, wire.WatchPath, `{}`, nil); st != 503 || !strings.Contains(out, wire.CodeTooManyWatchers) {
		t.Fatalf("a third watcher: %d %s", st, out)
	}
	w2.Close()
	w3, err := svc.Watch(wire.WatchRequest{}, wire.Caller{Name: "v"}, nil)
	if err != nil {
		t.Fatalf("a watcher once another closed: %v", err)
	}
	w3.Close()
}

// TestWatchEndsAtDrain: StopWaiting (the server's shutdown) ends every
// watch stream, and refuses new ones.
func TestWatchEndsAtDrain(t *testing.T) {
	svc, _ := memService(t, 10, Config{})
	srv := httptest.NewServer(httpapi.NewHandler(svc, httpapi.HandlerOptions{}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+wire.WatchPath, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	svc.StopWaiting()
	var buf strings.Builder
	if _, err := ioCopy(&buf, resp); err != nil {
		t.Fatalf("the stream did not end cleanly: %v", err)
	}
	if !strings.HasPrefix(buf.String(), "event: hello\ndata: {") {
		t.Fatalf("stream %q", buf.String())
	}
	if _, err := svc.Watch(wire.WatchRequest{}, wire.Caller{}, nil); err == nil {
		t.Fatal("a watch after the drain")
	}
}

func ioCopy(b *strings.Builder, resp *http.Response) (int64, error) {
	var n int64
	p := make([]byte, 4096)
	for {
		k, err := resp.Body.Read(p)
		b.Write(p[:k])
		n += int64(k)
		if err != nil {
			if err.Error() == "EOF" {
				return n, nil
			}
			return n, err
		}
	}
}
