//go:build !js

// Command bench-service measures the coordinator as a service: acquire +
// release cycles per second over HTTP on loopback, sequentially and with
// concurrent clients, for
//
//	native          cmd/coordinator -memory
//	native-raw      the same server driven by a minimal HTTP/1.1 client (one
//	                connection, prebuilt requests, no lease.Client), like the
//	                few-line RESP client scripts/peers uses for Redis: what
//	                the server can do when the client costs little
//	native-durable  cmd/coordinator -init -state DIR (Pebble, synced before every grant)
//	native-durable-raw  the same driven by the minimal client
//	worker          the Go Worker (wasm/worker) under wrangler dev
//	worker-plain-js the plain-JavaScript Durable Object (wasm/worker/plain.mjs)
//
// A native target may end in -auth (the server with -auth: a tokens file
// of 10 entries, the clients' token the last; every call carries it), -tls
// (the server with -tls-cert/-tls-key of a private CA made at the start;
// the clients trust it, and keep their connections alive: one handshake
// per client and run), or both, in that order: native-raw-auth-tls,
// native-durable-auth.
//
// Every client holds its own resource, so the figures measure throughput,
// not contention. All targets run side by side and are measured in turns
// (-rounds); each target's figure stops after -cycles cycles or -duration in
// total, whichever comes first. Redis and etcd are measured by scripts/peers (its own module);
// scripts/bench-service.sh runs both. Loopback only.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lease-fence/lease-fence/internal/testrig/cputime"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/internal/testrig/procgroup"
	"github.com/lease-fence/lease-fence/internal/testrig/testpki"
	"github.com/lease-fence/lease-fence/service/client"
)

