package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Mode says which kind of holder the agents are.
type Mode int

const (
	// Fenced agents use lease.Client (deadlines anchored at the send) and
	// write through a fence.Gate per resource.
	Fenced Mode = iota
	// Naive agents use naive.Lease (deadline dated from the reply, checked
	// just before a write) and write straight to the resource. The run
	// counts overlapping writes instead of stopping at them.
	Naive
)

// String returns "fenced" or "naive".
func (m Mode) String() string {
	if m == Naive {
		return "naive"
	}
	return "fenced"
}

// RestartMode says whether and how the coordinator restarts during a run.
type RestartMode int

const (
	// NoRestart: the coordinator runs for the whole run.
	NoRestart RestartMode = iota
	// RestartPersisted: the coordinator crashes and its successor starts at
	// the last issued fence.
	RestartPersisted
	// RestartAmnesiac: the coordinator crashes and its successor starts at
	// fence 0.
	RestartAmnesiac
)

// String returns "none", "persisted" or "amnesiac".
func (r RestartMode) String() string {
	switch r {
	case RestartPersisted:
		return "persisted"
	case RestartAmnesiac:
		return "amnesiac"
	}
	return "none"
}

// Params is everything a seed decides about a run before it starts. Params
// derives them; a run never reads any other source of randomness.
type Params struct {
	Seed      uint64
	Agents    int // 2..16
	Resources int // 1..4

	TTL      time.Duration
	Skew     time.Duration // every holder's assumed clock skew
	MaxDrift float64       // bound on |rate-1| of any clock
	// SkewWithin is false for the runs (about one in eight) whose clocks
	// drift beyond what the assumed skew covers; invariant 2 does not apply
	// to them.
	SkewWithin bool

	MinDelayMs, MeanDelayMs, MaxDelayMs int64
	Loss, Dup                           float64 // per message

	StallProb  float64 // per write: a long model call between check and write
	MaxStallMs int64   // up to several TTLs
	PauseProb  float64 // per wake: a pause at an arbitrary point

	RetryMs     int64 // resend an unanswered request after this long
	MaxAttempts int   // sends of one acquire request before giving up
	WriteFail   float64
	AdmitPush   float64 // chance the coordinator pushes a new fence to the gate

	Restart     RestartMode
	Restarts    int
	DurationMs  int64
	CheckBefore bool // agents look at their own lease before every write

	// AsyncWrites is the chance that a write is asynchronous: it runs
	// through Gate.CommitContext and spans 0 to MaxWriteMs of simulated
	// time, while other writes to the gate wait their turn.
	AsyncWrites float64
	MaxWriteMs  int64
	// WriteTimeoutMs, if positive, is how long a waiting async write waits
	// before its context is cancelled.
	WriteTimeoutMs int64
	// SQL: writes and pushes go through Options.OpenStore (gates/sqlfence on
	// SQLite in the tests) instead of the in-memory gates (only when the run's
	// Options.OpenStore is set; about one seed in 20).
	SQL bool
}

// NewParams derives the parameters of run seed.
func NewParams(seed uint64) Params {
	rng := rand.New(rand.NewPCG(seed, 0x5eed1ea5e))
	p := Params{Seed: seed}
	p.Agents = 2 + rng.IntN(15)
	p.Resources = 1 + rng.IntN(4)
	ttl := int64(200 + rng.IntN(1800))
	p.TTL = time.Duration(ttl) * time.Millisecond
	skew := max(1, ttl*int64(2+rng.IntN(14))/100)
	p.Skew = time.Duration(skew) * time.Millisecond
	s := float64(skew) / float64(ttl)
	// A holder at rate 1-d against a coordinator at 1+d keeps inside the
	// window while (1-d)/(1+d) >= 1 - skew/ttl, that is d <= s/(2-s).
	bound := s / (2 - s)
	p.SkewWithin = rng.IntN(8) != 0
	if p.SkewWithin {
		p.MaxDrift = bound * (0.2 + 0.75*rng.Float64())
	} else {
		p.MaxDrift = min(0.4, bound*(2+2*rng.Float64()))
	}
	p.MinDelayMs = int64(rng.IntN(5))
	p.MeanDelayMs = p.MinDelayMs + 1 + ttl*int64(1+rng.IntN(15))/100
	p.MaxDelayMs = p.MeanDelayMs * int64(2+rng.IntN(6))
	p.Loss = 0.3 * rng.Float64()
	p.Dup = 0.2 * rng.Float64()
	p.StallProb = 0.05 + 0.3*rng.Float64()
	p.MaxStallMs = ttl * int64(1+rng.IntN(4))
	p.PauseProb = 0.02 * rng.Float64()
	p.RetryMs = 2*p.MeanDelayMs + int64(rng.IntN(int(ttl/4)+1)) + 1
	p.MaxAttempts = 1 + rng.IntN(5)
	p.WriteFail = 0.15 * rng.Float64()
	if rng.IntN(2) == 0 {
		p.AdmitPush = 0.3 + 0.7*rng.Float64()
	}
	switch k := rng.IntN(10); {
	case k < 4:
		p.Restart = NoRestart
	case k < 8:
		p.Restart = RestartPersisted
	default:
		p.Restart = RestartAmnesiac
	}
	if p.Restart != NoRestart {
		p.Restarts = 1 + rng.IntN(3)
	}
	p.DurationMs = ttl * int64(15+rng.IntN(15))
	p.CheckBefore = true
	// Drawn last, so that the parameters above stay what they were for
	// every seed.
	if rng.IntN(4) != 0 {
		p.AsyncWrites = 0.2 + 0.8*rng.Float64()
		p.MaxWriteMs = 1 + ttl*int64(1+rng.IntN(100))/100
		if rng.IntN(2) == 0 {
			p.WriteTimeoutMs = 1 + rng.Int64N(ttl)
		}
	}
	p.SQL = rng.IntN(20) == 0
	return p
}

// String lists the parameters on one line.
func (p Params) String() string {
	return fmt.Sprintf("seed=%d agents=%d resources=%d ttl=%v skew=%v drift<=%.4f skewWithin=%v delay=%d/%d/%dms loss=%.2f dup=%.2f stall=%.2f<=%dms restart=%v x%d admitPush=%.2f duration=%dms async=%.2f<=%dms timeout=%dms sql=%v",
		p.Seed, p.Agents, p.Resources, p.TTL, p.Skew, p.MaxDrift, p.SkewWithin,
		p.MinDelayMs, p.MeanDelayMs, p.MaxDelayMs, p.Loss, p.Dup, p.StallProb, p.MaxStallMs,
		p.Restart, p.Restarts, p.AdmitPush, p.DurationMs, p.AsyncWrites, p.MaxWriteMs, p.WriteTimeoutMs, p.SQL)
}
