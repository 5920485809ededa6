//go:build !js && !wasip1

package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/lease-fence/lease-fence/internal/sse"
	"github.com/lease-fence/lease-fence/internal/sse/overflow"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// The path of a fence-proxy's refusal stream (SPEC30: served by the proxy
// itself, resumed with ?after=SEQ).
const gateStreamPath = "/.lease-fence/rejections/stream"

// Limits of the relay.
const (
	defaultGateHistory = 1024 // refusals kept per gate, for the pages that resume
	relayBuffer        = 256  // refusals queued for one page; beyond, it gets an overflow
	maxRelayWatchers   = 64   // pages reading the refusals at once
	relayKeepalive     = 15 * time.Second
	gateRetryMin       = 100 * time.Millisecond
	gateRetryMax       = 5 * time.Second
	maxGateLine        = 64 << 10
)

// refusal is one refusal of a gate, as the proxy sends it, plus which gate
// sent it. Seq is the relay's own sequence (the SSE id of the console's
// stream, one sequence over every gate); GateSeq the proxy's.
type refusal struct {
	Seq              uint64 `json:"seq"`
	Gate             string `json:"gate"`
	GateSeq          uint64 `json:"gateSeq"`
	At               int64  `json:"at"`
	Resource         string `json:"resource"`
	RefusedHolderID  string `json:"refusedHolderId"`
	RefusedFence     uint64 `json:"refusedFence"`
	AdmittedHolderID string `json:"admittedHolderId"`
	AdmittedFence    uint64 `json:"admittedFence"`
}

// gateStatus is whether the relay is connected to a gate's stream.
type gateStatus struct {
	Gate  string `json:"gate"`
	Up    bool   `json:"up"`
	Error string `json:"error,omitzero"`
}

// gateRelay follows the refusal streams of fence-proxies (-ui-gates): one
// connection to each, resumed after the last refusal it had when it
// drops, each gate's last refusals kept in a ring; and hands them to the
// console's pages (GET /ui/api/rejections). It is started by
// newGateRelay and ended by stop, which waits for its loops.
type gateRelay struct {
	gates  []string // the URLs, as shown (no user info)
	client *http.Client
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	stream string // this process's id of the sequence (a page's ?stream=)

	mu       sync.Mutex
	seq      uint64      // the last relay sequence number given
	rings    [][]refusal // per gate, oldest first, at most history
	dropped  []uint64    // per gate, the last seq its ring let go
	history  int
	status   []gateStatus
	watchers map[*relayWatcher]struct{}
}

type relayWatcher struct {
	allow func(string) bool
	ch    chan any // refusal or gateStatus
	over  bool     // the buffer filled: close with an overflow
	last  uint64   // the last refusal seq queued
	quit  chan struct{}
}

// parseGates checks -ui-gates: http or https URLs with a host, no query,
// no fragment; user info is refused (it would be shown to every page).
func parseGates(list []string) ([]string, error) {
	var out []string
	for _, s := range list {
		u, err := url.Parse(s)
		switch {
		case err != nil:
			return nil, errors.New("-ui-gates: " + err.Error())
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
			return nil, errors.New("-ui-gates: " + strconv.Quote(s) + " is not an http:// or https:// URL with a host")
		case u.User != nil, u.RawQuery != "", u.Fragment != "":
			return nil, errors.New("-ui-gates: " + strconv.Quote(s) + ": give the proxy's base URL, without user info, query or fragment")
		}
		out = append(out, strings.TrimRight(u.String(), "/"))
	}
	return out, nil
}

// newGateRelay starts following gates.
func newGateRelay(gates []string, history int, client *http.Client, log *slog.Logger) *gateRelay {
	ctx, cancel := context.WithCancel(context.Background())
	g := &gateRelay{gates: gates, client: client, log: log, ctx: ctx, cancel: cancel, history: history,
		stream: randomID(), rings: make([][]refusal, len(gates)), dropped: make([]uint64, len(gates)), status: make([]gateStatus, len(gates)), watchers: map[*relayWatcher]struct{}{}}
	for i, u := range gates {
		g.status[i] = gateStatus{Gate: u, Error: "connecting"}
		g.done.Add(1)
		go func() { defer g.done.Done(); g.follow(i) }()
	}
	return g
}

// stop ends the connections to the gates and the pages' streams, and
// waits for the loops.
func (g *gateRelay) stop() {
	g.cancel()
	g.done.Wait()
}

