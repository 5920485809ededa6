package lease_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/core/naive"
)

// store is the resource both agents write to. It keeps the last value and
// every write that landed, with the writer's reading when it landed; it has
// no notion of a conflict, like most resources.
type store struct {
	value  string
	writes []landed
}

type landed struct {
	holder string
	at     clock.Instant
}

// write lands holder's value, stamped with a reading of the writer's clock
// (the read is what moves a stepping clock through the check-to-write gap).
func (s *store) write(holder string, clk clock.Clock) error {
	now, err := clk.Now()
	if err != nil {
		return err
	}
	s.value = holder
	s.writes = append(s.writes, landed{holder, now})
	return nil
}

// Overlap: with clocks that step on every read, agent A's check reads 950 and
// its write reads 1400, past the end of its lease at 1000. Meanwhile the
// coordinator gave the resource to B. The naive leases let both agents pass
// their checks and both writes land, A's last, and nothing records a
// conflict. The same sequence with fenced leases refuses A's write and logs
// it with both holders, both fences and a sequence number.
func TestOverlapNaiveVersusFenced(t *testing.T) {
	const ttl = time.Second

	t.Run("Naive", func(t *testing.T) {
		clkA := manual(t, "agent-a", t0, 450) // every read moves A on by 450ms
		clkB := manual(t, "agent-b", t1000, 10)
		cc := manual(t, coordDomain, t0, 0)
		co := newCoordinator(t, cc, ttl, 0)
		var s store

		mustGrant(t)(co.Acquire(acquireReq("a1", "agent-a", "r")))
		leaseA, err := naive.Acquire(clkA, ttl) // grant arrives at 0: expires 1000
		must(t, err)

		must(t, clkA.Set(t950))
		okA, err := leaseA.Valid() // reads 950; the next read will be 1400
		must(t, err)

		must(t, cc.Set(t1000)) // A's lease is over; B gets the resource
		mustGrant(t)(co.Acquire(acquireReq("b1", "agent-b", "r")))
		leaseB, err := naive.Acquire(clkB, ttl) // reads 1000
		must(t, err)
		okB, err := leaseB.Valid() // reads 1010
		must(t, err)
		if okB {
			must(t, s.write("agent-b", clkB)) // lands at 1020
		}
		if okA {
			must(t, s.write("agent-a", clkA)) // lands at 1400
		}

		if !okA || !okB {
			t.Fatalf("checks: A %v, B %v; the naive lease should let both pass", okA, okB)
		}
		want := []landed{{"agent-b", clock.At("agent-b", 1020)}, {"agent-a", clock.At("agent-a", t1400)}}
		if len(s.writes) != 2 || s.writes[0] != want[0] || s.writes[1] != want[1] {
			t.Fatalf("writes %v, want %v", s.writes, want)
		}
		if s.value != "agent-a" {
			t.Fatalf("value %q: the stale write should have won silently", s.value)
		}
		// The only participant that knows A's write was stale is the
		// coordinator, and it was never asked.
		holder, f, _, ok, err := co.Holder(at(t1400), "r")
		if err != nil || !ok || holder != "agent-b" || f != 2 {
			t.Fatalf("coordinator at 1400: %q fence %d %v %v", holder, f, ok, err)
		}
	})

	t.Run("Fenced", func(t *testing.T) {
		clkA := manual(t, "agent-a", t0, 450)
		clkB := manual(t, "agent-b", t1000, 10)
		cc := manual(t, coordDomain, t0, 0)
		co := newCoordinator(t, cc, ttl, 0)
		clientA := newClient(t, clkA, "agent-a", 0)
		clientB := newClient(t, clkB, "agent-b", 0)
		gate, err := fence.NewGate("r", fence.Options{})
		must(t, err)
		var s store

		reqA, err := clientA.BeginAcquire("r") // sent at 0
		must(t, err)
		leaseA, err := clientA.CompleteAcquire(reqA, mustGrant(t)(co.Acquire(reqA)))
		must(t, err)

		must(t, clkA.Set(t950))
		expA, err := leaseA.HasExpired() // reads 950: A believes it holds the lease
		must(t, err)

		must(t, cc.Set(t1000))
		reqB, err := clientB.BeginAcquire("r") // reads 1000
		must(t, err)
		leaseB, err := clientB.CompleteAcquire(reqB, mustGrant(t)(co.Acquire(reqB)))
		must(t, err)
		expB, err := leaseB.HasExpired() // reads 1010
		must(t, err)
		errB := gate.Commit(leaseB.Token(), func() error { return s.write("agent-b", clkB) })
		errA := gate.Commit(leaseA.Token(), func() error { return s.write("agent-a", clkA) })

		if expA || expB {
			t.Fatalf("HasExpired: A %v, B %v; both should believe they hold it", expA, expB)
		}
		must(t, errB)
		var se *fence.StaleFenceError
		if !errors.As(errA, &se) {
			t.Fatalf("A's write: %v, want *fence.StaleFenceError", errA)
		}
		want := fence.Rejection{Seq: 1, Resource: "r", RefusedHolderID: "agent-a", RefusedFence: 1, AdmittedHolderID: "agent-b", AdmittedFence: 2}
		if se.Rejection != want {
			t.Fatalf("rejection %+v, want %+v", se.Rejection, want)
		}
		if log := gate.Rejections(); len(log) != 1 || log[0] != want {
			t.Fatalf("log %+v", log)
		}
		if len(s.writes) != 1 || s.value != "agent-b" {
			t.Fatalf("writes %v value %q; only B's should land", s.writes, s.value)
		}
		if clkA.Peek().Millis != t1400 {
			t.Fatal("A's refused write read its clock")
		}
	})
}

