//go:build linux

// Command bench-hold measures holding on loopback (docs/service.md,
// Benchmarks), one measurement per invocation, as one line that
// scripts/bench-hold.sh collects (it interleaves the targets and etcd,
// measured by scripts/peers, in rounds):
//
//	-mode handover  release to the next waiter holding the lease: two
//	                holders (client.Client.Hold) pass one resource back and
//	                forth; before each release the waiter is in the queue
//	                (native: /debug/waiting; Worker: 100 ms after its call
//	                left, which a loopback call to wrangler dev takes far
//	                less than), and has waited -settle (150 ms) more, as
//	                etcd's waiter does in scripts/peers. -n handovers;
//	                p50, p99, min, max.
//	-mode expiry    an expiry to the waiter holding the lease: the holder
//	                neither renews nor releases; the waiter's grant arrives
//	                after the expiry the coordinator reported. -n samples.
//	-mode limits    a token's maxLeases on the Worker (-target worker):
//	                one wrangler dev whose LEASE_TOKENS lists a token
//	                with a maxLeases (its leases counted in its own
//	                Durable Object) and one without; -rounds rounds, the
//	                two in turn in each: -n acquisitions then releases of
//	                a fresh resource (the latency of each), and -n
//	                handovers as in -mode handover.
//	-mode cost      the CPU time of holding: -holds leases held (Hold,
//	                renewed every third of the TTL) for -duration, the
//	                client's CPU (this process) and the server's
//	                (/proc/PID/stat), each less the same duration idle, per
//	                second of held lease. With -client js, the client is
//	                a Node process (scripts/bench-hold/holder.mjs, with
//	                LeaseServiceClient.hold, over -transport: node for
//	                node:http, fetch for fetch), its CPU read from /proc.
//	                The renewals counted are those of the held phase
//	                (expected: holds x duration / (TTL/3)).
//
// Targets: native (cmd/coordinator, durable: -init -state) and worker (the
// Go Worker under wrangler dev).
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lease-fence/lease-fence/internal/testrig/cputime"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/internal/testrig/pgtest"
	"github.com/lease-fence/lease-fence/internal/testrig/procgroup"
	"github.com/lease-fence/lease-fence/internal/testrig/syncio"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
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
			fail(errors.New("-mode limits needs -target worker"))
		}
		env = limitsEnv()
	}

	var logTo io.Writer = io.Discard
	if *serverLog != "" {
		f, err := os.Create(*serverLog)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		logTo = &syncio.Writer{W: f} // the server's two pipes
	}
	switch *store {
	case "pebble":
	case "postgres":
		if *target != "native" {
			fail(errors.New("-store postgres needs -target native"))
		}
		pg, err := pgtest.Start(pgtest.Options{Durable: true})
		if err != nil {
			fail(err)
		}
		defer pg.Stop()
		storePG = pg
	default:
		fail(errors.New("unknown -store (want pebble or postgres)"))
	}
	s, err := start(*target, *coordinator, *wrangler, *ttl, env, logTo)
	if err != nil {
		fail(err)
	}
	running.Store(s)
	defer s.stop()
	// Interrupted (^C, or the script's own end), the server is stopped too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { fail(fmt.Errorf("%v", <-sig)) }()
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
		s.stop()
		fail(err)
	}
}

// running is the server of this run, which fail stops: a wrangler dev
// left behind keeps its workerd processes (and gigabytes) alive.
var running atomic.Pointer[server]

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-hold:", err)
	if s := running.Load(); s != nil {
		s.stop()
	}
	os.Exit(1)
}

type server struct {
	url, debug string
	cmd        *exec.Cmd
	tmp        string
	done       chan struct{}
	stopOnce   sync.Once
}

// stop ends the server's process group (once, whoever calls it).
func (s *server) stop() {
	s.stopOnce.Do(func() {
		if s.cmd.Process == nil {
			return
		}
		procgroup.Stop(s.cmd.Process.Pid, s.done, 15*time.Second)
		os.RemoveAll(s.tmp)
	})
}

var (
	urlRe   = regexp.MustCompile(`(?:listening on|Ready on) (http://127\.0\.0\.1:\d+)`)
	debugRe = regexp.MustCompile(`debug on (http://127\.0\.0\.1:\d+)/`)
)

// storePG is the PostgreSQL server of -store postgres, or nil.
var storePG *pgtest.Server

