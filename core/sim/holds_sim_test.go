package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Holds: a deterministic simulation of holders that keep their leases alive
// the way client.Held does (a lease.Keeper deciding when to renew and when the
// lease is lost), over a network that delays, loses and duplicates
// messages, with holder clocks that drift within the assumed skew. Each
// holder works while its work signal is un-aborted: from the grant's
// arrival until its Keeper says the lease is lost (at the holder's
// deadline, or when a renewal is refused), or until the work is done (then
// it releases). The property, judged by the coordinator's clock: no
// instant has two un-aborted work signals for one resource.

// HoldParams is what a seed decides about a run of holds.
type HoldParams struct {
	Seed       uint64
	Holders    int // 2..5
	Resources  int // 1..2
	TTL        time.Duration
	Skew       time.Duration
	RenewEvery time.Duration
	// Drifts are the holders' clock rates minus 1: each within what the
	// skew covers (a clock slower than the coordinator's loses at most
	// 80% of the skew over a TTL).
	Drifts, Offsets                 []float64
	MinDelayMs, MaxDelayMs          float64
	Loss, Dup                       float64
	MaxWorkMs, MaxPauseMs, RunForMs float64
}

// HoldParamsOf derives a run's parameters from seed.
func HoldParamsOf(seed uint64) HoldParams {
	rng := rand.New(rand.NewPCG(seed, 0x686f6c64))
	p := HoldParams{Seed: seed, Holders: 2 + rng.IntN(4), Resources: 1 + rng.IntN(2), TTL: time.Second, Skew: 50 * time.Millisecond}
	p.RenewEvery = time.Duration(200+rng.IntN(400)) * time.Millisecond
	slow := 0.8 * clock.Millis(p.Skew) / clock.Millis(p.TTL)
	for range p.Holders {
		p.Drifts = append(p.Drifts, -slow+rng.Float64()*(slow+0.05))
		p.Offsets = append(p.Offsets, rng.Float64()*1e6)
	}
	p.MinDelayMs = 1 + rng.Float64()*20
	p.MaxDelayMs = p.MinDelayMs + rng.Float64()*600
	p.Loss = rng.Float64() * 0.3
	p.Dup = rng.Float64() * 0.1
	p.MaxWorkMs = 4000 * rng.Float64()
	p.MaxPauseMs = 1 + 500*rng.Float64()
	p.RunForMs = 30_000
	return p
}

// HoldBreak is a deliberate break of the holders' side, for the tests that
// show the property catches it.
type HoldBreak int

const (
	// HoldCorrect is the library's behaviour.
	HoldCorrect HoldBreak = iota
	// HoldAnchorAtReply dates each deadline from the reply's arrival, as
	// the naive lease does.
	HoldAnchorAtReply
	// HoldNoDeadline stops the work only when a renewal is refused, never
	// at the holder's deadline.
	HoldNoDeadline
)

// HoldStats counts what happened in a run of holds.
type HoldStats struct {
	Events, Messages, Lost int
	Grants, Renewals       int
	LostHolds, Released    int
	// SignalsChecked counts the instants at which a work signal began,
	// when the property was checked.
	SignalsChecked int
}

// HoldViolation is two un-aborted work signals for one resource.
type HoldViolation struct {
	Seed     uint64
	Resource string
	At       float64 // coordinator milliseconds
	Holder   string  // whose signal began
	Fence    uint64
	Other    string // whose signal was still un-aborted
	Other2   uint64 // its fence
}

func (v *HoldViolation) Error() string {
	return fmt.Sprintf("sim: seed %d: at %s (coordinator) %s began work on %s with fence %d while %s (fence %d) had not stopped",
		v.Seed, clock.FormatMillis(v.At), v.Holder, v.Resource, v.Fence, v.Other, v.Other2)
}

// RunHolds runs the holds a seed decides, with the holders' side broken as
// br says, and returns what happened and the first violation, if any.
func RunHolds(seed uint64, br HoldBreak) (HoldStats, error) {
	w := newHoldWorld(HoldParamsOf(seed), br)
	return w.run()
}

type hEvent struct {
	at  float64 // true milliseconds (the coordinator's readings)
	seq uint64
	fn  func()
}

type hQueue []*hEvent

