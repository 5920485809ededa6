//go:build !js

package holdtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/test/rig/faultproxy"
)

// realClient is a client.Client of holder id on real clocks, through the
// target's proxy.
func (tg *Target) realClient(t testing.TB, id string) *client.Client {
	t.Helper()
	c, err := benchkit.NewClient(id, 20*time.Millisecond, client.Config{BaseURL: tg.Proxy.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// HoldOutlivesTenTTLs: with its renewals answered, a hold on real clocks
// lasts ten of the coordinator's TTLs with one fence, and the coordinator
// shows it held all along. A stall of this process longer than a hold
// outlives (outlived) ends the hold, as it must: such a run is made again,
// up to twice.
func HoldOutlivesTenTTLs(t *testing.T, tg *Target) {
	for again := 1; ; again++ {
		stalled, lost := holdTenTTLs(t, tg)
		if lost == nil {
			return
		}
		if stalled < outlived(tg.TTL) || again > 2 {
			t.Fatalf("%v (the longest stall of this process: %v)", lost, stalled)
		}
		t.Logf("this process stalled %v, and %v; run again", stalled, lost)
	}
}

// outlived is the longest stall of its process that a hold on a lease of
// ttl outlives: it renews every third of the TTL and gives the lease up at
// the loss margin (5 %, at most 250 ms) before its deadline, so a stall
// from just before a renewal was due ends it after two thirds of the TTL
// less the margin.
func outlived(ttl time.Duration) time.Duration {
	return 2*ttl/3 - min(ttl/20, 250*time.Millisecond)
}

// watchStalls measures this process's longest stall from now until the
// function it returns is called, which returns it: how late a ticker of
// period every fired, or, at the end, how long after its last tick (a
// stall that ended a hold may end just then, before its tick was taken).
func watchStalls(every time.Duration) (longest func() time.Duration) {
	tick := time.NewTicker(every)
	stop, result := make(chan struct{}), make(chan time.Duration)
	go func() {
		last, worst := time.Now(), time.Duration(0)
		for {
			select {
			case <-stop:
				tick.Stop()
				result <- max(worst, time.Since(last)-every)
				return
			case <-tick.C:
				// Read now: the tick carries the instant it was due.
				now := time.Now()
				worst = max(worst, now.Sub(last)-every)
				last = now
			}
		}
	}()
	return func() time.Duration {
		close(stop)
		return <-result
	}
}

// holdTenTTLs is one run of HoldOutlivesTenTTLs: this process's longest
// stall meanwhile (how late a 100 ms ticker fired), and the hold's end if
// it ended before the ten TTLs (nil if not).
func holdTenTTLs(t *testing.T, tg *Target) (stalled time.Duration, lost error) {
	longest := watchStalls(100 * time.Millisecond)
	defer func() { stalled = longest() }()
	c := tg.realClient(t, "outlives")
	res := unique("outlives")
	ctx := context.Background()
	h, err := c.Hold(ctx, res, client.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := h.Token()
	end := time.After(10 * tg.TTL)
	check := time.NewTicker(tg.TTL / 2)
	defer check.Stop()
	for done := false; !done; {
		select {
		case <-h.Context().Done():
			return 0, fmt.Errorf("the hold ended after %d renewals: %w", h.Renewals(), context.Cause(h.Context()))
		case <-end:
			done = true
		case <-check.C:
		}
		st, err := c.Inspect(ctx, res)
		if err != nil || !st.Held || st.Fence != tok.Fence || st.HolderID != "outlives" || h.Token() != tok {
			if h.Context().Err() != nil {
				return 0, fmt.Errorf("the hold ended after %d renewals: %w", h.Renewals(), context.Cause(h.Context()))
			}
			t.Fatalf("the coordinator shows %+v (%v), the hold %v", st, err, h.Token())
		}
	}
	if n := h.Renewals(); n < 25 {
		t.Fatalf("%d renewals in 10 TTLs", n)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Inspect(ctx, res); err != nil || st.Held || st.LastFence != tok.Fence {
		t.Fatalf("after the release: %+v %v", st, err)
	}
	return 0, nil
}

// RenewalsUnderFaults runs holds whose holder's clock is manual (so the
// deadline is checked to the millisecond) against the real coordinator
// through the proxy, which drops renewals' replies and holds them back
// (for up to 1.5 TTLs of the holder's time, often past the deadline), as
// each run's seed says. In every run the hold's context ends at or before
// the holder's deadline and never after, and the token never changes. It
// logs and returns how many runs lost their lease.
func RenewalsUnderFaults(t *testing.T, tg *Target, runs int) (lost int) {
	ttl := clock.Millis(tg.TTL)
	var faults atomic.Int64 // the proxy's policy runs on its own goroutines
	for seed := range uint64(runs) {
		agent, _ := clock.NewManual("agent", clock.ManualOptions{Start: 1000})
		lc, _ := lease.NewClient(lease.ClientConfig{Clock: agent, HolderID: "faults", ClockSkew: 20 * time.Millisecond})
		c, err := client.New(client.Config{BaseURL: tg.Proxy.URL, Lease: lc, AttemptTimeout: time.Hour,
			Backoff: func(int) time.Duration { return 0 }, AfterFunc: agent.AfterFunc})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 99))
		// Each of dropped and held back: 0 to 0.3, or 0.5 (every renewal
		// faulted) one run in five. With lower rates a hedge of a held-back
		// renewal nearly always gets through, and 200 runs lost 0 to 3
		// leases: too few to be sure both outcomes are exercised.
		p := [...]float64{0, 0.1, 0.2, 0.3, 0.5}[seed%5]
		var mu sync.Mutex
		releases := 0 // the policy's timers on the holder's clock not yet fired
		body := "faults-" + strconv.FormatUint(seed, 10) + "-"
		tg.Proxy.SetPolicy(func(call *faultproxy.Call) faultproxy.Action {
			if call.Path != "/v1/renew" || !strings.Contains(string(call.Body), body) {
				return faultproxy.Action{}
			}
			mu.Lock()
			f, wait := rng.Float64(), 1+rng.Float64()*1.5*ttl
			mu.Unlock()
			switch {
			case f < p:
				faults.Add(1)
				return faultproxy.Action{Drop: true}
			case f < 2*p:
				faults.Add(1)
				release := make(chan struct{})
				mu.Lock()
				releases++
				mu.Unlock()
				agent.AfterFunc(clock.FromMillis(wait), func() {
					mu.Lock()
					releases--
					mu.Unlock()
					close(release)
				})
				return faultproxy.Action{Release: release}
			}
			return faultproxy.Action{}
		})
		res := body + unique("r")
		h, err := c.Hold(context.Background(), res, client.HoldOptions{})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		tok := h.Token()
		end := agent.Peek().Millis + 3*ttl
		settled := func() bool {
			// Every request at the proxy parked (a reply held back), and
			// two of the holder's timers armed besides the policy's (the
			// next renewal and the loss; or the loss and the renewal
			// attempt's cut, its reply held back), or the hold over.
			mu.Lock()
			want := 2 + releases
			mu.Unlock()
			active, parked := tg.Proxy.InFlight()
			return h.Context().Err() != nil || (active == parked && agent.Timers() == want)
		}
		for {
			deadline := time.Now().Add(30 * time.Second)
			for !settled() {
				if time.Now().After(deadline) {
					active, parked := tg.Proxy.InFlight()
					t.Fatalf("seed %d: the hold did not settle: %d timers, %d requests at the proxy, %d parked", seed, agent.Timers(), active, parked)
				}
				time.Sleep(200 * time.Microsecond)
			}
			now, dl := agent.Peek(), h.Lease().Deadline()
			if h.Context().Err() != nil {
				if !errors.Is(context.Cause(h.Context()), client.ErrLeaseLost) || now.Millis > dl.Millis {
					t.Fatalf("seed %d: the hold ended at %v (deadline %v): %v", seed, now, dl, context.Cause(h.Context()))
				}
				lost++
				break
			}
			if now.Millis >= dl.Millis || h.Token() != tok {
				t.Fatalf("seed %d: at %v (deadline %v) the hold of %v is still alive, token %v", seed, now, dl, tok, h.Token())
			}
			if now.Millis >= end {
				if err := h.Release(context.Background()); err != nil {
					t.Fatalf("seed %d: release: %v", seed, err)
				}
				break
			}
			next, _ := agent.NextTimer()
			if err := agent.Set(next.Millis); err != nil {
				t.Fatal(err)
			}
		}
		tg.Proxy.SetPolicy(nil)
	}
	if faults.Load() == 0 || lost == 0 || lost == runs {
		t.Fatalf("%d runs, %d faults, %d lost: the runs did not exercise both outcomes", runs, faults.Load(), lost)
	}
	t.Logf("%d runs, %d lost their lease", runs, lost)
	return lost
}

// Campaigner is what a campaigner process does (CampaignerMain): the
// environment variables that configure it.
const (
	EnvCampaigner = "LEASE_FENCE_CAMPAIGNER"     // "1" in a campaigner process
	envURL        = "LEASE_FENCE_CAMPAIGNER_URL" // the coordinator (the proxy)
	envName       = "LEASE_FENCE_CAMPAIGNER_ELECTION"
	envID         = "LEASE_FENCE_CAMPAIGNER_ID"
	envGate       = "LEASE_FENCE_CAMPAIGNER_GATE" // where the leader writes (a gateServer)
)

// CampaignerMain is the main function of a campaigner process, which a test
// binary runs when EnvCampaigner is set: it campaigns in the election, says
// "elected FENCE" on stdout when it leads, and while it leads writes to the
// election's resource through its gate (a gateServer) every few
// milliseconds, with its token, under the hold's context. It leads until it
// is killed, or the lead is lost ("lost: CAUSE"), or, at SIGTERM, it stops
// writing, resigns and says "resigned".
func CampaignerMain() {
	id := os.Getenv(envID)
	c, err := benchkit.NewClient(id, 20*time.Millisecond, client.Config{BaseURL: os.Getenv(envURL)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Println("campaigning")
	h, err := client.NewElection(c, os.Getenv(envName)).Campaign(ctx, "")
	if err != nil {
		fmt.Println("stopped:", err)
		return
	}
	fmt.Println("elected", h.Token().Fence)
	// The leader's work: writes through the gate until the lead ends.
	work, stopWork := context.WithCancel(h.Context())
	worked := make(chan struct{})
	go func() {
		defer close(worked)
		tok := h.Token()
		for n := 1; work.Err() == nil; n++ {
			body := fmt.Sprintf(`{"holder":%q,"fence":%d,"n":%d}`, tok.HolderID, tok.Fence, n)
			req, err := http.NewRequestWithContext(work, http.MethodPost, os.Getenv(envGate), strings.NewReader(body))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-work.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	select {
	case <-ctx.Done():
		stopWork()
		<-worked // no write of this leader is under way when it resigns
		_ = h.Release(context.Background())
		fmt.Println("resigned")
	case <-h.Context().Done():
		stopWork()
		<-worked
		fmt.Println("lost:", context.Cause(h.Context()))
	}
}

// gateServer is the resource the campaigners lead: a fence.Gate in the
// test's process, behind HTTP (POST {"holder","fence","n"}: 200 when the
// write was admitted, 409 when the gate refused it). It can hold back the
// next write of a holder after receiving it (a write on its way when its
// sender was killed), and deliver it to the gate later, whatever became of
// the sender.
type gateServer struct {
	gate *fence.Gate
	srv  *httptest.Server

	mu       sync.Mutex
	admitted []gateWrite // in the order the gate admitted them
	changed  chan struct{}
	holdFor  string         // a holder whose next write is held back
	held     chan heldWrite // where a held-back write is handed to the test
	stop     chan struct{}  // closed at the test's end: held writes go on
}

type gateWrite struct {
	Holder string `json:"holder"`
	Fence  uint64 `json:"fence"`
	N      int    `json:"n"`
}

// heldWrite is a write held back: close release to deliver it; its
// outcome (the gate's error, nil if admitted) comes on result.
type heldWrite struct {
	w       gateWrite
	release chan struct{}
	result  chan error
}

func startGateServer(t *testing.T, resource string) *gateServer {
	gate, err := fence.NewGate(resource, fence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gs := &gateServer{gate: gate, changed: make(chan struct{}), held: make(chan heldWrite, 1), stop: make(chan struct{})}
	gs.srv = httptest.NewServer(http.HandlerFunc(gs.serve))
	t.Cleanup(gs.srv.Close)
	t.Cleanup(func() { close(gs.stop) }) // first: Close waits for the handlers
	return gs
}

func (gs *gateServer) serve(w http.ResponseWriter, r *http.Request) {
	var gw gateWrite
	if err := json.NewDecoder(r.Body).Decode(&gw); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var hw *heldWrite
	gs.mu.Lock()
	if gs.holdFor != "" && gs.holdFor == gw.Holder {
		gs.holdFor = ""
		hw = &heldWrite{w: gw, release: make(chan struct{}), result: make(chan error, 1)}
	}
	gs.mu.Unlock()
	if hw != nil {
		// Received, and held on its way to the gate: delivered when the
		// test says, even if its sender is gone by then.
		gs.held <- *hw
		select {
		case <-hw.release:
		case <-gs.stop:
		}
	}
	err := gs.gate.Commit(fence.Token{Resource: gs.gate.Resource(), HolderID: gw.Holder, Fence: gw.Fence}, func() error {
		gs.mu.Lock()
		gs.admitted = append(gs.admitted, gw)
		close(gs.changed)
		gs.changed = make(chan struct{})
		gs.mu.Unlock()
		return nil
	})
	if hw != nil {
		hw.result <- err
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
	}
}

// holdNext holds back holder's next write and returns it once received.
func (gs *gateServer) holdNext(t *testing.T, holder string) heldWrite {
	t.Helper()
	gs.mu.Lock()
	gs.holdFor = holder
	gs.mu.Unlock()
	select {
	case hw := <-gs.held:
		return hw
	case <-time.After(30 * time.Second):
		t.Fatalf("%s, leading, wrote nothing for 30 s", holder)
	}
	return heldWrite{}
}

// waitAdmitted waits until the gate admitted a write of holder with fence f.
func (gs *gateServer) waitAdmitted(t *testing.T, holder string, f uint64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		gs.mu.Lock()
		changed := gs.changed
		found := slices.ContainsFunc(gs.admitted, func(w gateWrite) bool { return w.Holder == holder && w.Fence == f })
		gs.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no write of %s with fence %d admitted in 30 s", holder, f)
		}
	}
}

// campaigner is one campaigner process.
type campaigner struct {
	id    string
	cmd   *exec.Cmd
	lines chan string
}

// Elections: five campaigners in five processes (this test binary, run
// again); observers in this one. The
// leader writes to the election's resource through its gate (a fence.Gate
// served by this process) while it leads. Twice, the leader's process is
// killed (SIGKILL: its lease is not released) while one of its writes is
// on its way (received, and held back from the gate): exactly one new
// leader is elected each time, with a higher fence, at the expiry of the
// leader's last renewal, within Bound on the coordinator's clock (its timer
// hands over at the expiry; nobody polls); once the new leader has written, the dead
// leader's write reaches the gate and is refused. Then the leader resigns
// (SIGTERM) and the next campaigner leads at once: before the resigned
// leader's lease could have run out. Every observer sees
// every leader once, in fence order; the gate admitted writes in fence
// order, each of the leader of its fence, and a write of every leader.
// Logs and returns, for each kill, the time from the killed leader's
// expiry to the next election, on the coordinator's clock.
func Elections(t *testing.T, tg *Target) []time.Duration {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	name := unique("election")
	gs := startGateServer(t, name)
	var cs []*campaigner
	for i := range 5 {
		id := "campaigner-" + strconv.Itoa(i)
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), EnvCampaigner+"=1", envURL+"="+tg.Proxy.URL, envName+"="+name, envID+"="+id, envGate+"="+gs.srv.URL)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &campaigner{id: id, cmd: cmd, lines: make(chan string, 16)}
		go func(r io.Reader) {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				c.lines <- sc.Text()
			}
			close(c.lines)
		}(out)
		cs = append(cs, c)
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	for _, c := range cs {
		if l := <-c.lines; l != "campaigning" {
			t.Fatalf("%s said %q", c.id, l)
		}
	}
	// Observers, in this process.
	ctx, stopObservers := context.WithCancel(context.Background())
	defer stopObservers()
	seen := make([][]client.Leader, 3)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range seen {
		o := tg.realClient(t, "observer-"+strconv.Itoa(i))
		wg.Go(func() {
			for l := range client.NewElection(o, name).Observe(ctx) {
				mu.Lock()
				seen[i] = append(seen[i], l)
				mu.Unlock()
			}
		})
	}
	// elected waits for the one campaigner (of those alive) that says it
	// was elected, and returns it and its fence.
	alive := append([]*campaigner(nil), cs...)
	type election struct {
		c     *campaigner
		fence uint64
	}
	elections := make(chan election, 8)
	for _, c := range cs {
		go func() {
			for l := range c.lines {
				if f, ok := strings.CutPrefix(l, "elected "); ok {
					n, _ := strconv.ParseUint(f, 10, 64)
					elections <- election{c, n}
				}
			}
		}()
	}
	next := func(what string) election {
		select {
		case e := <-elections:
			return e
		case <-time.After(tg.TTL + 30*time.Second):
			t.Fatalf("no leader %s", what)
		}
		return election{}
	}
	var leaders []election
	leaders = append(leaders, next("at first"))
	gs.waitAdmitted(t, leaders[0].c.id, leaders[0].fence)
	var lags []time.Duration
	inspector := tg.realClient(t, "inspector")
	for round := range 2 {
		cur := leaders[len(leaders)-1]
		// One of the leader's writes is on its way when it dies.
		held := gs.holdNext(t, cur.c.id)
		_ = cur.c.cmd.Process.Signal(syscall.SIGKILL)
		// The killed leader's lease ends when its last renewal runs out.
		st, err := inspector.Inspect(context.Background(), name)
		if err != nil || !st.Held || st.Fence != cur.fence {
			t.Fatalf("round %d: right after the kill the coordinator shows %+v (%v)", round+1, st, err)
		}
		for i, c := range alive {
			if c == cur.c {
				alive = append(alive[:i], alive[i+1:]...)
				break
			}
		}
		e := next("after the kill in round " + strconv.Itoa(round+1))
		if e.fence <= cur.fence {
			t.Fatalf("round %d: %s elected with fence %d after %s (fence %d) was killed", round+1, e.c.id, e.fence, cur.c.id, cur.fence)
		}
		// Elected at the killed leader's expiry, on the coordinator's
		// clock (what this process measures would count its own stalls).
		lags = append(lags, tg.handedOnAtExpiry(t, "round "+strconv.Itoa(round+1), name, cur.fence, e.fence))
		leaders = append(leaders, e)
		// The new leader writes; then the dead leader's write arrives,
		// and the gate refuses it.
		gs.waitAdmitted(t, e.c.id, e.fence)
		close(held.release)
		var stale *fence.StaleFenceError
		select {
		case err := <-held.result:
			if !errors.As(err, &stale) || stale.RefusedHolderID != cur.c.id || stale.RefusedFence != cur.fence ||
				stale.AdmittedHolderID != e.c.id || stale.AdmittedFence != e.fence {
				t.Fatalf("round %d: the write %s (fence %d) sent before it was killed reached the gate after %s (fence %d) wrote: %v",
					round+1, cur.c.id, cur.fence, e.c.id, e.fence, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the held write never reached the gate", round+1)
		}
	}
	// The last leader resigns (SIGTERM): the next campaigner is elected at
	// once; then everyone stops.
	last := leaders[len(leaders)-1]
	_ = last.c.cmd.Process.Signal(syscall.SIGTERM)
	e := next("after the resignation")
	// Elected at the resignation: before the resigned leader's lease,
	// renewed until then, could run out (the coordinator's clock).
	lastExpiry := 0.0
	for _, g := range tg.grantsOn(name, last.fence) {
		lastExpiry = max(lastExpiry, g.CoordinatorExpiresAt.Millis)
	}
	if eg := tg.grantsOn(name, e.fence); e.fence <= last.fence || len(eg) == 0 || decided(eg[0]) >= lastExpiry {
		t.Fatalf("%s elected with fence %d (grants %v) at or after the resigned leader's (fence %d) lease ran out at %v", e.c.id, e.fence, eg, last.fence, lastExpiry)
	}
	leaders = append(leaders, e)
	gs.waitAdmitted(t, e.c.id, e.fence)
	// Every observer saw every leader, once each, in fence order.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		ok := true
		for _, s := range seen {
			ok = ok && len(s) >= len(leaders)
		}
		mu.Unlock()
		if ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopObservers()
	wg.Wait()
	// The waiters stop first, then the leader resigns: no process is left
	// to be elected. (On a coordinator that cannot tell that a client went
	// away, the Worker, the lease then goes to the place of a stopped
	// waiter, which nobody takes: the observers have stopped by then.)
	for _, c := range alive {
		if c != last.c && c != e.c {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			_ = c.cmd.Wait()
		}
	}
	_ = e.c.cmd.Process.Signal(syscall.SIGTERM)
	_ = e.c.cmd.Wait()
	// Nobody else was elected meanwhile.
	select {
	case extra := <-elections:
		t.Fatalf("a second leader: %s with fence %d", extra.c.id, extra.fence)
	default:
	}
	// The gate admitted writes in fence order, each of its fence's leader.
	leaderOf := map[uint64]string{}
	for _, l := range leaders {
		leaderOf[l.fence] = l.c.id
	}
	gs.mu.Lock()
	var floor uint64
	for i, w := range gs.admitted {
		if w.Fence < floor || leaderOf[w.Fence] != w.Holder {
			t.Fatalf("write %d admitted by the gate, %+v, after fence %d; the leaders were %v", i, w, floor, leaderOf)
		}
		floor = w.Fence
	}
	t.Logf("the gate admitted %d writes and refused %d", len(gs.admitted), gs.gate.RejectionCount())
	gs.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	for i, s := range seen {
		if len(s) != len(leaders) {
			t.Fatalf("observer %d saw %v, the leaders were %d", i, s, len(leaders))
		}
		for j, l := range s {
			if l.Fence != leaders[j].fence || l.HolderID != leaders[j].c.id {
				t.Fatalf("observer %d saw %v, want leader %d to be %s with fence %d", i, s, j, leaders[j].c.id, leaders[j].fence)
			}
		}
	}
	t.Logf("new leader %v after each killed leader's expiry (TTL %v)", lags, tg.TTL)
	return lags
}
