package service

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lease-fence/lease-fence/service/wire"
)

// Events.
//
// Every decision the Service makes durable publishes its events (publish):
// granted, renewed, released, expired (derived from the entry before and
// after the decision, in decisionEvents), waiting and left (from the
// queues), and whatever a decision adds itself (outcome.ended names the
// end of a live lease other than a release, such as a revocation;
// outcome.extra carries events no entry change shows, such as a
// proclamation). publish numbers them in this process's stream, keeps the
// newest in a bounded history for resumes, and hands them to each watcher
// whose prefix and scope they match (Watch).

// Defaults of the watch limits (Config).
const (
	DefaultWatchBuffer         = 1024
	DefaultWatchHistory        = 10_000
	DefaultMaxWatchers         = 1000
	DefaultMaxWatchersPerToken = 100
)

// EventSharer is a Store shared with other coordinator processes that
// carries events between them (pgstore: LISTEN/NOTIFY), so that each
// process's stream holds the decisions of all of them.
type EventSharer interface {
	// SendEvents returns the function that sends this process's own
	// events to the others (while some listen). It must not block.
	SendEvents() (send func(wire.Event))
	// ReceiveEvents starts delivering the events other processes send to
	// receive (from any goroutine, in the order each process sent them).
	// It is called once, at the first watch.
	ReceiveEvents(receive func(wire.Event))
}

// ExpiryReporter is a Store whose Sweep tells of each live-looking lease
// record it clears because it expired, so that the Service publishes its
// expired event. fn is called once the sweep's change is stored.
type ExpiryReporter interface {
	ReportExpired(fn func(expired Entry))
}

// hub is the event stream of one Service.
type hub struct {
	mu      sync.Mutex
	stream  string
	seq     uint64
	hist    []wire.Event // a ring of at most history events: hist[start] is the oldest
	start   int
	history int
	buffer  int
	max     int
	perTok  int
	all     map[*Watch]struct{}
	byOwner map[string]int
	stopped bool
	share   func(wire.Event) // to the other processes, once started
}

func (h *hub) init(buffer, history, maxW, perToken int) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	h.stream = hex.EncodeToString(b[:])
	h.buffer, h.history, h.max, h.perTok = cmp.Or(buffer, DefaultWatchBuffer), cmp.Or(history, DefaultWatchHistory),
		cmp.Or(maxW, DefaultMaxWatchers), cmp.Or(perToken, DefaultMaxWatchersPerToken)
	h.all, h.byOwner = map[*Watch]struct{}{}, map[string]int{}
}

// publish numbers ev, keeps it in the history and hands it to the
// watchers it matches; local events also go to the other processes.
func (h *hub) publish(ev wire.Event, local bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	ev.Seq = h.seq
	if ev.At == 0 {
		ev.At = time.Now().UnixMilli()
	}
	if len(h.hist) < h.history {
		h.hist = append(h.hist, ev)
	} else {
		h.hist[h.start] = ev
		h.start = (h.start + 1) % len(h.hist)
	}
	for w := range h.all {
		if !w.matches(ev.Resource) {
			continue
		}
		select {
		case w.ch <- ev:
			w.last = ev.Seq
		default:
			// Too slow: it gets its overflow frame once it has read
			// what it was sent, and is closed.
			w.overflow = true
			h.drop(w)
		}
	}
	if local && h.share != nil {
		out := ev
		out.Seq, out.Waiters = 0, nil
		h.share(out)
	}
}

// drop removes w and closes its channel (with h.mu held).
func (h *hub) drop(w *Watch) {
	if w.closed {
		return
	}
	w.closed = true
	delete(h.all, w)
	if w.owner != "" {
		if h.byOwner[w.owner]--; h.byOwner[w.owner] <= 0 {
			delete(h.byOwner, w.owner)
		}
	}
	close(w.ch)
}

// stop closes every watcher and refuses new ones.
func (h *hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	for w := range h.all {
		h.drop(w)
	}
}

// Watch is one watcher of a Service's events: its first frame (Hello),
// the events of the history it resumes from (Replay), then the events as
// they are published (Events). Close it when done.
type Watch struct {
	h      *hub
	owner  string
	prefix string
	allow  func(string) bool
	ch     chan wire.Event
	hello  wire.Hello
	replay []wire.Event
	// Under h.mu: the last seq put in ch (or, before any, the stream's
	// seq when the watch began: every matching event up to it is in
	// replay), and whether the buffer overflowed.
	last     uint64
	overflow bool
	closed   bool
}

func (w *Watch) matches(resource string) bool {
	return strings.HasPrefix(resource, w.prefix) && (w.allow == nil || w.allow(resource))
}

// Hello is the watch's first frame.
func (w *Watch) Hello() wire.Hello { return w.hello }

// Replay returns the events of the history after the request's afterSeq
// (when Hello.Resumed), to send before Events.
func (w *Watch) Replay() []wire.Event { return w.replay }

// Events delivers the events published after the watch began. It is
// closed when the watcher's buffer overflowed (Overflow), or when the
// Service stops (StopWaiting), or by Close.
func (w *Watch) Events() <-chan wire.Event { return w.ch }

// Overflow reports, once Events is closed, whether it closed because the
// buffer filled, and the last sequence number the watcher was sent (to
// resume from).
func (w *Watch) Overflow() (resumeFrom uint64, overflowed bool) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.last, w.overflow
}