func main() {
	targets := flag.String("targets", "native,native-durable,worker,worker-plain-js", "comma-separated targets to measure")
	cycles := flag.Int("cycles", 2000, "stop a run after this many acquire+release cycles")
	duration := flag.Duration("duration", 5*time.Second, "stop a run after this long")
	concs := flag.String("conc", "1,8", "comma-separated client counts")
	rounds := flag.Int("rounds", 4, "measure the targets in turns, this many rounds")
	coordinator := flag.String("coordinator", "out/bin/coordinator", "the built native server")
	wrangler := flag.String("wrangler", "node_modules/.bin/wrangler", "wrangler")
	latencySizes := flag.String("latency", "", "instead: p50 acquire on durable servers holding these many live leases, e.g. 100,100000")
	samples := flag.Int("samples", 2000, "with -latency: acquisitions timed per server")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process (the clients) to this file")
	url := flag.String("url", "", "instead: drive the coordinator already serving at this URL (the targets name the clients: native for client.Client, native-raw for the minimal one), e.g. to profile it")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *latencySizes != "" {
		var sizes []int
		for _, f := range strings.Split(*latencySizes, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 0 {
				fail(fmt.Errorf("bad -latency %q", f))
			}
			sizes = append(sizes, n)
		}
		if err := latency(*coordinator, sizes, *samples); err != nil {
			fail(err)
		}
		return
	}
	var cs []int
	for _, s := range strings.Split(*concs, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 64 {
			fail(fmt.Errorf("bad -conc %q", s))
		}
		cs = append(cs, n)
	}
	// All targets run at once and are measured in turns, a slice of each
	// run per round, so a load spike on this shared machine hits them alike.
	names := strings.Split(*targets, ",")
	srvs := make([]*server, len(names))
	defer func() {
		for _, s := range srvs {
			if s != nil {
				s.stop()
			}
		}
	}()
	for i, t := range names {
		if *url != "" {
			srvs[i] = &server{url: *url}
			continue
		}
		srv, err := startTarget(t, *coordinator, *wrangler)
		if err != nil {
			fail(fmt.Errorf("%s: %w", t, err))
		}
		srvs[i] = srv
	}
	for _, c := range cs {
		totals := make([]Result, len(names))
		for round := 0; round < *rounds; round++ {
			for i, t := range names {
				// /metrics is read outside the CPU and switches measured.
				h0, sy0 := srvs[i].timings()
				srv0, cli0, sw0 := srvs[i].cpu(), cputime.Process(), srvs[i].switches()
				r, err := measure(srvs[i], t, c, *cycles / *rounds, *duration/time.Duration(*rounds))
				totals[i].ServerCPU += srvs[i].cpu() - srv0
				totals[i].ClientCPU += cputime.Process() - cli0
				totals[i].Switches += srvs[i].switches() - sw0
				h1, sy1 := srvs[i].timings()
				totals[i].Handled += h1 - h0
				totals[i].Synced += sy1 - sy0
				if err != nil {
					for _, s := range srvs {
						s.stop()
					}
					fail(fmt.Errorf("%s: %w", t, err))
				}
				totals[i].Name, totals[i].Clients = t, c
				totals[i].Cycles += r.Cycles
				totals[i].Elapsed += r.Elapsed
			}
		}
		for _, r := range totals {
			r.print()
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-service:", err)
	os.Exit(1)
}

// Result is one measured run; scripts/peers prints the same line.
type Result struct {
	Name    string
	Clients int
	Cycles  int64
	Elapsed time.Duration
	// ServerCPU is the CPU time the server process used meanwhile (native
	// targets only), ClientCPU this process's: on a machine shared with
	// other work, CPU time per cycle is steadier than cycles per second.
	ServerCPU, ClientCPU time.Duration
	// Switches is how many times the server's threads went off a CPU
	// meanwhile (voluntary and not; native targets only): each is a
	// thread that went to sleep and was woken again, or was preempted.
	Switches int64
	// Handled is the time the server spent in its handlers (acquire and
	// release, from the request read to the answer written), Synced in
	// synced writes of its state (the store's part of a grant: Pebble's
	// commit and its fdatasync), summed over the calls (from its /metrics;
	// native targets without tokens only).
	Handled, Synced time.Duration
}

func (r Result) print() {
	s := r.Elapsed.Seconds()
	fmt.Printf("%-18s clients=%-2d %6d cycles in %5.2fs  %8.0f cycles/s  %8.0f calls/s",
		r.Name, r.Clients, r.Cycles, s, float64(r.Cycles)/s, 2*float64(r.Cycles)/s)
	if r.ServerCPU > 0 && r.Cycles > 0 {
		fmt.Printf("  %7.1f server-us/cycle  %7.1f client-us/cycle  %5.1f server-switches/cycle", r.ServerCPU.Seconds()*1e6/float64(r.Cycles),
			r.ClientCPU.Seconds()*1e6/float64(r.Cycles), float64(r.Switches)/float64(r.Cycles))
	}
	if r.Handled > 0 && r.Cycles > 0 {
		fmt.Printf("  %7.1f handler-us/cycle  %7.1f sync-us/cycle", r.Handled.Seconds()*1e6/float64(r.Cycles), r.Synced.Seconds()*1e6/float64(r.Cycles))
	}
	fmt.Println()
}

// cpu is the CPU time the server's process used so far, the sum over its
// threads of /proc/PID/task/TID/schedstat's first field (nanoseconds on a
// CPU); 0 for a server that is not a native coordinator of ours.
func (s *server) cpu() time.Duration {
	var total time.Duration
	s.eachThread("schedstat", func(data string) {
		if f := strings.Fields(data); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(n)
		}
	})
	return total
}

// switches is how many times the server's threads went off a CPU so far,
// the sum over its threads of the voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches of /proc/PID/task/TID/status; 0 for a server
// that is not a native coordinator of ours. Threads that ended meanwhile
// drop out of the sum (the Go runtime keeps its threads).
func (s *server) switches() int64 {
	var total int64
	s.eachThread("status", func(data string) {
		for _, line := range strings.Split(data, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				total += n
			}
		}
	})
	return total
}