// follow reads gate i's stream until stop, connecting again after a drop
// (from its last refusal), waiting longer after each failure in a row.
func (g *gateRelay) follow(i int) {
	var after uint64
	pause := gateRetryMin
	for g.ctx.Err() == nil {
		got, err := g.read(i, &after)
		if g.ctx.Err() != nil {
			return
		}
		g.setStatus(i, false, err)
		if got {
			pause = gateRetryMin
		}
		t := time.NewTimer(pause)
		select {
		case <-g.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(pause*2, gateRetryMax)
	}
}

// read connects once to gate i's stream after *after and relays what it
// reads until the stream ends; got says it connected.
func (g *gateRelay) read(i int, after *uint64) (got bool, err error) {
	u := g.gates[i] + gateStreamPath
	if *after > 0 {
		u += "?after=" + strconv.FormatUint(*after, 10)
	}
	req, err := http.NewRequestWithContext(g.ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := g.client.Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, errors.New("answered " + res.Status)
	}
	g.setStatus(i, true, nil)
	err = sse.Read(res.Body, maxGateLine, func(event string, data []byte) error {
		if len(data) == 0 {
			return nil
		}
		return g.frame(i, event, data, after)
	})
	if err != nil {
		return true, err
	}
	return true, errors.New("the stream ended")
}

// frame takes one event of gate i's stream.
func (g *gateRelay) frame(i int, event string, data []byte, after *uint64) error {
	switch event {
	case "rejected":
		var r refusal
		if err := json.Unmarshal(data, &r, json.RejectUnknownMembers(false)); err != nil {
			return errors.New("a refusal that is not one: " + err.Error())
		}
		if r.Seq <= *after {
			return nil // seen before this reconnection
		}
		*after = r.Seq
		r.GateSeq, r.Gate = r.Seq, g.gates[i]
		g.add(i, r)
	case overflow.Event:
		var o overflow.Frame
		if json.Unmarshal(data, &o, json.RejectUnknownMembers(false)) == nil && o.ResumeFrom > *after {
			*after = o.ResumeFrom
		}
		return errors.New("the gate closed a stream that fell behind")
	case "reset":
		if g.log != nil {
			g.log.Warn("a gate dropped refusals before the relay read them", "gate", g.gates[i])
		}
	}
	return nil
}

// add keeps r in gate i's ring and queues it for the pages that see it.
func (g *gateRelay) add(i int, r refusal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	r.Seq = g.seq
	ring := append(g.rings[i], r)
	if len(ring) > g.history {
		g.dropped[i] = ring[len(ring)-g.history-1].Seq
		ring = slices.Delete(ring, 0, len(ring)-g.history)
	}
	g.rings[i] = ring
	for w := range g.watchers {
		if w.allow(r.Resource) {
			g.queue(w, r)
			if !w.over {
				w.last = r.Seq
			}
		}
	}
}

func (g *gateRelay) setStatus(i int, up bool, err error) {
	st := gateStatus{Gate: g.gates[i], Up: up}
	if err != nil {
		st.Error = err.Error()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.status[i] == st {
		return
	}
	g.status[i] = st
	for w := range g.watchers {
		g.queue(w, st)
	}
}

// queue hands v to w, or marks w overflowed (g.mu held).
func (g *gateRelay) queue(w *relayWatcher, v any) {
	if w.over {
		return
	}
	select {
	case w.ch <- v:
	default:
		w.over = true
		close(w.quit)
	}
}

// serve streams the refusals that allow keeps, after the request's
// ?after= (or Last-Event-ID) if its ?stream= is this process's, then live
// ones, to one page. The first frame is hello {"stream"}; a reset
// {"oldest"} follows when refusals after `after` were let go (or the
// stream is another process's: all that is kept follows), then the
// status of each gate.
func (g *gateRelay) serve(w http.ResponseWriter, r *http.Request, allow func(string) bool) {
	var after uint64
	if s := r.URL.Query().Get("after"); s != "" || r.Header.Get("Last-Event-ID") != "" {
		if s == "" {
			s = r.Header.Get("Last-Event-ID")
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			httpapi.WriteError(w, wire.NewError(wire.CodeInvalidValue, "after must be a sequence number (a whole number)"))
			return
		}
		after = n
	}
	// A sequence number of another process (one before a restart) names
	// nothing here: all that is kept follows a reset.
	foreign := after > 0 && r.URL.Query().Get("stream") != g.stream
	if foreign {
		after = 0
	}
	rw := &relayWatcher{allow: allow, ch: make(chan any, relayBuffer), quit: make(chan struct{})}
	var kept []refusal
	var status []gateStatus
	var reset uint64
	g.mu.Lock()
	if len(g.watchers) >= maxRelayWatchers {
		g.mu.Unlock()
		httpapi.WriteError(w, wire.NewError(wire.CodeTooManyWatchers, "too many pages read the gates' refusals at once ("+strconv.Itoa(maxRelayWatchers)+")"))
		return
	}
	for i, ring := range g.rings {
		for _, rf := range ring {
			if rf.Seq > after && allow(rf.Resource) {
				kept = append(kept, rf)
			}
		}
		// A ring that let go of refusals the page has not had.
		if g.dropped[i] > after {
			reset = max(reset, ring[0].Seq)
		}
	}
	if foreign {
		reset = max(reset, 1)
	}
	slices.SortFunc(kept, func(a, b refusal) int { return cmp.Compare(a.Seq, b.Seq) })
	status = slices.Clone(g.status)
	rw.last = g.seq
	g.watchers[rw] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.watchers, rw)
		g.mu.Unlock()
	}()

	out := sse.Start(w, 30*time.Second)
	out.Event(0, "hello", map[string]string{"stream": g.stream})
	if reset > 0 {
		out.Event(0, "reset", map[string]uint64{"oldest": reset})
	}
	for _, st := range status {
		out.Event(0, "status", st)
	}
	for _, rf := range kept {
		out.Event(rf.Seq, "rejected", rf)
	}
	if !out.Flush() {
		return
	}
	keep := time.NewTicker(relayKeepalive)
	defer keep.Stop()
	for {
		select {
		case v := <-rw.ch:
			switch v := v.(type) {
			case refusal:
				out.Event(v.Seq, "rejected", v)
			case gateStatus:
				out.Event(0, "status", v)
			}
		case <-rw.quit:
			g.mu.Lock()
			last := rw.last
			g.mu.Unlock()
			out.Overflow(last)
			return
		case <-keep.C:
			out.Comment("keepalive")
		case <-r.Context().Done():
			return
		case <-g.ctx.Done():
			return
		}
		if !out.Flush() {
			return
		}
	}
}

// randomID is 16 random hex digits.
func randomID() string {
	return rand.Text()[:16]
}
