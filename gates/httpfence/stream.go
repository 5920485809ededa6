package httpfence

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/internal/sse"
)

// Defaults of the refusal stream's bounds (Options).
const (
	DefaultRejectionHistory = 1024
	DefaultMaxStreams       = 64
	DefaultStreamBuffer     = 256
	// PingInterval is how often an idle refusal stream gets a ": ping"
	// comment line, which keeps proxies and load balancers from closing it.
	PingInterval = 15 * time.Second
)

// StreamedRejection is one event of GET /.lease-fence/rejections/stream:
// a refusal, with its sequence number across all resources (Seq; the
// per-resource number of the state file is not carried here) and the time
// it was made, in Unix milliseconds.
type StreamedRejection struct {
	Seq              uint64 `json:"seq"`
	At               int64  `json:"at"`
	Resource         string `json:"resource"`
	RefusedHolderID  string `json:"refusedHolderId"`
	RefusedFence     uint64 `json:"refusedFence"`
	AdmittedHolderID string `json:"admittedHolderId"`
	AdmittedFence    uint64 `json:"admittedFence"`
}

// feed is the proxy's refusals in order, for the streams: a ring of the
// newest (history), and a bounded buffer per stream. A stream whose buffer
// is full when a refusal comes is cut off (overflow): nothing waits for a
// slow reader, and no reader holds more than its buffer.
type feed struct {
	mu      sync.Mutex
	ring    []StreamedRejection // the newest refusals, oldest first from at
	at      int                 // index of the oldest in ring once it is full
	last    uint64              // seq of the newest refusal (0: none yet)
	history int
	buffer  int
	max     int
	subs    map[*stream]struct{}
	done    chan struct{} // closed by closeAll
}

// stream is one reader of the feed.
type stream struct {
	ch   chan StreamedRejection
	over chan struct{} // closed when the feed cut the stream off
}

func newFeed(first uint64, history, buffer, maxStreams int) *feed {
	return &feed{last: first, history: history, buffer: buffer, max: maxStreams, subs: map[*stream]struct{}{}, done: make(chan struct{})}
}

// publish numbers r and hands it to every stream.
func (f *feed) publish(r StreamedRejection) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last++
	r.Seq = f.last
	if len(f.ring) < f.history {
		f.ring = append(f.ring, r)
	} else {
		f.ring[f.at] = r
		f.at = (f.at + 1) % f.history
	}
	for s := range f.subs {
		select {
		case s.ch <- r:
		default:
			close(s.over)
			delete(f.subs, s)
		}
	}
}

// subscribe returns a stream of the refusals after seq after, and the kept
// ones it must be sent first; reset is the seq of the oldest refusal kept
// (or the next one) when refusals after after were dropped, else 0. A
// stream beyond the cap is refused (ok false).
func (f *feed) subscribe(after uint64) (s *stream, backlog []StreamedRejection, reset uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= f.max {
		return nil, nil, 0, false
	}
	oldest := f.last + 1
	if len(f.ring) > 0 {
		oldest = f.ring[f.at].Seq
	}
	if after+1 < oldest || after > f.last {
		// Dropped from the history, or a seq this proxy never gave (one
		// from before a restart whose refusals are not all known).
		reset, after = oldest, oldest-1
	}
	for i := range len(f.ring) {
		r := f.ring[(f.at+i)%len(f.ring)]
		if r.Seq > after {
			backlog = append(backlog, r)
		}
	}
	s = &stream{ch: make(chan StreamedRejection, f.buffer), over: make(chan struct{})}
	f.subs[s] = struct{}{}
	return s, backlog, reset, true
}

func (f *feed) unsubscribe(s *stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, s)
}

// closeAll ends every stream, and refuses new ones (the proxy is shutting
// down).
func (f *feed) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	f.max = 0
}

// serveStream answers GET /.lease-fence/rejections/stream[?after=SEQ].
func (p *Proxy) serveStream(w http.ResponseWriter, r *http.Request, after uint64) {
	s, backlog, reset, ok := p.feed.subscribe(after)
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too_many_streams", "the proxy serves "+strconv.Itoa(p.feed.max)+" refusal streams already", nil)
		return
	}
	defer p.feed.unsubscribe(s)
	out := sse.Start(w, 0)
	last := after
	if reset != 0 {
		out.Event(0, "reset", map[string]uint64{"oldest": reset})
		last = reset - 1
	}
	for _, ev := range backlog {
		out.Event(ev.Seq, "rejected", ev)
		last = ev.Seq
	}
	if !out.Flush() {
		return
	}
	ping := time.NewTicker(p.pingInterval)
	defer ping.Stop()
	for {
		select {
		case ev := <-s.ch:
			out.Event(ev.Seq, "rejected", ev)
			last = ev.Seq
		case <-s.over:
			out.Overflow(last)
			return
		case <-ping.C:
			out.Comment("ping")
		case <-r.Context().Done():
			return
		case <-p.feed.done:
			return
		}
		if !out.Flush() {
			return
		}
	}
}