// Close ends the watch.
func (w *Watch) Close() {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	w.h.drop(w)
}

// Stream returns the id of the Service's event stream and the last
// sequence number assigned in it.
func (s *Service) Stream() (id string, seq uint64) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.h.stream, s.h.seq
}

// Watch starts a watcher of the events on resources under q.Prefix that
// allow accepts (nil: all), resuming after q.AfterSeq if q.Stream is this
// Service's stream and the history still holds what follows it. caller's
// token is counted against the limit of watchers per token. Too many
// watchers are refused: 503 too_many_watchers, 429 too_many_token_watchers.
func (s *Service) Watch(q wire.WatchRequest, caller wire.Caller, allow func(string) bool) (*Watch, error) {
	s.startSharing()
	h := &s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopped:
		return nil, refusal(errStopped)
	case len(h.all) >= h.max:
		return nil, refuse(wire.RefusedTooManyWatchers, "the coordinator has its maximum of "+strconv.Itoa(h.max)+" watchers; retry later")
	case caller.Name != "" && h.byOwner[caller.Name] >= h.perTok:
		return nil, refuse(wire.RefusedTooManyTokenWatchers, "the token "+quote(caller.Name)+" has its maximum of "+
			strconv.Itoa(h.perTok)+" watchers; other tokens are not affected")
	}
	w := &Watch{h: h, owner: caller.Name, prefix: q.Prefix, allow: allow, ch: make(chan wire.Event, h.buffer), last: h.seq}
	w.hello = wire.Hello{Stream: h.stream, Seq: h.seq}
	oldest := h.seq - uint64(len(h.hist)) // the last seq no longer held
	if q.AfterSeq != nil && q.Stream == h.stream && *q.AfterSeq >= oldest && *q.AfterSeq <= h.seq {
		w.hello.Resumed = true
		for i := *q.AfterSeq - oldest; i < uint64(len(h.hist)); i++ {
			if ev := h.hist[(h.start+int(i))%len(h.hist)]; w.matches(ev.Resource) {
				w.replay = append(w.replay, ev)
			}
		}
	}
	h.all[w] = struct{}{}
	if w.owner != "" {
		h.byOwner[w.owner]++
	}
	return w, nil
}

// Watchers returns how many watchers are open.
func (s *Service) Watchers() int {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return len(s.h.all)
}

// startSharing starts receiving the events of the other processes that
// share the store, at the first watch (until then this process does not
// listen for them).
func (s *Service) startSharing() {
	sh, ok := storeAs[EventSharer](s.store)
	if !ok {
		return
	}
	s.shareOnce.Do(func() {
		sh.ReceiveEvents(func(ev wire.Event) { s.h.publish(ev, false) })
	})
}

// publishOutcome publishes the events of a durable decision, once.
func (s *Service) publishOutcome(o *outcome) {
	if o.published {
		return
	}
	o.published = true
	b, f := &o.before, &o.final
	waiters := 0
	if o.q != nil {
		waiters = len(o.snapshot) - len(o.skipped) - len(o.refused)
		if o.served != nil {
			waiters--
		}
		if o.removed != nil {
			waiters--
		}
	}
	ev := func(typ string, e *Entry) wire.Event {
		return wire.Event{Type: typ, Resource: o.resource, HolderID: e.HolderID, Fence: e.Fence, Waiters: count(waiters)}
	}
	if f.Fence != b.Fence {
		if b.Fence != 0 {
			typ := cmp.Or(o.ended, wire.EventReleased)
			if o.now >= b.ExpiresAt {
				typ = wire.EventExpired
			}
			s.h.publish(ev(typ, b), true)
		}
		if f.Fence != 0 {
			g := ev(wire.EventGranted, f)
			g.RemainingMillis = f.ExpiresAt - o.now
			if f.Value != "" {
				v := f.Value
				g.Value = &v
			}
			s.h.publish(g, true)
		}
	} else if f.Fence != 0 && (o.renewed || f.ExpiresAt != b.ExpiresAt) {
		r := ev(wire.EventRenewed, f)
		r.RemainingMillis = f.ExpiresAt - o.now
		s.h.publish(r, true)
	}
	for _, x := range o.extra {
		x.Resource = o.resource
		s.h.publish(x, true)
	}
}

// queueEvent publishes a waiter's joining or leaving p's queue (with
// s.w.mu held).
func (s *Service) queueEvent(typ string, p *place) {
	s.h.publish(wire.Event{Type: typ, Resource: p.q.resource, HolderID: p.req.HolderID, Waiters: count(len(p.q.places))}, true)
}

// expiredBySweep publishes the expiry of a record the store's sweep
// cleared.
func (s *Service) expiredBySweep(e Entry) {
	s.h.publish(wire.Event{Type: wire.EventExpired, Resource: e.Resource, HolderID: e.HolderID, Fence: e.Fence}, true)
}

// smallCounts are the counts most events carry, shared (never written
// through) so that an event's Waiters costs no allocation.
var smallCounts = func() (a [64]int) {
	for i := range a {
		a[i] = i
	}
	return a
}()

// count returns a pointer to n.
func count(n int) *int {
	if n >= 0 && n < len(smallCounts) {
		return &smallCounts[n]
	}
	return &n
}
