package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
)

// Options changes how a run is carried out, never what the seed decides.
type Options struct {
	// Mode picks fenced (the library) or naive agents.
	Mode Mode
	// Trace, when set, receives one line per event.
	Trace io.Writer
	// MaxViolations bounds how many violations a run collects before it
	// stops (default 1).
	MaxViolations int
	// OpenStore opens a fresh, empty gate kept outside the run's memory (the
	// tests give gates/sqlfence on an in-memory SQLite database). When set,
	// runs whose Params.SQL is true write through it instead of through
	// in-memory gates.
	OpenStore func() (StoreGate, error)

	// skipAsyncQueue is the deliberate break the tests must catch: async
	// writes are checked when they arrive and start at once, without
	// waiting for the running write.
	skipAsyncQueue bool
}

// Stats counts what happened in a run.
type Stats struct {
	Steps                   int // events processed
	Messages, Lost, Dups    int
	Grants, Replays, Denied int // acquisitions: new fences, answered retries, refusals
	Renewals, RenewRefused  int
	Releases                int
	Writes                  int // writes the resource ran
	StaleRefused            int // writes or pushes a gate refused
	WriteFailures           int // write callbacks that failed after the floor rose
	Stalls, Pauses          int
	Restarts                int
	// AmnesiaRefusals counts gate refusals of fences issued after an
	// amnesiac restart: the expected cost of not persisting the fence.
	AmnesiaRefusals int
	// Overlaps counts writes the resource ran from an older generation
	// after a newer generation had written (naive mode; in fenced mode the
	// gate makes this invariant 1).
	Overlaps int
	// BeliefBeyondWindow counts leases a holder believed valid past the end
	// of the coordinator's window (counted in naive mode and in runs whose
	// drift exceeds the assumed skew, where it is not a violation).
	BeliefBeyondWindow int
	// AsyncWrites counts writes that ran through Gate.CommitContext (a
	// write spanning simulated time, or one that had to wait its turn);
	// AsyncQueued those that waited; AsyncCancelled those whose context was
	// cancelled while they waited.
	AsyncWrites, AsyncQueued, AsyncCancelled int
	// SQLRuns is 1 for a run that wrote through sqlfence on SQLite.
	SQLRuns int
	// Checks counts evaluations per invariant, indexed by Invariant.
	Checks [len(invariantNames)]int
}

// TotalChecks returns the number of invariant evaluations in the run.
func (s *Stats) TotalChecks() int {
	n := 0
	for _, c := range s.Checks {
		n += c
	}
	return n
}

// Result is the outcome of one run.
type Result struct {
	Params     Params
	Mode       Mode
	Stats      Stats
	Violations []*Violation
	// FirstOverlap describes the first overlapping write in naive mode.
	FirstOverlap string
}

// Err returns the first violation, or nil.
func (r *Result) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	return r.Violations[0]
}

// ReplayCommand is the one command that reruns exactly this seed, verbosely.
func ReplayCommand(seed uint64, mode Mode) string {
	cmd := "go test ./core/sim -run 'TestSimSeed$' -count=1 -v -seed=" + strconv.FormatUint(seed, 10)
	if mode == Naive {
		cmd += " -naive"
	}
	return cmd
}

// Run simulates one run decided entirely by seed.
func Run(seed uint64, opts Options) *Result {
	w := newWorld(NewParams(seed), opts)
	w.openSQL()
	if w.store != nil {
		w.stats.SQLRuns = 1
	}
	w.run()
	w.closeAsync()
	w.closeSQL()
	res := &Result{Params: w.p, Mode: opts.Mode, Stats: w.stats, Violations: w.chk.Violations(), FirstOverlap: w.firstOverlap}
	res.Stats.Checks = w.chk.Checks
	return res
}

const coordDomain = "coordinator"

// phase is where an agent is in its lease's life.
type phase int

const (
	idle phase = iota
	acquiring
	holding
)

type msgKind int

const (
	mAcquire msgKind = iota
	mRenew
	mRelease
	mAcquireReply
	mRenewReply
	mWrite
	mWriteResult
	mAdmit
)

