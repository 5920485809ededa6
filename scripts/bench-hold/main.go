//go:build linux

// Command bench-hold measures holding on loopback, one measurement per
// invocation, as lines that scripts/bench-hold.sh collects in rounds
// (interleaved with etcd's, from scripts/peers):
//
//	-mode handover  release to the next waiter holding the lease: two
//	                holders (client.Client.Hold) pass one resource back and
//	                forth; before each release the waiter is queued (native:
//	                /debug/waiting; Worker: 100 ms, far more than a loopback
//	                call takes) and waits -settle more, as etcd's waiter does.
//	-mode expiry    an expiry to the waiter holding the lease: the holder
//	                neither renews nor releases.
//	-mode limits    a token's maxLeases on the Worker: a token with one (its
//	                leases counted in their own Durable Object) and one
//	                without, in turn for -rounds: -n acquire + release, then
//	                -n handovers.
//	-mode cost      the CPU time of -holds leases held (renewed every third
//	                of the TTL) for -duration, the client's (this process, or
//	                with -client js holder.mjs's) and the server's, less the
//	                same time idle, per second of held lease.
//
// Targets: native (cmd/coordinator, durable) and worker (the Go Worker
// under wrangler dev).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/internal/cputime"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

func main() {
	mode := flag.String("mode", "handover", "handover, expiry, limits or cost")
	rounds := flag.Int("rounds", 3, "with -mode limits: rounds")
	target := flag.String("target", "native", "native or worker")
	n := flag.Int("n", 1000, "handovers (or expiry samples)")
	ttl := flag.Duration("ttl", 0, "the coordinator's TTL (default: 30s for handover, 1s for expiry, 10s for cost)")
	holds := flag.Int("holds", 1000, "with -mode cost: leases held at once")
	oneClient := flag.Bool("one-client", false, "with -mode cost: every hold through one client (client.Client, or LeaseServiceClient with -client js: one process holding them all, whose renewals share calls), not one client each")
	clientKind := flag.String("client", "go", "with -mode cost: go (client.Client, in this process) or js (LeaseServiceClient in a Node process)")
	transport := flag.String("transport", "node", "with -client js: the LeaseServiceClient's transport (node or fetch)")
	duration := flag.Duration("duration", 30*time.Second, "with -mode cost: how long they are held")
	coordinator := flag.String("coordinator", "out/bin/coordinator", "the built native server")
	store := flag.String("store", "pebble", "with -target native: pebble (-state, the embedded store) or postgres (-store on a durable PostgreSQL the benchmark starts; with -mode cost its CPU is printed as db)")
	wrangler := flag.String("wrangler", "node_modules/.bin/wrangler", "wrangler")
	serverLog := flag.String("serverlog", "", "a file to copy the server's output to (stdout and stderr)")
	samplesTo := flag.String("samples", "", "append every latency measured (milliseconds, one a line) to this file")
	settle := flag.Duration("settle", 150*time.Millisecond, "with -mode handover: how long each waiter waits, once queued, before the release (as scripts/peers' etcd-handover)")
	flag.Parse()
	samplesFile = *samplesTo
	if *ttl == 0 {
		*ttl = map[string]time.Duration{"handover": 30 * time.Second, "expiry": time.Second, "cost": 10 * time.Second, "limits": 30 * time.Second}[*mode]
	}
	var env string
	if *mode == "limits" {
		if *target != "worker" {
			benchkit.Fatal(errors.New("-mode limits needs -target worker"))
		}
		env = limitsEnv()
	}

	var logTo io.Writer = io.Discard
	if *serverLog != "" {
		f, err := os.Create(*serverLog)
		if err != nil {
			benchkit.Fatal(err)
		}
		defer f.Close()
		logTo = &syncio.Writer{W: f} // the server's two pipes
	}
	switch *store {
	case "pebble":
	case "postgres":
		if *target != "native" {
			benchkit.Fatal(errors.New("-store postgres needs -target native"))
		}
		pg, err := pgtest.Start(pgtest.Options{Durable: true})
		if err != nil {
			benchkit.Fatal(err)
		}
		defer pg.Stop()
		storePG = pg
	default:
		benchkit.Fatal(errors.New("unknown -store (want pebble or postgres)"))
	}
	s, err := start(*target, *coordinator, *wrangler, *ttl, env, logTo)
	if err != nil {
		benchkit.Fatal(err)
	}
	defer s.Stop()
	switch *mode {
	case "handover":
		err = handover(s, *target, *n, *settle)
	case "expiry":
		err = expiry(s, *target, *n, *ttl)
	case "cost":
		switch *clientKind {
		case "go":
			err = cost(s, *target, *holds, *duration, *ttl, *oneClient)
		case "js":
			err = costJS(s, *target, *holds, *duration, *ttl, *oneClient, *transport)
		default:
			err = errors.New("unknown -client (want go or js)")
		}
	case "limits":
		err = limits(s, *n, *rounds, *settle)
	default:
		err = errors.New("unknown -mode")
	}
	if err != nil {
		benchkit.Fatal(err)
	}
}