// dbCPU is the CPU time of storePG's processes (the postmaster and the
// processes it started that still run: each backend is a session of its
// own), or 0.
func dbCPU() time.Duration {
	if storePG == nil {
		return 0
	}
	pid, err := storePG.Pid()
	if err != nil {
		fail(err)
	}
	kids, err := storePG.Children()
	if err != nil {
		fail(err)
	}
	total := must(cpuOfPid(pid))
	for k := range kids {
		if t, err := cpuOfPid(k); err == nil {
			total += t
		}
	}
	return total
}

// cpuOfPid is the CPU time (user + system) of process pid, from /proc.
func cpuOfPid(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 > len(data) {
		return 0, errors.New("bench-hold: /proc/" + strconv.Itoa(pid) + "/stat is not as expected")
	}
	f := strings.Fields(string(data[i+2:]))
	if len(f) < 13 {
		return 0, errors.New("bench-hold: /proc/" + strconv.Itoa(pid) + "/stat is not as expected")
	}
	var ticks int64
	for _, k := range []int{11, 12} { // utime and stime, fields 14 and 15
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// start runs the target with the TTL ttl (the Worker with the lines of env
// in an --env-file, if any), copies its output to logTo and waits for its URL.
func start(target, coordinator, wrangler string, ttl time.Duration, env string, logTo io.Writer) (*server, error) {
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
		wr, err := filepath.Abs(wrangler)
		if err != nil {
			return nil, err
		}
		args := []string{"dev", "--ip", "127.0.0.1", "--port", "0", "--inspector-port", "0", "--persist-to", filepath.Join(tmp, "state"),
			"--log-level", "info", "--show-interactive-dev-session=false", "--var", "LEASE_TTL_MS:" + strconv.FormatInt(ttl.Milliseconds(), 10)}
		if env != "" {
			file := filepath.Join(tmp, "bench.env")
			if err := os.WriteFile(file, []byte(env), 0o600); err != nil {
				return nil, err
			}
			args = append(args, "--env-file", file)
		}
		cmd = exec.Command(wr, args...)
		cmd.Dir = "wasm/worker"
		cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CLOUDFLARE_CF_FETCH_ENABLED=false", "CI=1", "NO_COLOR=1")
	default:
		return nil, errors.New("unknown -target (want native or worker)")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, tmp: tmp, done: make(chan struct{})}
	found, debug := make(chan string, 1), make(chan string, 1)
	scan := func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			fmt.Fprintf(logTo, "%s %s\n", time.Now().Format("15:04:05.000"), sc.Text())
			if m := urlRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
			if m := debugRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case debug <- m[1]:
				default:
				}
			}
		}
	}
	go scan(out)
	go scan(errp)
	go func() { _ = cmd.Wait(); close(s.done) }()
	select {
	case s.url = <-found:
	case <-s.done:
		return nil, errors.New(target + " exited before it was ready")
	case <-time.After(90 * time.Second):
		s.stop()
		return nil, errors.New(target + " not ready after 90s")
	}
	if target == "native" {
		s.debug = <-debug
	}
	return s, nil
}

func newClient(url, id string) (*client.Client, error) { return tokenClient(url, id, "") }

// tokenClient is client with a bearer token (none if "").
func tokenClient(url, id, token string) (*client.Client, error) {
	clk, err := clock.NewMonotonic(id)
	if err != nil {
		return nil, err
	}
	lc, err := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: id, ClockSkew: 10 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return client.New(client.Config{BaseURL: url, Lease: lc, Token: token, AttemptTimeout: 30 * time.Second})
}