// Fencing does not make the handover atomic: a stale write that reaches the
// resource before the new holder's first write is admitted, unless the
// coordinator pushes the new fence with Admit at reassignment.
func TestStaleWriteFirst(t *testing.T) {
	for _, push := range []bool{false, true} {
		name := "WithoutAdmit"
		if push {
			name = "WithAdmitAtReassignment"
		}
		t.Run(name, func(t *testing.T) {
			co := newCoordinator(t, manual(t, coordDomain, t0, 0), time.Second, 0)
			gate, _ := fence.NewGate("r", fence.Options{})
			gA := mustGrant(t)(co.AcquireAt(at(t0), acquireReq("a1", "a", "r")))
			gB := mustGrant(t)(co.AcquireAt(at(t1000), acquireReq("b1", "b", "r")))
			if push {
				must(t, gate.Admit(gB.Token()))
			}
			ran := false
			err := gate.Commit(gA.Token(), func() error { ran = true; return nil })
			if push == (err == nil) || push == ran {
				t.Fatalf("stale write first: err %v, ran %v", err, ran)
			}
		})
	}
}

// step is one line of a timeline: at the fixed instant at (the same true
// time on every clock in these tables), do something and check it.
type step struct {
	name string
	at   float64
	do   func(t *testing.T)
}

// runTimeline sets every clock to each step's instant and runs it.
func runTimeline(t *testing.T, clocks []*clock.Manual, steps []step) {
	t.Helper()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			t.Helper()
			for _, c := range clocks {
				if err := c.Set(s.at); err != nil {
					t.Fatalf("setting %s to %v: %v", c.Domain(), s.at, err)
				}
			}
			s.do(t)
		})
	}
}