// eachThread calls f with the text of /proc/PID/task/TID/file for each
// thread of a native coordinator's process; nothing for another server.
func (s *server) eachThread(file string, f func(string)) {
	if s.cmd == nil || !s.native {
		return
	}
	dir := "/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/" + file)
		if err != nil {
			continue // the thread ended meanwhile
		}
		f(string(data))
	}
}

// timings reads, from the server's /metrics, the time it spent so far in
// the handlers of acquisitions and releases and in synced writes of its
// state (the sums of leasefence_request_duration_seconds and
// leasefence_store_sync_seconds); zeros for a server that is not a native
// coordinator of ours or whose /metrics needs a token.
func (s *server) timings() (handled, synced time.Duration) {
	if s.cmd == nil || !s.native || s.token != "" || !strings.HasPrefix(s.url, "http://") {
		return 0, 0
	}
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		d := time.Duration(secs * float64(time.Second))
		switch name {
		case `leasefence_request_duration_seconds_sum{op="acquire"}`, `leasefence_request_duration_seconds_sum{op="release"}`:
			handled += d
		case "leasefence_store_sync_seconds_sum":
			synced += d
		}
	}
	return handled, synced
}

type server struct {
	url  string
	cmd  *exec.Cmd
	tmp  string
	done chan struct{}
	// token is the clients' bearer token ("" without -auth); tls their
	// configuration for an https:// server.
	token  string
	tls    *tls.Config
	native bool // cmd is the coordinator itself
}

func (s *server) stop() {
	if s.cmd == nil {
		return // not ours (-url)
	}
	procgroup.Stop(s.cmd.Process.Pid, s.done, 15*time.Second)
	os.RemoveAll(s.tmp)
}

var urlRe = regexp.MustCompile(`(?:listening on|Ready on) (https?://127\.0\.0\.1:\d+)`)

// benchToken is the clients' token with -auth.
const benchToken = "bench-token-of-the-clients-0123456789abcdef"

// nativeOptions cuts the -auth and -tls ends off a native target's name.
func nativeOptions(name string) (base string, withAuth, withTLS bool) {
	base, withTLS = strings.CutSuffix(name, "-tls")
	base, withAuth = strings.CutSuffix(base, "-auth")
	return base, withAuth, withTLS
}

// tokensFile writes a tokens file of 10 entries in dir, benchToken's the
// last, and returns its path.
func tokensFile(dir string) (string, error) {
	var file []map[string]any
	for i := range 10 {
		tok := "bench-token-" + strconv.Itoa(i) + "-unused-0123456789"
		name := "other-" + strconv.Itoa(i)
		if i == 9 {
			tok, name = benchToken, "bench"
		}
		h := sha256.Sum256([]byte(tok))
		file = append(file, map[string]any{"name": name, "tokenSha256": hex.EncodeToString(h[:]), "resources": []string{"*"}, "holders": []string{"*"}})
	}
	data, err := json.Marshal(file)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "tokens.json")
	return path, os.WriteFile(path, data, 0o600)
}