// storePG is the PostgreSQL server of -store postgres, or nil.
var storePG *pgtest.Server

// start runs the target with the TTL ttl (the Worker with the lines of env
// in an --env-file, if any), copies its output to logTo and waits for its URL.
func start(target, coordinator, wrangler string, ttl time.Duration, env string, logTo io.Writer) (*benchkit.Server, error) {
	tmp, err := os.MkdirTemp("", "bench-hold-")
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	switch target {
	case "native":
		state := []string{"-state", filepath.Join(tmp, "state")}
		if storePG != nil {
			state = []string{"-store", storePG.URL("")}
		}
		cmd = exec.Command(coordinator, append(append([]string{"-addr", "127.0.0.1:0", "-quiet", "-init"}, state...),
			"-ttl", ttl.String(), "-debug-addr", "127.0.0.1:0")...)
	case "worker":
		args := []string{"--var", "LEASE_TTL_MS:" + strconv.FormatInt(ttl.Milliseconds(), 10)}
		if env != "" {
			file := filepath.Join(tmp, "bench.env")
			if err := os.WriteFile(file, []byte(env), 0o600); err != nil {
				return nil, err
			}
			args = append(args, "--env-file", file)
		}
		if cmd, err = benchkit.Wrangler(wrangler, filepath.Join(tmp, "state"), args...); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("unknown -target (want native or worker)")
	}
	return benchkit.Start(cmd, tmp, logTo, target == "native")
}

func newClient(url, id string) (*client.Client, error) { return tokenClient(url, id, "") }

// tokenClient is newClient with a bearer token (none if "").
func tokenClient(url, id, token string) (*client.Client, error) {
	return benchkit.NewClient(id, 10*time.Millisecond, client.Config{BaseURL: url, Token: token, AttemptTimeout: 30 * time.Second})
}