// The spec's first timeline: A acquires at 0 with ttl 1000, checks at 950,
// the coordinator reassigns to B at 1000, and A's write lands at 1400.
func TestTimelineCheckThenStall(t *testing.T) {
	clkA := manual(t, "agent-a", t0, 0)
	clkB := manual(t, "agent-b", t0, 0)
	cc := manual(t, coordDomain, t0, 0)
	co := newCoordinator(t, cc, time.Second, 0)
	clientA := newClient(t, clkA, "agent-a", 0)
	clientB := newClient(t, clkB, "agent-b", 0)
	gate, _ := fence.NewGate("r", fence.Options{})
	var naiveStore store
	var fencedStore store
	var (
		naiveA   *naive.Lease
		leaseA   *lease.Lease
		leaseB   *lease.Lease
		checkedA bool
		errA     error
	)
	runTimeline(t, []*clock.Manual{clkA, clkB, cc}, []step{
		{"T0AAcquiresTTL1000", t0, func(t *testing.T) {
			req, _ := clientA.BeginAcquire("r")
			g := mustGrant(t)(co.Acquire(req))
			var err error
			leaseA, err = clientA.CompleteAcquire(req, g)
			must(t, err)
			naiveA, err = naive.Acquire(clkA, time.Second)
			must(t, err)
			if g.Fence != 1 || naiveA.ExpiresAt().Millis != 1000 || leaseA.Deadline().Millis != 1000 {
				t.Fatalf("fence %d, naive %v, anchored %v", g.Fence, naiveA.ExpiresAt(), leaseA.Deadline())
			}
		}},
		{"T950AChecks", t950, func(t *testing.T) {
			ok, err := naiveA.Valid()
			must(t, err)
			exp, err := leaseA.HasExpired()
			must(t, err)
			checkedA = ok && !exp
			if !checkedA {
				t.Fatal("at 950 both leases say A holds it")
			}
		}},
		{"T1000CoordinatorReassignsToB", t1000, func(t *testing.T) {
			if _, _, _, held, _ := co.Holder(at(t1000), "r"); held {
				t.Fatal("A's lease still live at the coordinator at 1000")
			}
			req, _ := clientB.BeginAcquire("r")
			var err error
			leaseB, err = clientB.CompleteAcquire(req, mustGrant(t)(co.Acquire(req)))
			must(t, err)
			if leaseB.Token().Fence != 2 {
				t.Fatalf("B got fence %d", leaseB.Token().Fence)
			}
			must(t, gate.Commit(leaseB.Token(), func() error { return fencedStore.write("agent-b", clkB) }))
			must(t, naiveStore.write("agent-b", clkB))
		}},
		{"T1400AsWriteLands", t1400, func(t *testing.T) {
			if checkedA { // the naive holder writes on the strength of its check
				must(t, naiveStore.write("agent-a", clkA))
			}
			errA = gate.Commit(leaseA.Token(), func() error { return fencedStore.write("agent-a", clkA) })
			if naiveStore.value != "agent-a" || len(naiveStore.writes) != 2 {
				t.Fatalf("naive: %v; A's stale write should have landed last", naiveStore.writes)
			}
			var se *fence.StaleFenceError
			if !errors.As(errA, &se) || se.RefusedHolderID != "agent-a" || se.AdmittedHolderID != "agent-b" || se.RefusedFence != 1 || se.AdmittedFence != 2 || se.Seq != 1 {
				t.Fatalf("fenced: %v", errA)
			}
			if fencedStore.value != "agent-b" || len(fencedStore.writes) != 1 {
				t.Fatalf("fenced store %v", fencedStore.writes)
			}
		}},
		{"T1400HolderCheckWasMeaningless", t1400, func(t *testing.T) {
			exp, err := leaseA.HasExpired()
			if err != nil || !exp {
				t.Fatalf("at 1400 A's lease: expired %v, %v", exp, err)
			}
		}},
	})
}

// The spec's second timeline: A sends a renewal at 0, the coordinator
// extends its copy at 40 to 1040, the reply reaches A at 900. The naive
// holder sets 900 + 1000 = 1900 and believes for 860ms in a lease the
// coordinator has let go; the anchored holder's deadline is 0 + 1000 - skew.
func TestTimelineRenewalReplyLate(t *testing.T) {
	const skew = 100 * time.Millisecond
	clkA := manual(t, "agent-a", t0, 0)
	cc := manual(t, coordDomain, t0, 0)
	co := newCoordinator(t, cc, time.Second, 0)
	client := newClient(t, clkA, "agent-a", skew)
	var (
		naiveA  *naive.Lease
		leaseA  *lease.Lease
		renewal lease.Request
		grant   lease.Grant
		renewed *lease.Lease
	)
	runTimeline(t, []*clock.Manual{clkA, cc}, []step{
		{"T0AHoldsAndSendsRenewal", t0, func(t *testing.T) {
			req, _ := client.BeginAcquire("r")
			var err error
			leaseA, err = client.CompleteAcquire(req, mustGrant(t)(co.Acquire(req)))
			must(t, err)
			naiveA, err = naive.Acquire(clkA, time.Second)
			must(t, err)
			renewal, err = client.BeginRenewal(leaseA)
			must(t, err)
			if renewal.SentAt != clock.At("agent-a", t0) {
				t.Fatalf("renewal stamped %v", renewal.SentAt)
			}
		}},
		{"T40CoordinatorExtendsTo1040", t40, func(t *testing.T) {
			grant = mustGrant(t)(co.Renew(renewal))
			if grant.CoordinatorExpiresAt != at(t1040) || grant.Fence != 1 {
				t.Fatalf("grant %+v", grant)
			}
		}},
		{"T900ReplyReachesA", t900, func(t *testing.T) {
			must(t, naiveA.Renewed())
			var err error
			renewed, err = client.CompleteRenewal(renewal, grant)
			must(t, err)
			if naiveA.ExpiresAt() != clock.At("agent-a", t1900) {
				t.Fatalf("naive deadline %v, want 1900", naiveA.ExpiresAt())
			}
			if renewed.Deadline() != clock.At("agent-a", t1000-100) {
				t.Fatalf("anchored deadline %v, want 900", renewed.Deadline())
			}
			// The two deadlines live in different domains from the
			// coordinator's: comparing them is an error, not 860.
			if _, err := naiveA.ExpiresAt().Since(grant.CoordinatorExpiresAt); errKind(err) != "domain" {
				t.Fatalf("measured a holder deadline against the coordinator's: %v", err)
			}
			if _, err := renewed.HasExpiredAt(grant.CoordinatorExpiresAt); errKind(err) != "domain" {
				t.Fatalf("HasExpiredAt(CoordinatorExpiresAt): %v", err)
			}
		}},
		{"T1040CoordinatorLetsGo", t1040, func(t *testing.T) {
			if _, _, _, held, err := co.Holder(at(t1040), "r"); held || err != nil {
				t.Fatalf("held at 1040: %v %v", held, err)
			}
			ok, _ := naiveA.Valid()
			exp, _ := renewed.HasExpired()
			if !ok || !exp {
				t.Fatalf("at 1040 naive valid %v (want true: wrong), anchored expired %v (want true)", ok, exp)
			}
		}},
		{"T1899NaiveStillBelieves", t1899, func(t *testing.T) {
			ok, _ := naiveA.Valid()
			if !ok {
				t.Fatal("naive lease already invalid")
			}
			out, err := co.Renew(renewal) // a late duplicate of the renewal
			if err != nil || out.Reason != lease.Expired {
				t.Fatalf("renewal after expiry %+v %v", out, err)
			}
		}},
		{"T1900NaiveGivesUp", t1900, func(t *testing.T) {
			if ok, _ := naiveA.Valid(); ok {
				t.Fatal("naive lease valid at its deadline")
			}
			// In true time (all clocks here read the same) the naive holder
			// believed for 1900 - 1040 = 860ms after the coordinator let go.
			if gap := naiveA.ExpiresAt().Millis - grant.CoordinatorExpiresAt.Millis; gap != 860 {
				t.Fatalf("gap %v", gap)
			}
		}},
	})
}