func startTarget(name, coordinator, wrangler string) (*server, error) {
	tmp, err := os.MkdirTemp("", "bench-service-")
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	base, withAuth, withTLS := nativeOptions(name)
	var extra []string
	var token string
	var tlsCfg *tls.Config
	if withAuth {
		file, err := tokensFile(tmp)
		if err != nil {
			return nil, err
		}
		extra, token = append(extra, "-auth", file), benchToken
	}
	if withTLS {
		pki, err := testpki.New(tmp, "bench")
		if err != nil {
			return nil, err
		}
		if tlsCfg, err = pki.ClientConfig(false); err != nil {
			return nil, err
		}
		extra = append(extra, "-tls-cert", pki.Server, "-tls-key", pki.ServerKey)
	}
	switch base {
	case "native", "native-raw":
		cmd = exec.Command(coordinator, append([]string{"-addr", "127.0.0.1:0", "-quiet", "-memory"}, extra...)...)
	case "native-durable", "native-durable-raw":
		cmd = exec.Command(coordinator, append([]string{"-addr", "127.0.0.1:0", "-quiet", "-init", "-state", filepath.Join(tmp, "state.db")}, extra...)...)
	case "worker", "worker-plain-js":
		wr, err := filepath.Abs(wrangler)
		if err != nil {
			return nil, err
		}
		args := []string{"dev", "--ip", "127.0.0.1", "--port", "0", "--inspector-port", "0", "--persist-to", tmp, "--log-level", "info", "--show-interactive-dev-session=false"}
		if name == "worker-plain-js" {
			args = append(args, "--config", "plain.wrangler.toml")
		}
		cmd = exec.Command(wr, args...)
		cmd.Dir = "wasm/worker"
		cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CLOUDFLARE_CF_FETCH_ENABLED=false", "CI=1", "NO_COLOR=1")
	default:
		return nil, errors.New("unknown target (want native, native-raw, native-durable, native-durable-raw, each with -auth, -tls or -auth-tls or not, worker, worker-plain-js)")
	}
	if (withAuth || withTLS) && !strings.HasPrefix(base, "native") {
		return nil, errors.New("-auth and -tls are for native targets")
	}
	s, err := startCmd(cmd, tmp)
	if err != nil {
		return nil, err
	}
	s.token, s.tls, s.native = token, tlsCfg, strings.HasPrefix(base, "native")
	// Warm up: the first call to a Worker compiles and starts the wasm.
	if _, err := measure(s, name+"-warmup", 1, 20, 30*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// startCmd starts a server and waits for the URL it prints.
func startCmd(cmd *exec.Cmd, tmp string) (*server, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The runtime's own log (including complaints about connections the
	// benchmark closes) goes to a file, shown only if it fails to start.
	logf, err := os.Create(filepath.Join(tmp, "server.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, tmp: tmp, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := urlRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		close(found)
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	select {
	case u, ok := <-found:
		if !ok {
			log, _ := os.ReadFile(logf.Name())
			return nil, errors.New("exited before it was ready:\n" + string(log))
		}
		s.url = u
	case <-time.After(90 * time.Second):
		s.stop()
		return nil, errors.New("not ready after 90s")
	}
	return s, nil
}

var run atomic.Int64

// measure runs clients goroutines of acquire+release cycles on their own
// resources until cycles are done or d has passed.
func measure(s *server, name string, clients, cycles int, d time.Duration) (Result, error) {
	if base, _, _ := nativeOptions(strings.TrimSuffix(name, "-warmup")); strings.HasSuffix(base, "-raw") {
		return measureRaw(s, name, clients, cycles, d)
	}
	// Each client has its own client.Client in its default configuration,
	// whose kept-alive connection it reuses: one connection per client,
	// as for the RESP clients of scripts/peers.
	ws := make([]*client.Client, clients)
	defer func() {
		for _, c := range ws {
			if c != nil {
				c.CloseIdleConnections()
			}
		}
	}()
	id := run.Add(1)
	for i := range ws {
		holder := fmt.Sprintf("bench-%d", i)
		clk, err := clock.NewMonotonic(holder)
		if err != nil {
			return Result{}, err
		}
		lc, err := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: holder})
		if err != nil {
			return Result{}, err
		}
		if ws[i], err = client.New(client.Config{BaseURL: s.url, Lease: lc, AttemptTimeout: 30 * time.Second, Token: s.token, TLS: s.tls}); err != nil {
			return Result{}, err
		}
	}
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range ws {
		wg.Add(1)
		go func(i int, c *client.Client) {
			defer wg.Done()
			res := fmt.Sprintf("bench-%s-%d-%d", name, id, i)
			for ctx.Err() == nil && done.Load() < int64(cycles) {
				l, err := c.Acquire(ctx, res)
				if err == nil {
					err = c.Release(ctx, l)
				}
				if err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err; cancel() })
					}
					return
				}
				done.Add(1)
			}
		}(i, c)
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return Result{}, firstErr
	}
	return Result{Name: name, Clients: clients, Cycles: done.Load(), Elapsed: el}, nil
}

