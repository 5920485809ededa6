//go:build !js

// Command bench-service measures the coordinator as a service: acquire +
// release cycles per second over HTTP on loopback, with 1 and concurrent
// clients, each on its own resource, for
//
//	native          cmd/coordinator -memory
//	native-durable  cmd/coordinator -init -state DIR (Pebble, synced before every grant)
//	worker          the Go Worker (wasm/worker) under wrangler dev
//	worker-plain-js the plain-JavaScript Durable Object (wasm/worker/plain.mjs)
//
// A native target may end in -raw (driven by a minimal HTTP/1.1 client: one
// connection, prebuilt requests, like scripts/peers' RESP client) or -sess
// (client.Client with Config.Sessions: its calls on call sessions), then
// -auth (a tokens file of 10 entries, the clients' the last) and -tls (a
// private CA made at the start; one handshake per client), in that order:
// native-durable-raw-auth-tls. The targets run side by side, measured in
// turns for -rounds; each stops after -cycles or -duration in all. Redis
// and etcd are measured by scripts/peers; scripts/bench-service.sh runs both.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/internal/cputime"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/test/rig/testpki"
)

func main() {
	targets := flag.String("targets", "native,native-durable,worker,worker-plain-js", "comma-separated targets to measure")
	closed := benchkit.ClosedFlags()
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
			benchkit.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			benchkit.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *latencySizes != "" {
		sizes, err := benchkit.Ints(*latencySizes, 0, 1<<30)
		if err == nil {
			err = latency(*coordinator, sizes, *samples)
		}
		if err != nil {
			benchkit.Fatal(err)
		}
		return
	}
	cs := closed.Clients()
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
			benchkit.Fatal(fmt.Errorf("%s: %w", t, err))
		}
		srvs[i] = srv
	}
	for _, c := range cs {
		totals := make([]Result, len(names))
		for round := 0; round < *rounds; round++ {
			for i, t := range names {
				// /metrics is read outside the CPU and switches measured.
				h0, sy0 := srvs[i].timings()
				srv0, sw0 := srvs[i].usage()
				cli0 := cputime.Process()
				r, err := measure(srvs[i], t, c, closed.Cycles / *rounds, closed.Duration/time.Duration(*rounds))
				totals[i].ClientCPU += cputime.Process() - cli0
				srv1, sw1 := srvs[i].usage()
				totals[i].ServerCPU += srv1 - srv0
				totals[i].Switches += sw1 - sw0
				h1, sy1 := srvs[i].timings()
				totals[i].Handled += h1 - h0
				totals[i].Synced += sy1 - sy0
				if err != nil {
					benchkit.Fatal(fmt.Errorf("%s: %w", t, err))
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
	fmt.Print(benchkit.Rate(r.Name, r.Clients, r.Cycles, r.Elapsed, 2))
	if r.ServerCPU > 0 && r.Cycles > 0 {
		fmt.Printf("  %7.1f server-us/cycle  %7.1f client-us/cycle  %5.1f server-switches/cycle", r.ServerCPU.Seconds()*1e6/float64(r.Cycles),
			r.ClientCPU.Seconds()*1e6/float64(r.Cycles), float64(r.Switches)/float64(r.Cycles))
	}
	if r.Handled > 0 && r.Cycles > 0 {
		fmt.Printf("  %7.1f handler-us/cycle  %7.1f sync-us/cycle", r.Handled.Seconds()*1e6/float64(r.Cycles), r.Synced.Seconds()*1e6/float64(r.Cycles))
	}
	fmt.Println()
}

// pid is the process of a native coordinator of ours, or 0.
func (s *server) pid() int {
	if s.proc == nil || !s.native {
		return 0
	}
	return s.proc.Pid()
}

// usage is the CPU time the server's process used so far and how many
// times its threads went off a CPU (zeros for a server that is not a
// native coordinator of ours).
func (s *server) usage() (time.Duration, int64) {
	if s.pid() == 0 {
		return 0, 0
	}
	return benchkit.ThreadCPU(s.pid()), benchkit.Switches(s.pid())
}

// timings reads, from the server's /metrics, the time it spent so far in
// the handlers of acquisitions and releases and in synced writes of its
// state (the sums of leasefence_request_duration_seconds and
// leasefence_store_sync_seconds); zeros for a server that is not a native
// coordinator of ours or whose /metrics needs a token.
func (s *server) timings() (handled, synced time.Duration) {
	if s.pid() == 0 || s.token != "" || !strings.HasPrefix(s.url, "http://") {
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
	proc *benchkit.Server // nil: not ours (-url)
	// token is the clients' bearer token ("" without -auth); tls their
	// configuration for an https:// server.
	token  string
	tls    *tls.Config
	native bool // proc is the coordinator itself
}

func (s *server) stop() {
	if s.proc != nil {
		s.proc.Stop()
	}
}

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
	for i := range 9 {
		file = append(file, benchkit.TokenEntry("other-"+strconv.Itoa(i), "bench-token-"+strconv.Itoa(i)+"-unused-0123456789"))
	}
	file = append(file, benchkit.TokenEntry("bench", benchToken))
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
	case "native", "native-raw", "native-sess":
		cmd = exec.Command(coordinator, append([]string{"-addr", "127.0.0.1:0", "-quiet", "-memory"}, extra...)...)
	case "native-durable", "native-durable-raw", "native-durable-sess":
		cmd = exec.Command(coordinator, append([]string{"-addr", "127.0.0.1:0", "-quiet", "-init", "-state", filepath.Join(tmp, "state.db")}, extra...)...)
	case "worker", "worker-plain-js":
		var args []string
		if name == "worker-plain-js" {
			args = []string{"--config", "plain.wrangler.toml"}
		}
		if cmd, err = benchkit.Wrangler(wrangler, tmp, args...); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("unknown target (want native, native-raw, native-sess, native-durable, native-durable-raw, native-durable-sess, each with -auth, -tls or -auth-tls or not, worker, worker-plain-js)")
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

// startCmd starts a server and waits for the URL it prints; its output
// (the runtime's complaints about connections the benchmark closes
// included) is not shown, but for its last lines if it fails to start.
func startCmd(cmd *exec.Cmd, tmp string) (*server, error) {
	p, err := benchkit.Start(cmd, tmp, nil, false)
	if err != nil {
		return nil, err
	}
	return &server{url: p.URL, proc: p}, nil
}

var run atomic.Int64

// measure runs clients goroutines of acquire+release cycles on their own
// resources until cycles are done or d has passed.
func measure(s *server, name string, clients, cycles int, d time.Duration) (Result, error) {
	base, _, _ := nativeOptions(strings.TrimSuffix(name, "-warmup"))
	id := run.Add(1)
	cycle := make([]func(ctx context.Context, resource string, n int) error, clients)
	for i := range cycle {
		if strings.HasSuffix(base, "-raw") {
			c, err := dialRaw(s)
			if err != nil {
				return Result{}, err
			}
			defer c.conn.Close()
			cycle[i] = func(_ context.Context, res string, n int) error { return c.cycle(res, fmt.Sprintf("raw-%d", i), n) }
			continue
		}
		// Each client has its own client.Client in its default
		// configuration, whose kept-alive connection it reuses: one
		// connection per client, as for the RESP clients of scripts/peers.
		c, err := benchkit.NewClient(fmt.Sprintf("bench-%d", i), 0, client.Config{BaseURL: s.url, AttemptTimeout: 30 * time.Second, Token: s.token, TLS: s.tls,
			Sessions: strings.HasSuffix(base, "-sess")})
		if err != nil {
			return Result{}, err
		}
		defer c.CloseIdleConnections()
		cycle[i] = func(ctx context.Context, res string, _ int) error {
			l, err := c.Acquire(ctx, res)
			if err == nil {
				err = c.Release(ctx, l)
			}
			return err
		}
	}
	n := make([]int, clients)
	done, el, err := benchkit.Loop(clients, cycles, d, func(ctx context.Context, i int) error {
		n[i]++
		return cycle[i](ctx, fmt.Sprintf("bench-%s-%d-%d", name, id, i), n[i])
	})
	return Result{Name: name, Clients: clients, Cycles: done, Elapsed: el}, err
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

func (c *rawClient) post(path, body string) ([]byte, error) {
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
	return benchkit.Answer(http.ReadResponse(c.r, nil))
}

// rawSecret is the secret of every acquisition of the minimal client (a
// benchmark has nobody to hide it from).
const rawSecret = "bench-secret-0123456789"

func (c *rawClient) cycle(resource, holder string, n int) error {
	// Request ids are unique per resource (and resources per run): the
	// coordinator refuses an id used before for another resource.
	return benchkit.Poster(c.post).Cycle(strconv.Itoa(n)+"-"+resource, resource, holder, rawSecret, int64(n))
}