// queued waits until the coordinator has a waiter in a queue (native), or
// 100 ms (Worker).
func (s *server) queued(ctx context.Context) error {
	if s.debug == "" {
		time.Sleep(100 * time.Millisecond)
		return nil
	}
	for ctx.Err() == nil {
		resp, err := http.Get(s.debug + "/debug/waiting")
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
func handover(s *server, target string, n int, settle time.Duration) error {
	lat, err := handovers(s, n, settle, "")
	if err != nil {
		return err
	}
	report(target+"-handover", lat)
	return nil
}

// handovers passes one resource between two holders with the token n
// times (after 10 to warm up) and returns the latency of each.
func handovers(s *server, n int, settle time.Duration, token string) ([]time.Duration, error) {
	ctx := context.Background()
	a, err := tokenClient(s.url, "a", token)
	if err != nil {
		return nil, err
	}
	b, err := tokenClient(s.url, "b", token)
	if err != nil {
		return nil, err
	}
	res := "handover-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	h, err := a.Hold(ctx, res, client.HoldOptions{})
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	holder, waiter := a, b
	for range n + 10 { // the first 10 warm up
		type result struct {
			h   *client.Held
			at  time.Time
			err error
		}
		got := make(chan result, 1)
		go func() {
			h, err := waiter.Hold(ctx, res, client.HoldOptions{Wait: 30 * time.Second})
			got <- result{h, time.Now(), err}
		}()
		if err := s.queued(ctx); err != nil {
			return nil, err
		}
		time.Sleep(settle)
		t0 := time.Now()
		if err := h.Release(ctx); err != nil {
			return nil, err
		}
		r := <-got
		if r.err != nil {
			return nil, r.err
		}
		lat = append(lat, r.at.Sub(t0))
		h, holder, waiter = r.h, waiter, holder
	}
	_ = holder
	_ = h.Release(ctx)
	return lat[10:], nil
}

// expiry measures, n times, how long after a lease expired (nobody renews
// or releases it) its waiter is granted it: the waiter's acquisition waits
// (a plain POST with waitMillis, so that what is timed is the coordinator's
// handover and not a client's renewal), and the grant's own expiry says
// when it was decided. It prints the decision's lag after the expiry (on
// the coordinator's clock) and the grant's arrival after it (Unix time on
// this host, which the coordinator's clock also reads).
func expiry(s *server, target string, n int, ttl time.Duration) error {
	ctx := context.Background()
	a, err := newClient(s.url, "a")
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
		body := fmt.Sprintf(`{"requestId":"w%d","resource":%q,"holderId":"b","sentAt":{"millis":1,"domain":"b"},"kind":"acquire","secret":"0123456789abcdef","waitMillis":%d}`,
			i, res, (ttl + 30*time.Second).Milliseconds())
		// Another call, on another resource, once the waiter waits: the
		// Go runtime's timer then belongs to that call's request (on the
		// Worker, see worker.mjs's tick).
		go func() {
			time.Sleep(ttl / 2)
			_, _ = a.Inspect(ctx, res+"-other")
		}()
		resp, err := http.Post(s.url+"/v1/acquire", "application/json", strings.NewReader(body))
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
	if samplesFile != "" {
		f, err := os.OpenFile(samplesFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fail(err)
		}
		for _, d := range lat {
			fmt.Fprintf(f, "%.4f\n", ms(d))
		}
		f.Close()
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return ms(lat[min(len(lat)-1, int(p*float64(len(lat))))]) }
	fmt.Printf("%-18s n=%-5d p50 %8.3f ms  p99 %8.3f ms  min %8.3f ms  max %8.3f ms\n", name, len(lat), q(0.5), q(0.99), ms(lat[0]), ms(lat[len(lat)-1]))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpuOfGroup is the CPU time (user + system) of the processes of process
// group pgid, from /proc: the coordinator, or wrangler dev with its workerd.
func cpuOfGroup(pgid int) (time.Duration, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 || i+2 > len(data) {
			continue
		}
		f := strings.Fields(string(data[i+2:]))
		// f[0] is the state (field 3): pgrp is field 5, utime and stime
		// fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
		if len(f) < 13 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		for _, k := range []int{11, 12} {
			v, err := strconv.ParseInt(f[k], 10, 64)
			if err != nil {
				return 0, err
			}
			ticks += v
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// cost holds leases for d and prints the CPU they cost.
func cost(s *server, target string, holds int, d, ttl time.Duration, oneClient bool) error {
	ctx := context.Background()
	pid := s.cmd.Process.Pid // its process group's
	now := func() mark { return mark{time.Now(), cputime.Process(), must(cpuOfGroup(pid)), dbCPU()} }
	// Idle first, as long as the measurement.
	idle := now()
	time.Sleep(d)
	taking := now()
	var hs []*client.Held
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Taking the leases is not measured. They are taken evenly over one
	// renewal period, so that their renewals are spread over it as
	// independent holders' are (taken at once, every renewal came in one
	// burst, which the Worker under wrangler dev answered seconds late); on
	// the Worker fewer at once (each is a new Durable Object); a Hold that
	// failed (a call answered after the TTL on a loaded machine:
	// ErrExpired) is tried again.
	sem := make(chan struct{}, map[string]int{"native": 16, "worker": 4}[target])
	retried := 0
	var shared *client.Client
	if oneClient {
		var err error
		if shared, err = newClient(s.url, "h"); err != nil {
			return err
		}
	}
	pace := time.NewTicker(ttl / 3 / time.Duration(holds))
	defer pace.Stop()
	for i := range holds {
		wg.Add(1)
		<-pace.C
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c := shared
			if c == nil {
				var err error
				if c, err = newClient(s.url, "h"+strconv.Itoa(i)); err != nil {
					fail(err)
				}
			}
			for try := 1; ; try++ {
				h, err := c.Hold(ctx, "cost-"+strconv.Itoa(i), client.HoldOptions{})
				if err == nil {
					mu.Lock()
					hs = append(hs, h)
					mu.Unlock()
					return
				}
				if try == 3 {
					fail(fmt.Errorf("taking lease %d, three times: %w", i, err))
				}
				mu.Lock()
				retried++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
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
	printCost(name, holds, ttl, renewals, retried, idle, taking, held, end)
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
func costJS(s *server, target string, holds int, d, ttl time.Duration, oneClient bool, transport string) error {
	if transport != "node" && transport != "fetch" {
		return fmt.Errorf("unknown -transport %q (want node or fetch)", transport)
	}
	many := "many"
	if oneClient {
		many = "one"
	}
	args := []string{"scripts/bench-hold/holder.mjs", s.url, strconv.Itoa(holds), strconv.FormatInt(d.Milliseconds(), 10), strconv.FormatInt(ttl.Milliseconds(), 10), many, transport}
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
		marks[f[0]] = mark{time.Now(), must(cpuOfGroup(cmd.Process.Pid)), must(cpuOfGroup(s.cmd.Process.Pid)), dbCPU()}
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

func must[T any](v T, err error) T {
	if err != nil {
		fail(err)
	}
	return v
}

// The tokens of -mode limits: one with a maxLeases, one without.
const (
	limitedToken = "bench-limited-token-0123456789abcdef"
	plainToken   = "bench-plain-token-0123456789abcdef01"
)

// limitsEnv is the env file of -mode limits: LEASE_TOKENS with both.
func limitsEnv() string {
	hash := func(tok string) string {
		h := sha256.Sum256([]byte(tok))
		return hex.EncodeToString(h[:])
	}
	file, _ := json.Marshal([]map[string]any{
		{"name": "limited", "tokenSha256": hash(limitedToken), "resources": []string{"*"}, "holders": []string{"*"}, "maxLeases": 1000},
		{"name": "plain", "tokenSha256": hash(plainToken), "resources": []string{"*"}, "holders": []string{"*"}},
	})
	return "LEASE_TOKENS='" + string(file) + "'\n"
}

// limits measures, in rounds, the two tokens of limitsEnv in turn: n
// acquisitions and releases of fresh resources (after 5 to warm up), then
// n handovers; it reports each side's samples pooled over the rounds, and
// for each measure the ratio of the limited token's p50 to the plain
// one's in the same round (min / median / max over the rounds).
func limits(s *server, n, rounds int, settle time.Duration) error {
	ctx := context.Background()
	sides := []struct{ name, token string }{{"plain", plainToken}, {"limited", limitedToken}}
	acq, rel, hand := map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}
	ratios := map[string][]float64{}
	p50 := func(lat []time.Duration) float64 {
		l := slices.Clone(lat)
		slices.Sort(l)
		return ms(l[len(l)/2])
	}
	for r := range rounds {
		marks := map[string]int{}
		for _, m := range []map[string][]time.Duration{acq, rel, hand} {
			for _, side := range sides {
				marks[fmt.Sprintf("%p/%s", m, side.name)] = len(m[side.name])
			}
		}
		for i := range sides {
			side := sides[(i+r)%len(sides)] // which side goes first alternates
			c, err := tokenClient(s.url, "cycler", side.token)
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
					acq[side.name] = append(acq[side.name], t1.Sub(t0))
					rel[side.name] = append(rel[side.name], time.Since(t1))
				}
			}
			lat, err := handovers(s, n, settle, side.token)
			if err != nil {
				return fmt.Errorf("%s: %w", side.name, err)
			}
			hand[side.name] = append(hand[side.name], lat...)
		}
		for name, m := range map[string]map[string][]time.Duration{"acquire": acq, "release": rel, "handover": hand} {
			round := func(side string) []time.Duration { return m[side][marks[fmt.Sprintf("%p/%s", m, side)]:] }
			ratios[name] = append(ratios[name], p50(round("limited"))/p50(round("plain")))
		}
	}
	for _, side := range sides {
		report("worker-"+side.name+"-acquire", acq[side.name])
		report("worker-"+side.name+"-release", rel[side.name])
		report("worker-"+side.name+"-handover", hand[side.name])
	}
	for _, name := range []string{"acquire", "release", "handover"} {
		rs := slices.Clone(ratios[name])
		slices.Sort(rs)
		fmt.Printf("%-9s p50 limited/plain in the same round, over %d rounds: min %.2f median %.2f max %.2f\n", name, len(rs), rs[0], rs[len(rs)/2], rs[len(rs)-1])
	}
	return nil
}