// measureRaw is measure with rawClient instead of client.Client.
func measureRaw(s *server, name string, clients, cycles int, d time.Duration) (Result, error) {
	id := run.Add(1)
	cs := make([]*rawClient, clients)
	for i := range cs {
		c, err := dialRaw(s)
		if err != nil {
			return Result{}, err
		}
		defer c.conn.Close()
		cs[i] = c
	}
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range cs {
		wg.Add(1)
		go func(i int, c *rawClient) {
			defer wg.Done()
			res := fmt.Sprintf("bench-%s-%d-%d", name, id, i)
			holder := fmt.Sprintf("raw-%d", i)
			for n := 0; time.Now().Before(deadline) && done.Load() < int64(cycles); n++ {
				if err := c.cycle(res, holder, n); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		}(i, c)
	}
	wg.Wait()
	if firstErr != nil {
		return Result{}, firstErr
	}
	return Result{Name: name, Clients: clients, Cycles: done.Load(), Elapsed: time.Since(start)}, nil
}

// rawClient speaks just enough HTTP/1.1 over one kept-alive connection
// (a TLS one to an https:// server).
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
	auth string // the Authorization header line, or ""
}

func dialRaw(s *server) (*rawClient, error) {
	var c net.Conn
	var err error
	if host, ok := strings.CutPrefix(s.url, "https://"); ok {
		cfg := s.tls.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		c, err = tls.Dial("tcp", host, cfg)
	} else {
		c, err = net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	}
	if err != nil {
		return nil, err
	}
	rc := &rawClient{conn: c, r: bufio.NewReader(c)}
	if s.token != "" {
		rc.auth = "Authorization: Bearer " + s.token + "\r\n"
	}
	return rc, nil
}

func (c *rawClient) post(path string, body []byte) ([]byte, error) {
	c.buf = append(c.buf[:0], "POST "...)
	c.buf = append(c.buf, path...)
	c.buf = append(c.buf, " HTTP/1.1\r\nHost: bench\r\n"...)
	c.buf = append(c.buf, c.auth...)
	c.buf = append(c.buf, "Content-Type: application/json\r\nContent-Length: "...)
	c.buf = strconv.AppendInt(c.buf, int64(len(body)), 10)
	c.buf = append(c.buf, "\r\n\r\n"...)
	c.buf = append(c.buf, body...)
	if _, err := c.conn.Write(c.buf); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, data)
	}
	return data, nil
}

// rawSecret is the secret of every acquisition of the minimal client (a
// benchmark has nobody to hide it from).
const rawSecret = "bench-secret-0123456789"

func (c *rawClient) cycle(resource, holder string, n int) error {
	// Request ids are unique per resource (and resources per run): the
	// coordinator refuses an id used before for another resource.
	id := strconv.Itoa(n) + "-" + resource
	acq := `{"requestId":"a` + id + `","resource":"` + resource + `","holderId":"` + holder +
		`","sentAt":{"millis":` + strconv.Itoa(n) + `,"domain":"` + holder + `"},"kind":"acquire","secret":"` + rawSecret + `"}`
	data, err := c.post("/v1/acquire", []byte(acq))
	if err != nil {
		return err
	}
	var reply struct {
		OK    bool `json:"ok"`
		Grant struct {
			Fence uint64 `json:"fence"`
		} `json:"grant"`
	}
	if err := json.Unmarshal(data, &reply); err != nil || !reply.OK {
		return fmt.Errorf("acquire: %s", data)
	}
	rel := `{"requestId":"r` + id + `","resource":"` + resource + `","holderId":"` + holder +
		`","fence":` + strconv.FormatUint(reply.Grant.Fence, 10) + `,"secret":"` + rawSecret + `"}`
	data, err = c.post("/v1/release", []byte(rel))
	if err != nil {
		return err
	}
	if string(data) != `{"ok":true}` {
		return fmt.Errorf("release: %s", data)
	}
	return nil
}