var msgNames = [...]string{"acquire", "renew", "release", "acquire-reply", "renew-reply", "write", "write-result", "admit"}

type message struct {
	kind    msgKind
	agent   int
	req     lease.Request
	out     lease.Outcome
	err     error
	inc     int
	tok     fence.Token
	gen     uint64
	refused bool
}

type evKind int

const (
	evWake evKind = iota
	evDeliver
	evSendWrite
	evCrash
	evRestart
	evWriteEnd    // an async write's callback returns
	evWriteCancel // a waiting async write's context is cancelled
)

type event struct {
	at    int64
	seq   uint64
	kind  evKind
	agent int
	gen   int
	msg   *message
	aw    *asyncWrite
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type world struct {
	p     Params
	opts  Options
	rng   *rand.Rand
	now   int64
	seq   uint64
	q     eventQueue
	chk   *Checker
	stats Stats
	trace io.Writer

	coordClk  *clock.Manual
	coordOff  float64
	coordRate float64
	co        *lease.Coordinator
	up        bool
	inc       int

	resources []string
	gates     []*fence.Gate
	naiveGen  []uint64 // naive: highest generation written per resource
	agents    []*agent
	domains   map[string]*agent

	gens    map[leaseKey]uint64 // generation of every new grant
	nextGen uint64

	firstOverlap string

	running [][]*asyncWrite // per resource: the async writes in progress (one fence)
	queued  [][]*asyncWrite // per resource: async writes waiting, in order

	store                 StoreGate // Params.SQL runs
	sqlLanded, sqlRefused map[string]int
}

var errWriteFailed = errors.New("sim: write failed partway")

func newWorld(p Params, opts Options) *world {
	w := &world{
		p:       p,
		opts:    opts,
		rng:     rand.New(rand.NewPCG(p.Seed, 0xfa017)),
		trace:   opts.Trace,
		domains: make(map[string]*agent),
		gens:    make(map[leaseKey]uint64),
	}
	var err error
	w.coordOff = float64(w.rng.IntN(1_000_000))
	w.coordRate = 1 + w.drift()
	w.coordClk, err = clock.NewManual(coordDomain, clock.ManualOptions{Start: w.coordOff})
	must(err)
	w.co = w.newCoordinator(0)
	w.up = true
	for i := 0; i < p.Resources; i++ {
		name := "r" + strconv.Itoa(i)
		w.resources = append(w.resources, name)
		g, err := fence.NewGate(name, fence.Options{})
		must(err)
		w.gates = append(w.gates, g)
	}
	w.naiveGen = make([]uint64, p.Resources)
	w.running = make([][]*asyncWrite, p.Resources)
	w.queued = make([][]*asyncWrite, p.Resources)
	for i := 0; i < p.Agents; i++ {
		a := &agent{id: i, name: fmt.Sprintf("agent-%02d", i), done: make(map[string]bool)}
		a.off = float64(w.rng.IntN(1_000_000))
		a.rate = 1 + w.drift()
		a.clk, err = clock.NewManual(a.name, clock.ManualOptions{Start: a.off})
		must(err)
		idRNG := rand.New(rand.NewPCG(p.Seed, uint64(i)+1))
		name := a.name
		a.client, err = lease.NewClient(lease.ClientConfig{
			Clock: a.clk, HolderID: a.name, ClockSkew: p.Skew,
			NewRequestID: func() string { return name + "-" + strconv.FormatUint(idRNG.Uint64(), 16) },
		})
		must(err)
		w.agents = append(w.agents, a)
		w.domains[a.name] = a
		w.wakeAt(a, int64(w.rng.IntN(int(p.TTL.Milliseconds())+1)))
	}
	persistence := Persisted
	if p.Restart == RestartAmnesiac {
		persistence = Amnesiac
	}
	w.chk = NewChecker(CheckerConfig{
		Persistence: persistence, SkewWithin: p.SkewWithin, CoordinatorDomain: coordDomain,
		ToTrue: w.toTrue, MaxViolations: opts.MaxViolations,
	})
	for i := 0; i < p.Restarts; i++ {
		w.push(&event{at: 1 + w.rng.Int64N(p.DurationMs), kind: evCrash})
	}
	return w
}

func must(err error) {
	if err != nil {
		panic("sim: " + err.Error())
	}
}

func (w *world) drift() float64 { return (2*w.rng.Float64() - 1) * w.p.MaxDrift }

func (w *world) newCoordinator(start uint64) *lease.Coordinator {
	co, err := lease.NewCoordinator(lease.CoordinatorConfig{Clock: w.coordClk, TTL: w.p.TTL, StartFence: start})
	must(err)
	return co
}

// toTrue maps a reading of any participant's clock to true time.
func (w *world) toTrue(t clock.Instant) float64 {
	if t.Domain == coordDomain {
		return (t.Millis - w.coordOff) / w.coordRate
	}
	a := w.domains[t.Domain]
	if a == nil {
		panic("sim: unknown clock domain " + t.Domain)
	}
	return (t.Millis - a.off) / a.rate
}

// read sets a manual clock to what it shows at the current true time and
// reads it, so code inside the core that reads the clock sees the same.
func (w *world) read(clk *clock.Manual, off, rate float64) clock.Instant {
	must(clk.Set(off + rate*float64(w.now)))
	r, err := clk.Now()
	must(err)
	return r
}

func (w *world) agentNow(a *agent) clock.Instant { return w.read(a.clk, a.off, a.rate) }
func (w *world) coordNow() clock.Instant         { return w.read(w.coordClk, w.coordOff, w.coordRate) }

func (w *world) push(e *event) {
	w.seq++
	e.seq = w.seq
	heap.Push(&w.q, e)
}

func (w *world) wakeAt(a *agent, at int64) {
	a.wakeGen++
	w.push(&event{at: at, kind: evWake, agent: a.id, gen: a.wakeGen})
}

func (w *world) tracef(format string, args ...any) {
	if w.trace != nil {
		fmt.Fprintf(w.trace, "%6d t=%-7d "+format+"\n", append([]any{w.stats.Steps, w.now}, args...)...)
	}
}

func (w *world) delay() int64 {
	p := w.p
	d := p.MinDelayMs + int64(w.rng.ExpFloat64()*float64(p.MeanDelayMs-p.MinDelayMs))
	return min(d, p.MaxDelayMs)
}

// send puts m on the network: it may be lost, delayed and duplicated, and
// copies travel independently, so they reorder.
func (w *world) send(m *message) {
	w.stats.Messages++
	if w.rng.Float64() < w.p.Loss {
		w.stats.Lost++
		w.tracef("lost %s", w.describe(m))
		return
	}
	w.push(&event{at: w.now + w.delay(), kind: evDeliver, msg: m})
	if w.rng.Float64() < w.p.Dup {
		w.stats.Dups++
		w.push(&event{at: w.now + w.delay(), kind: evDeliver, msg: m})
	}
}

func (w *world) describe(m *message) string {
	s := msgNames[m.kind]
	switch m.kind {
	case mAcquire, mRenew, mAcquireReply, mRenewReply:
		s += " " + m.req.RequestID + " " + m.req.Resource
	case mWrite, mWriteResult, mAdmit, mRelease:
		s += " " + m.tok.String()
	}
	return s
}

func (w *world) run() {
	for w.q.Len() > 0 {
		e := heap.Pop(&w.q).(*event)
		if e.at > w.p.DurationMs {
			break
		}
		w.now = e.at
		w.stats.Steps++
		w.chk.Step, w.chk.Now = w.stats.Steps, float64(w.now)
		switch e.kind {
		case evWake:
			a := w.agents[e.agent]
			if e.gen == a.wakeGen {
				w.wake(a)
			}
		case evDeliver:
			w.deliver(e)
		case evSendWrite:
			w.send(e.msg)
		case evCrash:
			w.crash()
		case evRestart:
			w.restart()
		case evWriteEnd:
			w.writeEnd(e.aw)
		case evWriteCancel:
			w.cancelWait(e.aw)
		}
		w.stepChecks()
		if len(w.chk.Violations()) > 0 && (w.opts.MaxViolations <= 1 || len(w.chk.Violations()) >= w.opts.MaxViolations) {
			return
		}
	}
}

// stepChecks runs the invariants about state (as opposed to answers) after
// every event: every lease a holder believes valid must lie inside the
// coordinator's window.
func (w *world) stepChecks() {
	now := float64(w.now)
	for _, a := range w.agents {
		if a.phase != holding {
			continue
		}
		if w.opts.Mode == Naive {
			w.countBeyond(a, now, w.toTrue(a.nl.ExpiresAt()))
			continue
		}
		if w.p.SkewWithin {
			w.chk.Holding(now, a.l, a.linc)
		} else {
			w.countBeyond(a, now, w.toTrue(a.l.Deadline()))
		}
	}
}

func (w *world) countBeyond(a *agent, now, end float64) {
	if a.beyond || now >= end {
		return
	}
	tok := a.l.Token()
	win, ok := w.chk.WindowEnd(a.linc, tok.Resource, tok.Fence)
	if ok && end > win+eps {
		a.beyond = true
		w.stats.BeliefBeyondWindow++
	}
}

func (w *world) deliver(e *event) {
	m := e.msg
	switch m.kind {
	case mAcquire, mRenew, mRelease:
		w.coordinator(m)
	case mWrite, mAdmit:
		w.resource(m)
	default:
		a := w.agents[m.agent]
		if w.now < a.busyUntil {
			// A stalled agent reads its mail when it wakes.
			w.push(&event{at: a.busyUntil, kind: evDeliver, msg: m})
			return
		}
		w.agentMail(a, m)
	}
}

func (w *world) coordinator(m *message) {
	if !w.up {
		w.tracef("coordinator down, drops %s", w.describe(m))
		return
	}
	now := w.coordNow()
	switch m.kind {
	case mAcquire:
		before := w.co.IssuedFence()
		out, err := w.co.AcquireAt(now, m.req)
		w.chk.Acquired(now, m.req, out, err)
		fresh := err == nil && out.OK && out.Grant.Fence > before
		switch {
		case fresh:
			w.stats.Grants++
			w.nextGen++
			w.gens[leaseKey{w.inc, m.req.Resource, out.Grant.Fence}] = w.nextGen
		case err == nil && out.OK:
			w.stats.Replays++
		default:
			w.stats.Denied++
		}
		w.tracef("coordinator acquire %s -> %s", m.req.RequestID, describeOutcome(out, err))
		w.send(&message{kind: mAcquireReply, agent: m.agent, req: m.req, out: out, err: err, inc: w.inc})
		if fresh && w.opts.Mode == Fenced && w.rng.Float64() < w.p.AdmitPush {
			w.send(&message{kind: mAdmit, tok: out.Grant.Token(), inc: w.inc})
		}
	case mRenew:
		out, err := w.co.RenewAt(now, m.req)
		w.chk.Renewed(now, m.req, out, err)
		if err == nil && out.OK {
			w.stats.Renewals++
		} else {
			w.stats.RenewRefused++
		}
		w.tracef("coordinator renew %s -> %s", m.req.RequestID, describeOutcome(out, err))
		w.send(&message{kind: mRenewReply, agent: m.agent, req: m.req, out: out, err: err, inc: w.inc})
	case mRelease:
		ok, err := w.co.ReleaseAt(now, m.tok)
		w.chk.Released(now, m.tok, ok, err)
		if ok {
			w.stats.Releases++
		}
		w.tracef("coordinator release %s -> %v", m.tok, ok)
	}
}

func describeOutcome(out lease.Outcome, err error) string {
	switch {
	case err != nil:
		return "error: " + err.Error()
	case out.OK:
		return fmt.Sprintf("granted fence %d until %s", out.Grant.Fence, out.Grant.CoordinatorExpiresAt)
	case out.HeldBy != "":
		return fmt.Sprintf("denied, held by %s for %v", out.HeldBy, out.RetryAfter)
	}
	return "refused: " + string(out.Reason)
}

func (w *world) resourceIndex(name string) int {
	for i, r := range w.resources {
		if r == name {
			return i
		}
	}
	panic("sim: unknown resource " + name)
}

func (w *world) resource(m *message) {
	ri := w.resourceIndex(m.tok.Resource)
	if w.opts.Mode == Naive {
		// No gate: the resource runs every write it receives.
		w.stats.Writes++
		if m.gen < w.naiveGen[ri] {
			w.stats.Overlaps++
			if w.firstOverlap == "" {
				w.firstOverlap = fmt.Sprintf("step %d t=%dms: %s wrote to %s as generation %d after generation %d had written",
					w.stats.Steps, w.now, m.tok.HolderID, m.tok.Resource, m.gen, w.naiveGen[ri])
			}
			w.tracef("resource %s runs a stale write from %s (generation %d < %d)", m.tok.Resource, m.tok.HolderID, m.gen, w.naiveGen[ri])
		} else {
			w.naiveGen[ri] = m.gen
			w.tracef("resource %s runs write from %s (generation %d)", m.tok.Resource, m.tok.HolderID, m.gen)
		}
		return
	}
	if w.store != nil {
		w.sqlResource(m)
		return
	}
	g := w.gates[ri]
	if m.kind == mAdmit {
		err := g.Admit(m.tok)
		w.answered(m, g.Floor(), false, err)
		return
	}
	if w.p.AsyncWrites > 0 && w.rng.Float64() < w.p.AsyncWrites {
		w.startAsync(m, ri, w.rng.Int64N(w.p.MaxWriteMs+1))
		return
	}
	if w.gateBusy(ri) {
		// A synchronous write arriving while an async one runs would block
		// this (the only) goroutine: it waits its turn like an async write
		// that takes no time.
		w.startAsync(m, ri, 0)
		return
	}
	ran := false
	err := g.Commit(m.tok, func() error {
		ran = true
		w.chk.WriteRuns(m.tok)
		if w.rng.Float64() < w.p.WriteFail {
			return errWriteFailed
		}
		return nil
	})
	w.answered(m, g.Floor(), ran, err)
}

// answered checks and accounts for a gate's answer to m, the gate's floor
// after it being floor, and replies to the writer.
func (w *world) answered(m *message, floor uint64, ran bool, err error) {
	w.chk.GateAnsweredFloor(floor, m.tok, m.kind == mAdmit, ran, err)
	refused := w.account(m, ran, err)
	w.tracef("gate %s %s %s -> floor %d, err %v", m.tok.Resource, msgNames[m.kind], m.tok, floor, err)
	if m.kind == mWrite {
		w.send(&message{kind: mWriteResult, agent: m.agent, tok: m.tok, refused: refused})
	}
}

// account counts a gate's or store's answer and reports whether it was a
// refusal.
func (w *world) account(m *message, ran bool, err error) bool {
	var stale *fence.StaleFenceError
	refused := errors.As(err, &stale)
	switch {
	case refused:
		w.stats.StaleRefused++
		if w.p.Restart == RestartAmnesiac && m.inc > 0 {
			w.stats.AmnesiaRefusals++
		}
	case ran:
		w.stats.Writes++
		if err != nil {
			w.stats.WriteFailures++
		}
	}
	return refused
}

func (w *world) crash() {
	if !w.up {
		return
	}
	w.up = false
	w.tracef("coordinator crashes (issued fence %d)", w.co.IssuedFence())
	w.push(&event{at: w.now + 1 + w.rng.Int64N(2*w.p.TTL.Milliseconds()), kind: evRestart})
}

func (w *world) restart() {
	start := uint64(0)
	if w.p.Restart == RestartPersisted {
		start = w.co.IssuedFence()
	}
	w.co = w.newCoordinator(start)
	w.inc++
	w.up = true
	w.stats.Restarts++
	w.chk.Restarted()
	w.tracef("coordinator restarts as incarnation %d at fence %d", w.inc, start)
}