// queued waits until the coordinator has a waiter in a queue (native), or
// 100 ms (Worker).
func queued(ctx context.Context, s *benchkit.Server) error {
	if s.Debug == "" {
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	for ctx.Err() == nil {
		resp, err := http.Get(s.Debug + "/debug/waiting")
		if err != nil {
			return err
		}
		var st struct {
			Places int `json:"places"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if st.Places > 0 {
			return nil
		}
		time.Sleep(100 * time.Microsecond)
	}
	return ctx.Err()
}

// handover passes one resource between two holders n times and prints the
// latency of each: from the release's start to the waiter's Hold returning.
func handover(s *benchkit.Server, target string, n int, settle time.Duration) error {
	lat, err := handovers(s, n, settle, "")
	if err != nil {
		return err
	}
	report(target+"-handover", lat)
	return nil
}

// handovers passes one resource between two holders with the token n
// times (after 10 to warm up) and returns the latency of each.
func handovers(s *benchkit.Server, n int, settle time.Duration, token string) ([]time.Duration, error) {
	ctx := context.Background()
	a, err := tokenClient(s.URL, "a", token)
	if err != nil {
		return nil, err
	}
	b, err := tokenClient(s.URL, "b", token)
	if err != nil {
		return nil, err
	}
	res := "handover-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	h, err := a.Hold(ctx, res, client.HoldOptions{})
	if err != nil {
		return nil, err
	}
	holders, k := []*client.Client{a, b}, 0
	return benchkit.Handovers(n, settle, func() error { return h.Release(ctx) }, func() (func() error, error) {
		k++ // b, a, b, ...
		h, err := holders[k%2].Hold(ctx, res, client.HoldOptions{Wait: 30 * time.Second})
		if err != nil {
			return nil, err
		}
		return func() error { return h.Release(ctx) }, nil
	}, func() error { return queued(ctx, s) })
}

// expiry measures, n times, how long after a lease expired (nobody renews
// or releases it) its waiter is granted it: the waiter's acquisition waits
// (a plain POST with waitMillis, so that what is timed is the coordinator's
// handover and not a client's renewal), and the grant's own expiry says
// when it was decided. It prints the decision's lag after the expiry (on
// the coordinator's clock) and the grant's arrival after it (Unix time on
// this host, which the coordinator's clock also reads).
func expiry(s *benchkit.Server, target string, n int, ttl time.Duration) error {
	ctx := context.Background()
	a, err := newClient(s.URL, "a")
	if err != nil {
		return err
	}
	var decided, arrived []time.Duration
	for i := range n + 3 {
		res := "expiry-" + strconv.Itoa(i) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		l, err := a.Acquire(ctx, res)
		if err != nil {
			return err
		}
		exp := l.Grant().CoordinatorExpiresAt.Millis
		body := benchkit.AcquireBody("w"+strconv.Itoa(i), res, "b", "0123456789abcdef", 1, (ttl + 30*time.Second).Milliseconds())
		// Another call, on another resource, once the waiter waits: the
		// Go runtime's timer then belongs to that call's request (on the
		// Worker, see worker.mjs's tick).
		go func() {
			time.Sleep(ttl / 2)
			_, _ = a.Inspect(ctx, res+"-other")
		}()
		resp, err := http.Post(s.URL+"/v1/acquire", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		at := float64(time.Now().UnixMicro()) / 1000
		var reply wire.Reply
		err = json.NewDecoder(resp.Body).Decode(&reply)
		resp.Body.Close()
		if err != nil || reply.Grant == nil {
			return fmt.Errorf("the waiter was not granted: %+v %v", reply, err)
		}
		decided = append(decided, clock.FromMillis(reply.Grant.CoordinatorExpiresAt.Millis-reply.Grant.TTLMillis-exp))
		arrived = append(arrived, clock.FromMillis(at-exp))
	}
	report(target+"-expiry-decided", decided[3:])
	report(target+"-expiry-arrived", arrived[3:])
	return nil
}

// samplesFile, if set, receives every latency (-samples).
var samplesFile string

func report(name string, lat []time.Duration) {
	fmt.Println(benchkit.Must(benchkit.Latencies(name, lat, samplesFile)))
}

// cost holds leases for d and prints the CPU they cost.
func cost(s *benchkit.Server, target string, holds int, d, ttl time.Duration, oneClient bool) error {
	ctx := context.Background()
	pid := s.Pid() // its process group's
	now := func() mark {
		return mark{time.Now(), cputime.Process(), benchkit.Must(benchkit.GroupCPU(pid)), benchkit.PGCPU(storePG)}
	}
	// Idle first, as long as the measurement.
	idle := now()
	time.Sleep(d)
	taking := now()
	var hs []*client.Held
	var mu sync.Mutex
	var retried atomic.Int64
	// Taking the leases is not measured. They are taken evenly over one
	// renewal period, so that their renewals are spread over it as
	// independent holders' are (taken at once, every renewal came in one
	// burst, which the Worker under wrangler dev answered seconds late); on
	// the Worker fewer at once (each is a new Durable Object); a Hold that
	// failed (a call answered after the TTL on a loaded machine:
	// ErrExpired) is tried again.
	var g errgroup.Group
	g.SetLimit(map[string]int{"native": 16, "worker": 4}[target])
	var shared *client.Client
	if oneClient {
		var err error
		if shared, err = newClient(s.URL, "h"); err != nil {
			return err
		}
	}
	pace := time.NewTicker(ttl / 3 / time.Duration(holds))
	defer pace.Stop()
	for i := range holds {
		<-pace.C
		g.Go(func() error {
			c := shared
			if c == nil {
				var err error
				if c, err = newClient(s.URL, "h"+strconv.Itoa(i)); err != nil {
					return err
				}
			}
			for try := 1; ; try++ {
				h, err := c.Hold(ctx, "cost-"+strconv.Itoa(i), client.HoldOptions{})
				if err == nil {
					mu.Lock()
					hs = append(hs, h)
					mu.Unlock()
					return nil
				}
				if try == 3 {
					return fmt.Errorf("taking lease %d, three times: %w", i, err)
				}
				retried.Add(1)
			}
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// The renewals of the held phase only: those made while the leases
	// were being taken are not in its time.
	renewals := 0
	for _, h := range hs {
		renewals -= h.Renewals()
	}
	held := now()
	time.Sleep(d)
	end := now()
	lost := 0
	var cause error
	for _, h := range hs {
		if h.Context().Err() != nil {
			lost++
			cause = context.Cause(h.Context())
		}
		renewals += h.Renewals()
		_ = h.Release(ctx)
	}
	if lost > 0 {
		return fmt.Errorf("%d of %d holds were lost (the coordinator did not keep up with %.0f renewals/s?): %v",
			lost, holds, float64(holds)/(ttl/3).Seconds(), cause)
	}
	name := target + "-cost"
	if oneClient {
		name += "-one"
	}
	printCost(name, holds, ttl, renewals, int(retried.Load()), idle, taking, held, end)
	return nil
}

// mark is the client's and the server's CPU time at one instant.
type mark struct {
	at             time.Time
	client, server time.Duration
	db             time.Duration // the database's (-store postgres)
}

// printCost prints the line of a cost run: the CPU time of holds leases
// held from held to end, less the same time idle (idle to taking), per
// second of held lease, and what taking them cost (taking to held).
func printCost(name string, holds int, ttl time.Duration, renewals, retried int, idle, taking, held, end mark) {
	d := end.at.Sub(held.at)
	leaseSeconds := float64(holds) * d.Seconds()
	per := func(busy, idle time.Duration) float64 {
		return float64(busy-idle) / float64(time.Microsecond) / leaseSeconds
	}
	idleC, idleS := taking.client-idle.client, taking.server-idle.server
	fmt.Printf("%-22s holds=%d ttl=%v %d renewals (expected %.0f) in %.1fs  client %6.2f us/lease-s  server %6.2f us/lease-s  (idle: client %v, server %v; acquiring %d: client %v, server %v, %d tried again)\n",
		name, holds, ttl, renewals, float64(holds)*d.Seconds()/(ttl/3).Seconds(), d.Seconds(), per(end.client-held.client, idleC), per(end.server-held.server, idleS), idleC, idleS, holds,
		held.client-taking.client, held.server-taking.server, retried)
	if storePG != nil {
		fmt.Printf("%-22s db %6.2f us/lease-s  (idle: db %v)\n", name, per(end.db-held.db, max(0, taking.db-idle.db)), taking.db-idle.db)
	}
}

// costJS is cost with the client in a Node process (holder.mjs), which
// says when each phase begins; both processes' CPU times are read then.
func costJS(s *benchkit.Server, target string, holds int, d, ttl time.Duration, oneClient bool, transport string) error {
	if transport != "node" && transport != "fetch" {
		return fmt.Errorf("unknown -transport %q (want node or fetch)", transport)
	}
	many := "many"
	if oneClient {
		many = "one"
	}
	args := []string{"scripts/bench-hold/holder.mjs", s.URL, strconv.Itoa(holds), strconv.FormatInt(d.Milliseconds(), 10), strconv.FormatInt(ttl.Milliseconds(), 10), many, transport}
	cmd := exec.Command("node", args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	marks := map[string]mark{}
	var end []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		marks[f[0]] = mark{time.Now(), benchkit.Must(benchkit.GroupCPU(cmd.Process.Pid)), benchkit.Must(benchkit.GroupCPU(s.Pid())), benchkit.PGCPU(storePG)}
		if f[0] == "end" {
			end = f[1:]
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("holder.mjs: %w", err)
	}
	var renewals, retried int
	if len(end) == 3 {
		renewals, err = strconv.Atoi(end[0])
		if err == nil {
			retried, err = strconv.Atoi(end[2])
		}
	}
	if len(end) != 3 || err != nil {
		return fmt.Errorf("holder.mjs ended without its end line (%q)", end)
	}
	name := target + "-cost-js"
	if oneClient {
		name += "-one"
	}
	if transport == "fetch" {
		name += "-fetch"
	}
	printCost(name, holds, ttl, renewals, retried, marks["idle"], marks["taking"], marks["held"], marks["end"])
	return nil
}

// The tokens of -mode limits: one with a maxLeases, one without.
const (
	limitedToken = "bench-limited-token-0123456789abcdef"
	plainToken   = "bench-plain-token-0123456789abcdef01"
)

// limitsEnv is the env file of -mode limits: LEASE_TOKENS with both.
func limitsEnv() string {
	limited := benchkit.TokenEntry("limited", limitedToken)
	limited["maxLeases"] = 1000
	file, _ := json.Marshal([]map[string]any{limited, benchkit.TokenEntry("plain", plainToken)})
	return "LEASE_TOKENS='" + string(file) + "'\n"
}

// limits measures, in rounds, the two tokens of limitsEnv in turn: n
// acquisitions and releases of fresh resources (after 5 to warm up), then
// n handovers; it reports each side's samples pooled over the rounds, and
// for each measure the ratio of the limited token's p50 to the plain
// one's in the same round (min / median / max over the rounds).
func limits(s *benchkit.Server, n, rounds int, settle time.Duration) error {
	ctx := context.Background()
	sides := []struct{ name, token string }{{"plain", plainToken}, {"limited", limitedToken}}
	measures := []string{"acquire", "release", "handover"}
	all := map[string][]time.Duration{} // "side/measure": the samples of every round
	ratios := map[string][]float64{}
	p50 := func(lat []time.Duration) float64 { _, m, _ := benchkit.Spread(lat); return benchkit.Ms(m) }
	for r := range rounds {
		got := map[string][]time.Duration{} // "side/measure": this round's
		for i := range sides {
			side := sides[(i+r)%len(sides)] // which side goes first alternates
			c, err := tokenClient(s.URL, "cycler", side.token)
			if err != nil {
				return err
			}
			for j := range n + 5 {
				res := fmt.Sprintf("cycle-%s-%d-%d-%d", side.name, r, j, time.Now().UnixNano())
				t0 := time.Now()
				l, err := c.Acquire(ctx, res)
				if err != nil {
					return fmt.Errorf("%s: acquire: %w", side.name, err)
				}
				t1 := time.Now()
				if err := c.Release(ctx, l); err != nil {
					return fmt.Errorf("%s: release: %w", side.name, err)
				}
				if j >= 5 {
					got[side.name+"/acquire"] = append(got[side.name+"/acquire"], t1.Sub(t0))
					got[side.name+"/release"] = append(got[side.name+"/release"], time.Since(t1))
				}
			}
			if got[side.name+"/handover"], err = handovers(s, n, settle, side.token); err != nil {
				return fmt.Errorf("%s: %w", side.name, err)
			}
		}
		for _, m := range measures {
			ratios[m] = append(ratios[m], p50(got["limited/"+m])/p50(got["plain/"+m]))
		}
		for k, lat := range got {
			all[k] = append(all[k], lat...)
		}
	}
	for _, side := range sides {
		for _, m := range measures {
			report("worker-"+side.name+"-"+m, all[side.name+"/"+m])
		}
	}
	for _, name := range measures {
		fmt.Printf("%-9s p50 limited/plain in the same round, over %d rounds (min / median / max): %s\n", name, rounds, benchkit.MMM(ratios[name], "%.2f"))
	}
	return nil
}
