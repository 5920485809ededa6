package sim

import (
	"errors"
	"strconv"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// RunOps interprets data as a sequence of coordinator, client and gate
// operations and checks every answer against the invariants. It is the body
// of the FuzzOps target: the fuzzer chooses the schedule (which message is
// delivered, retried or lost, when time passes, which token a write carries,
// when the coordinator restarts) instead of a seed.
//
// The first byte picks persisted or amnesiac restarts. Then each operation is
// two bytes, an opcode and an argument:
//
//	0 advance true time by arg ms            5 gate write with a token the agent held
//	1 agent begins an acquisition            6 coordinator pushes its newest fence to a gate
//	2 coordinator processes a sent request   7 agent releases its lease
//	3 agent receives a reply                 8 coordinator restarts
//	4 agent begins a renewal                 9 agent resends its open request
//
// Every clock runs at the true rate with its own offset, so the real skew is
// zero and invariant 2 applies throughout. RunOps returns the first
// violation, or nil.
func RunOps(data []byte) error {
	_, err := runOps(data)
	return err
}

func runOps(data []byte) (*opsHarness, error) {
	h := newOpsHarness(data)
	for len(h.data) >= 2 {
		code, arg := h.data[0]%10, h.data[1]
		h.data = h.data[2:]
		h.chk.Step++
		h.do(code, arg)
		for _, a := range h.agents {
			h.chk.Holding(float64(h.now), a.l, a.linc)
		}
		if err := h.chk.Err(); err != nil {
			return h, err
		}
	}
	return h, nil
}

const (
	opsAgents    = 3
	opsResources = 2
	opsTTL       = 100 // ms
	opsSkew      = 5   // ms
	maxInFlight  = 32
)

type opsAgent struct {
	name   string
	clk    *clock.Manual
	off    float64
	client *lease.Client
	open   *lease.Request // the request the agent is waiting on
	l      *lease.Lease
	linc   int
	tokens []fence.Token // every token it ever held, for stale writes
	done   map[string]bool
	nextID int
}

type opsReply struct {
	req   lease.Request
	out   lease.Outcome
	err   error
	inc   int
	agent int
}

type opsHarness struct {
	data     []byte
	now      int64
	cc       *clock.Manual
	coOff    float64
	co       *lease.Coordinator
	persist  bool
	inc      int
	gates    []*fence.Gate
	agents   []*opsAgent
	requests []struct {
		agent int
		req   lease.Request
	}
	replies []opsReply
	newest  map[string]fence.Token // newest grant per resource
	chk     *Checker
}

func newOpsHarness(data []byte) *opsHarness {
	h := &opsHarness{newest: map[string]fence.Token{}}
	if len(data) > 0 {
		h.persist = data[0]%2 == 0
		data = data[1:]
	}
	h.data = data
	var err error
	h.coOff = 1000
	h.cc, err = clock.NewManual(coordDomain, clock.ManualOptions{Start: h.coOff})
	must(err)
	h.co = h.newCoordinator(0)
	for i := range opsResources {
		g, err := fence.NewGate("r"+strconv.Itoa(i), fence.Options{})
		must(err)
		h.gates = append(h.gates, g)
	}
	offs := map[string]float64{coordDomain: h.coOff}
	for i := range opsAgents {
		a := &opsAgent{name: "a" + strconv.Itoa(i), off: float64(7000 * (i + 1)), done: map[string]bool{}}
		a.clk, err = clock.NewManual(a.name, clock.ManualOptions{Start: a.off})
		must(err)
		a.client, err = lease.NewClient(lease.ClientConfig{Clock: a.clk, HolderID: a.name, ClockSkew: opsSkew * 1e6,
			NewRequestID: func() string { a.nextID++; return a.name + "-" + strconv.Itoa(a.nextID) }})
		must(err)
		h.agents = append(h.agents, a)
		offs[a.name] = a.off
	}
	persistence := Amnesiac
	if h.persist {
		persistence = Persisted
	}
	h.chk = NewChecker(CheckerConfig{Persistence: persistence, SkewWithin: true, CoordinatorDomain: coordDomain,
		ToTrue: func(t clock.Instant) float64 { return t.Millis - offs[t.Domain] }})
	return h
}

func (h *opsHarness) newCoordinator(start uint64) *lease.Coordinator {
	co, err := lease.NewCoordinator(lease.CoordinatorConfig{Clock: h.cc, TTL: opsTTL * 1e6, StartFence: start})
	must(err)
	return co
}

func (h *opsHarness) read(clk *clock.Manual, off float64) clock.Instant {
	must(clk.Set(off + float64(h.now)))
	r, err := clk.Now()
	must(err)
	return r
}

func (h *opsHarness) do(code, arg byte) {
	a := h.agents[int(arg)%opsAgents]
	ai := int(arg) % opsAgents
	h.chk.Now = float64(h.now)
	switch code {
	case 0:
		h.now += int64(arg)
	case 1:
		if a.open != nil || a.l != nil {
			return
		}
		req, err := a.client.BeginAcquireAt(h.read(a.clk, a.off), "r"+strconv.Itoa(int(arg/opsAgents)%opsResources))
		must(err)
		a.open = &req
		h.sendRequest(ai, req)
	case 2:
		if len(h.requests) == 0 {
			return
		}
		i := int(arg) % len(h.requests)
		m := h.requests[i]
		if arg < 128 { // the high bit keeps a copy: the message is duplicated
			h.requests = append(h.requests[:i], h.requests[i+1:]...)
		}
		h.process(m.agent, m.req)
	case 3:
		if len(h.replies) == 0 {
			return
		}
		i := int(arg) % len(h.replies)
		r := h.replies[i]
		if arg < 128 {
			h.replies = append(h.replies[:i], h.replies[i+1:]...)
		}
		h.receive(r)
	case 4:
		if a.l == nil || a.open != nil {
			return
		}
		req, err := a.client.BeginRenewalAt(h.read(a.clk, a.off), a.l)
		must(err)
		a.open = &req
		h.sendRequest(ai, req)
	case 5:
		if len(a.tokens) == 0 {
			return
		}
		tok := a.tokens[len(a.tokens)-1-int(arg/opsAgents)%len(a.tokens)]
		g := h.gates[resourceNum(tok.Resource)]
		ran := false
		err := g.Commit(tok, func() error {
			ran = true
			h.chk.WriteRuns(tok)
			if arg >= 192 {
				return errWriteFailed
			}
			return nil
		})
		h.chk.GateAnswered(g, tok, false, ran, err)
	case 6:
		tok, ok := h.newest["r"+strconv.Itoa(int(arg)%opsResources)]
		if !ok {
			return
		}
		g := h.gates[resourceNum(tok.Resource)]
		err := g.Admit(tok)
		h.chk.GateAnswered(g, tok, true, false, err)
	case 7:
		if a.l == nil {
			return
		}
		tok := a.l.Token()
		a.l, a.open = nil, nil
		now := h.read(h.cc, h.coOff)
		ok, err := h.co.ReleaseAt(now, tok)
		h.chk.Released(now, tok, ok, err)
	case 8:
		start := uint64(0)
		if h.persist {
			start = h.co.IssuedFence()
		}
		h.co = h.newCoordinator(start)
		h.inc++
		h.chk.Restarted()
		clear(h.newest)
	case 9:
		if a.open != nil {
			h.sendRequest(ai, *a.open)
		}
	}
}

func resourceNum(r string) int {
	n, err := strconv.Atoi(r[1:])
	must(err)
	return n
}

func (h *opsHarness) sendRequest(agent int, req lease.Request) {
	if len(h.requests) >= maxInFlight {
		h.requests = h.requests[1:] // the network drops the oldest
	}
	h.requests = append(h.requests, struct {
		agent int
		req   lease.Request
	}{agent, req})
}

func (h *opsHarness) process(agent int, req lease.Request) {
	now := h.read(h.cc, h.coOff)
	var out lease.Outcome
	var err error
	if req.Kind == lease.KindAcquire {
		out, err = h.co.AcquireAt(now, req)
		h.chk.Acquired(now, req, out, err)
		if err == nil && out.OK {
			h.newest[req.Resource] = out.Grant.Token()
		}
	} else {
		out, err = h.co.RenewAt(now, req)
		h.chk.Renewed(now, req, out, err)
	}
	if len(h.replies) >= maxInFlight {
		h.replies = h.replies[1:]
	}
	h.replies = append(h.replies, opsReply{req: req, out: out, err: err, inc: h.inc, agent: agent})
}

func (h *opsHarness) receive(r opsReply) {
	a := h.agents[r.agent]
	// The agent's clock shows the arrival, for any code that reads it.
	h.read(a.clk, a.off)
	current := a.open != nil && a.open.RequestID == r.req.RequestID
	if r.err != nil || !r.out.OK {
		if current {
			a.open = nil
			if r.req.Kind == lease.KindRenew {
				a.l = nil
			}
		}
		return
	}
	complete := a.client.CompleteAcquire
	if r.req.Kind == lease.KindRenew {
		complete = a.client.CompleteRenewal
	}
	if a.done[r.req.RequestID] {
		_, err := complete(r.req, r.out.Grant)
		var ce *lease.CompletedError
		h.chk.check(SingleUse, errors.As(err, &ce), "%s completed %s a second time (err %v)", a.name, r.req.RequestID, err)
		return
	}
	if !current {
		return
	}
	l, err := complete(*a.open, r.out.Grant)
	if !h.chk.check(CoreError, err == nil, "%s could not complete %s: %v", a.name, r.req.RequestID, err) {
		return
	}
	if r.req.Kind == lease.KindRenew {
		h.chk.check(FenceOrder, a.l != nil && l.Token() == a.l.Token(), "renewal turned %v into %s", a.l, l.Token())
	}
	a.done[r.req.RequestID] = true
	a.open, a.l, a.linc = nil, l, r.inc
	a.tokens = append(a.tokens, l.Token())
}