func (q hQueue) Len() int { return len(q) }
func (q hQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q hQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *hQueue) Push(x any)   { *q = append(*q, x.(*hEvent)) }
func (q *hQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type holdWorld struct {
	p     HoldParams
	br    HoldBreak
	rng   *rand.Rand
	now   float64
	seq   uint64
	q     hQueue
	coord *lease.Coordinator
	cclk  *clock.Manual
	hs    []*holder
	stats HoldStats
	err   error
}

// holder is one holder: its clock, its client, and at most one lease it
// keeps.
type holder struct {
	w        *holdWorld
	i        int
	id       string
	clk      *clock.Manual
	lc       *lease.Client
	res      string
	gen      int // bumped at each new hold, so stale timers and replies are told apart
	k        *lease.Keeper
	stopAt   float64 // the break's own deadline (holder milliseconds)
	active   bool    // the work signal is un-aborted
	fence    uint64
	renewing bool
	acq      *lease.Request // the acquisition in flight
	tries    int
}

func newHoldWorld(p HoldParams, br HoldBreak) *holdWorld {
	w := &holdWorld{p: p, br: br, rng: rand.New(rand.NewPCG(p.Seed, 0x776f726c64))}
	w.cclk, _ = clock.NewManual("coordinator", clock.ManualOptions{})
	w.coord, _ = lease.NewCoordinator(lease.CoordinatorConfig{Clock: w.cclk, TTL: p.TTL})
	for i := range p.Holders {
		h := &holder{w: w, i: i, id: "h" + strconv.Itoa(i)}
		h.clk, _ = clock.NewManual("agent-"+h.id, clock.ManualOptions{Start: p.Offsets[i]})
		n := 0
		h.lc, _ = lease.NewClient(lease.ClientConfig{Clock: h.clk, HolderID: h.id, ClockSkew: p.Skew,
			NewRequestID: func() string { n++; return h.id + "-" + strconv.Itoa(n) }})
		w.hs = append(w.hs, h)
		w.at(w.rng.Float64()*500, h.start)
	}
	return w
}

// at schedules fn at true time t.
func (w *holdWorld) at(t float64, fn func()) {
	w.seq++
	heap.Push(&w.q, &hEvent{at: max(t, w.now), seq: w.seq, fn: fn})
}

// send delivers fn after a network delay, maybe twice, maybe never.
func (w *holdWorld) send(fn func()) {
	w.stats.Messages++
	if w.rng.Float64() < w.p.Loss {
		w.stats.Lost++
		return
	}
	copies := 1
	if w.rng.Float64() < w.p.Dup {
		copies = 2
	}
	for range copies {
		w.at(w.now+w.p.MinDelayMs+w.rng.Float64()*(w.p.MaxDelayMs-w.p.MinDelayMs), fn)
	}
}

func (w *holdWorld) run() (HoldStats, error) {
	for w.q.Len() > 0 && w.err == nil {
		e := heap.Pop(&w.q).(*hEvent)
		if e.at > w.p.RunForMs {
			break
		}
		w.now = e.at
		_ = w.cclk.Set(w.now)
		for _, h := range w.hs {
			_ = h.clk.Set(h.w.p.Offsets[h.i] + w.now*(1+w.p.Drifts[h.i]))
		}
		w.stats.Events++
		e.fn()
	}
	return w.stats, w.err
}

// trueAt is the true time at which h's clock reads ms.
func (h *holder) trueAt(ms float64) float64 {
	return (ms - h.w.p.Offsets[h.i]) / (1 + h.w.p.Drifts[h.i])
}

func (h *holder) reading() clock.Instant { return h.clk.Peek() }

func (h *holder) start() {
	h.res = "r" + strconv.Itoa(h.w.rng.IntN(h.w.p.Resources))
	req, err := h.lc.BeginAcquire(h.res)
	if err != nil {
		h.w.err = err
		return
	}
	h.acq, h.tries = &req, 0
	h.sendAcquire(req)
}

func (h *holder) sendAcquire(req lease.Request) {
	w := h.w
	h.tries++
	w.send(func() {
		out, err := w.coord.Acquire(req)
		if err != nil {
			return // a request id the coordinator refuses: dropped
		}
		if out.OK {
			w.stats.Grants++ // counted per answer, retries included
		}
		w.send(func() { h.acquired(req, out) })
	})
	// Resend the same request if no answer comes; after a few, begin anew.
	gen := h.gen
	w.at(w.now+2*w.p.MaxDelayMs+1, func() {
		if h.gen == gen && h.acq != nil && h.acq.RequestID == req.RequestID {
			if h.tries < 4 {
				h.sendAcquire(req)
			} else {
				h.start()
			}
		}
	})
}

func (h *holder) acquired(req lease.Request, out lease.Outcome) {
	w := h.w
	if h.acq == nil || h.acq.RequestID != req.RequestID {
		return // a duplicate, or an answer to a request given up
	}
	if !out.OK {
		h.acq = nil
		w.at(w.now+min(clock.Millis(out.RetryAfter), 1000)+w.rng.Float64()*100, h.start)
		return
	}
	l, err := h.lc.CompleteAcquire(req, out.Grant)
	if err != nil {
		w.err = err
		return
	}
	h.acq = nil
	h.gen++
	h.k, _ = lease.NewKeeper(l, w.p.RenewEvery)
	h.fence = l.Token().Fence
	h.stopAt = l.Deadline().Millis
	if w.br == HoldAnchorAtReply {
		h.stopAt = h.reading().Millis + clock.Millis(w.p.TTL) - clock.Millis(w.p.Skew)
	}
	if lost, _ := h.k.Check(h.reading()); lost || h.reading().Millis >= h.stopAt {
		h.release() // dead on arrival: never worked
		return
	}
	h.begin()
	gen := h.gen
	w.at(w.now+w.rng.Float64()*w.p.MaxWorkMs, func() {
		if h.gen == gen && h.active {
			h.stop()
			h.release()
		}
	})
	h.schedule()
}

// begin starts the work signal, checking the property.
func (h *holder) begin() {
	w := h.w
	w.stats.SignalsChecked++
	for _, o := range w.hs {
		if o != h && o.active && o.res == h.res {
			w.err = &HoldViolation{Seed: w.p.Seed, Resource: h.res, At: w.now, Holder: h.id, Fence: h.fence, Other: o.id, Other2: o.fence}
			return
		}
	}
	h.active = true
}

// stop aborts the work signal.
func (h *holder) stop() { h.active = false }

// schedule arms the next renewal and the deadline, at the Keeper's (or the
// break's) readings, in true time.
func (h *holder) schedule() {
	w, gen := h.w, h.gen
	if !h.renewing {
		w.at(h.trueAt(h.k.NextRenewal().Millis), func() {
			if h.gen == gen && h.active && !h.renewing {
				h.renew()
			}
		})
	}
	if w.br != HoldNoDeadline {
		// The deadline's timer (client.Held's): still the deadline if no
		// renewal moved it since.
		stopAt := h.stopAt
		w.at(h.trueAt(stopAt), func() {
			if h.gen == gen && h.active && h.stopAt == stopAt {
				_, _ = h.k.Check(h.k.Deadline())
				h.lose()
			}
		})
	}
}

func (h *holder) renew() {
	w, gen := h.w, h.gen
	req, err := h.lc.BeginRenewal(h.k.Lease())
	if err != nil {
		w.err = err
		return
	}
	h.renewing = true
	answered := false
	w.send(func() {
		out, err := w.coord.Renew(req)
		if err != nil {
			return
		}
		w.send(func() {
			if h.gen != gen || answered {
				return
			}
			answered = true
			h.renewing = false
			h.renewed(req, out)
		})
	})
	// A renewal gets at most the time the lease has left: no answer by
	// then (or by twice the longest delay) is a failure.
	left, _ := h.k.Left(h.reading())
	w.at(w.now+max(min(2*w.p.MaxDelayMs+1, clock.Millis(left)), clock.Millis(lease.MinRetry)), func() {
		if h.gen == gen && !answered {
			answered = true
			h.renewing = false
			if h.active {
				_ = h.k.Failed(h.reading())
				h.schedule()
			}
		}
	})
}

func (h *holder) renewed(req lease.Request, out lease.Outcome) {
	w := h.w
	if !h.active {
		return
	}
	if !out.OK {
		h.k.Expire()
		h.lose()
		return
	}
	l, err := h.lc.CompleteRenewal(req, out.Grant)
	if err != nil {
		w.err = err
		return
	}
	if err := h.k.Renewed(l); err != nil {
		if errors.Is(err, lease.ErrLost) {
			h.lose()
			return
		}
		w.err = err
		return
	}
	w.stats.Renewals++
	h.stopAt = h.k.Deadline().Millis
	if w.br == HoldAnchorAtReply {
		h.stopAt = h.reading().Millis + clock.Millis(w.p.TTL) - clock.Millis(w.p.Skew)
	}
	h.schedule()
}

// lose stops the work: the lease is lost.
func (h *holder) lose() {
	h.w.stats.LostHolds++
	h.stop()
	h.release()
}

// release sends a release (once the work stopped) and starts over later.
func (h *holder) release() {
	w := h.w
	tok := h.k.Lease().Token()
	h.gen++
	h.renewing = false
	w.stats.Released++
	w.send(func() { _, _ = w.coord.Release(tok) })
	w.at(w.now+w.rng.Float64()*w.p.MaxPauseMs, h.start)
}