// Send-time anchoring, property form. For each of 10,000 seeded random round
// trips (an acquisition and then a renewal) with random request, processing
// and reply delays, clocks with unrelated origins and rates, and the
// coordinator's clock gaining on the holder's by at most the assumed skew
// over a lease, the holder's window lies inside the coordinator's.
//
// "Inside" is stated in simulated true time T, which no participant can
// read: the holder's clock reads oA + rA*T and the coordinator's oC + rC*T.
// The holder's window is [T when the grant arrived, T when its clock reaches
// Deadline]; the coordinator's is [T when it processed the request, T when
// its clock reaches CoordinatorExpiresAt]. A window whose end precedes its
// start is empty (dead on arrival) and contained in anything. The skew
// assumption is that over the holder's window the coordinator's clock
// advances by at most the holder's advance plus ClockSkew, which bounds rC
// by rA*TTL/(TTL-skew).
//
// The same trips checked against the naive deadline (reply arrival + TTL)
// and against send-time anchoring without the skew must break containment,
// or this test could not fail.
func TestContainmentProperty(t *testing.T) {
	const trips = 10_000
	const tol = 1e-6 // ms of float rounding allowed at the boundary
	rng := rand.New(rand.NewPCG(20261130, 2))
	var naiveBreaks, noSkewBreaks, deadOnArrival, renewed, refused int

	for i := 0; i < trips; i++ {
		ttl := time.Duration(10e6 + rng.Int64N(60e9)) // 10ms .. 60s
		ttlMs := clock.Millis(ttl)
		var skew time.Duration
		if rng.IntN(10) != 0 {
			skew = time.Duration(rng.Int64N(int64(ttl / 4)))
		}
		skewMs := clock.Millis(skew)
		rA := 0.5 + 1.5*rng.Float64()
		maxRC := rA * ttlMs / (ttlMs - skewMs)
		rC := 0.5*rA + rng.Float64()*(maxRC-0.5*rA)
		if rng.IntN(5) == 0 {
			rC = maxRC * (1 - 1e-9) // at the edge of the assumption
		}
		oA, oC := (rng.Float64()*2-1)*1e6, (rng.Float64()*2-1)*1e6
		holderAt := func(T float64) clock.Instant { return clock.At("agent", oA+rA*T) }
		coordAt := func(T float64) clock.Instant { return clock.At(coordDomain, oC+rC*T) }
		holderT := func(x clock.Instant) float64 { return (x.Millis - oA) / rA }
		coordT := func(x clock.Instant) float64 { return (x.Millis - oC) / rC }
		// Mostly short delays, sometimes long ones, sometimes none.
		delay := func(scale float64) float64 {
			switch r := rng.IntN(20); {
			case r < 2:
				return 0
			case r < 14:
				return rng.Float64() * scale / 40
			case r < 19:
				return rng.Float64() * scale / 4
			}
			return rng.Float64() * scale
		}

		co := newCoordinator(t, manual(t, coordDomain, 0, 0), ttl, 0)
		// The holder's clock is set to each send instant before the request
		// is stamped with it (BeginAcquireAt refuses an anchor later than
		// the clock's reading). Its readings start at oA >= -1e6.
		hclk := manual(t, "agent", -2e6, 0)
		cl := newClient(t, hclk, "h", skew)

		// Acquisition.
		tSend := rng.Float64() * 1e6
		tProc := tSend + delay(2*ttlMs) + delay(ttlMs/10)
		tRecv := tProc + delay(2*ttlMs)
		must(t, hclk.Set(holderAt(tSend).Millis))
		req, err := cl.BeginAcquireAt(holderAt(tSend), "r")
		must(t, err)
		g := mustGrant(t)(co.AcquireAt(coordAt(tProc), req))
		l, err := cl.CompleteAcquire(req, g)
		must(t, err)
		tDeadline, tExpiry := holderT(l.Deadline()), coordT(g.CoordinatorExpiresAt)
		if tDeadline > tRecv && tDeadline > tExpiry+tol {
			t.Fatalf("trip %d: holder's window ends at T=%v, after the coordinator's at T=%v (ttl %v skew %v rA %v rC %v)",
				i, tDeadline, tExpiry, ttl, skew, rA, rC)
		}
		if tRecv+ttlMs/rA > tExpiry+tol {
			naiveBreaks++
		}
		if tSend+ttlMs/rA > tExpiry+tol {
			noSkewBreaks++
		}
		if tDeadline <= tRecv {
			deadOnArrival++
			exp, err := l.HasExpiredAt(holderAt(tRecv))
			if err != nil || !exp {
				t.Fatalf("trip %d: dead-on-arrival lease not expired on arrival: %v %v", i, exp, err)
			}
			continue
		}

		// While the holder believes it holds the lease, the coordinator
		// agrees, with the same fence.
		tCheck := tRecv + rng.Float64()*(tDeadline-tRecv)
		if exp, err := l.HasExpiredAt(holderAt(tCheck)); err != nil || exp {
			t.Fatalf("trip %d: expired inside its own window: %v %v", i, exp, err)
		}
		who, f, _, held, err := co.Holder(coordAt(tCheck), "r")
		if err != nil || !held || who != "h" || f != g.Fence {
			t.Fatalf("trip %d: holder believes at T=%v, coordinator says %q/%d/%v/%v", i, tCheck, who, f, held, err)
		}

		// Renewal, sent while the holder believes in its lease.
		tSend2 := tCheck + rng.Float64()*(tDeadline-tCheck)
		tProc2 := tSend2 + delay(ttlMs) + delay(ttlMs/10)
		tRecv2 := tProc2 + delay(2*ttlMs)
		must(t, hclk.Set(holderAt(tSend2).Millis))
		rreq, err := cl.BeginRenewalAt(holderAt(tSend2), l)
		must(t, err)
		out, err := co.RenewAt(coordAt(tProc2), rreq)
		must(t, err)
		if out.OK != (tProc2 < tExpiry) {
			t.Fatalf("trip %d: renewal processed at T=%v, lease ends T=%v, outcome %+v", i, tProc2, tExpiry, out)
		}
		if !out.OK {
			refused++
			continue
		}
		renewed++
		l2, err := cl.CompleteRenewal(rreq, out.Grant)
		must(t, err)
		if l2.Token() != l.Token() {
			t.Fatalf("trip %d: renewal changed the token", i)
		}
		tDeadline2, tExpiry2 := holderT(l2.Deadline()), coordT(out.Grant.CoordinatorExpiresAt)
		if tDeadline2 > tRecv2 && tDeadline2 > tExpiry2+tol {
			t.Fatalf("trip %d: renewed window ends at T=%v, after the coordinator's at T=%v", i, tDeadline2, tExpiry2)
		}
		if tRecv2+ttlMs/rA > tExpiry2+tol {
			naiveBreaks++
		}
	}
	t.Logf("%d trips: %d renewed, %d renewals refused as expired, %d dead on arrival; naive deadline broke containment %d times, anchoring without skew %d times",
		trips, renewed, refused, deadOnArrival, naiveBreaks, noSkewBreaks)
	if naiveBreaks == 0 || noSkewBreaks == 0 {
		t.Fatal("the weaker deadlines never broke containment: the property check has no teeth")
	}
	if renewed == 0 || refused == 0 || deadOnArrival == 0 {
		t.Fatal("the random trips missed a case")
	}
}
