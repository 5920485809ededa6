//go:build linux

// Command bench-proxy measures what fence-proxy costs in front of an HTTP
// API on loopback, each figure a comparison within one run whose two sides
// alternate (round by round, and request by request for latency):
//
//   - latency: one client, requests one after another, each sent directly
//     to the upstream or through the proxy in turn; p50 and p99 per round,
//     for reads (GET) and writes (POST with the Lease-Fence header);
//   - throughput: writes per second with 1 and 8 writers for a fixed time,
//     through the proxy (fenced) and directly (unfenced), the 8 writers on
//     one resource (the proxy forwards them one at a time) and on 8.
//
// The upstream is another process (this program with -role upstream); its
// write is either an append to memory ("memory": the proxy's overhead at its
// plainest) or an append to a file followed by fdatasync ("fsync": a durable
// write, as an API backed by storage makes). The proxy is the fence-proxy
// binary (make fence-proxy) on a fresh state file. Writes carry one fence
// per writer, so the floor is raised once and then checked; -raise makes
// every write carry a higher fence, so every write raises (and fsyncs) it.
//
// Usage: go run ./scripts/bench-proxy [-rounds 5] [-n 2000] [-dur 2s] [-work memory,fsync]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
)

func main() {
	role := flag.String("role", "bench", "bench, or upstream (internal)")
	work := flag.String("work", "memory,fsync", "the upstream's write: memory, fsync, or both (comma-separated)")
	dir := flag.String("dir", "", "upstream: directory for the fsync file")
	rounds := flag.Int("rounds", 5, "rounds per measurement")
	n := flag.Int("n", 2000, "latency: requests per side per round")
	dur := flag.Duration("dur", 2*time.Second, "throughput: time per side per round")
	proxyBin := flag.String("proxy", "out/bin/fence-proxy", "the fence-proxy binary")
	raise := flag.Bool("raise", false, "every write carries a higher fence (raises the floor each time)")
	flag.Parse()
	if *role == "upstream" {
		upstream(*work, *dir)
		return
	}
	fmt.Println("load before:", loadavg())
	for _, w := range strings.Split(*work, ",") {
		if err := bench(w, *proxyBin, *rounds, *n, *dur, *raise); err != nil {
			fmt.Fprintln(os.Stderr, "bench-proxy:", err)
			os.Exit(1)
		}
	}
	fmt.Println("load after:", loadavg())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

// upstream serves GET (a small answer) and POST (the write) until stdin
// closes.
func upstream(work, dir string) {
	var f *os.File
	if work == "fsync" {
		var err error
		if f, err = os.OpenFile(filepath.Join(dir, "writes.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			panic(err)
		}
	}
	var mu sync.Mutex
	var mem [][]byte
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost {
			if f != nil {
				// O_APPEND writes are atomic; concurrent fdatasyncs may share
				// a journal commit, as a storage engine's group commit would.
				if _, err := f.Write(append(body, '\n')); err != nil {
					http.Error(w, err.Error(), 500)
					return
				}
				if err := syscall.Fdatasync(int(f.Fd())); err != nil {
					http.Error(w, err.Error(), 500)
					return
				}
			} else {
				mu.Lock()
				mem = append(mem, body)
				if len(mem) > 1<<16 {
					mem = mem[:0]
				}
				mu.Unlock()
			}
			w.WriteHeader(http.StatusCreated)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); srv.Close() }()
	_ = srv.Serve(ln)
}

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

func startChild(name string, args ...string) (*child, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s printed no listening line: %w", name, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return &child{cmd: cmd, stdin: in, url: strings.TrimPrefix(strings.TrimSpace(line), "listening on ")}, nil
}

func (c *child) stop() {
	c.stdin.Close()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

func bench(work, proxyBin string, rounds, n int, dur time.Duration, raise bool) error {
	dir, err := os.MkdirTemp("", "bench-proxy")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	up, err := startChild(self, "-role", "upstream", "-work", work, "-dir", dir)
	if err != nil {
		return err
	}
	defer up.stop()
	px, err := startChild(proxyBin, "-init", "-quiet", "-listen", "127.0.0.1:0", "-upstream", up.url, "-state", filepath.Join(dir, "proxy.db"))
	if err != nil {
		return err
	}
	defer px.stop()

	fmt.Printf("\n== upstream write: %s; %d rounds; raise every write: %v\n", work, rounds, raise)
	base := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	// Each writer's token; with -raise its fence goes up by one per write
	// (each writer has its own resources then, so no write is stale).
	var run atomic.Uint64
	tokenFor := func(resource string, holder int) httpfence.TokenSource {
		tok := fence.Token{Resource: resource, HolderID: "writer-" + strconv.Itoa(holder), Fence: 1}
		if raise {
			tok.Resource += "-run" + strconv.FormatUint(run.Add(1), 10)
		}
		var next atomic.Uint64
		return httpfence.TokenFunc(func() fence.Token {
			t := tok
			if raise {
				t.Fence = next.Add(1)
			}
			return t
		})
	}
	body := strings.Repeat("x", 100)
	do := func(c *http.Client, method, url string) error {
		var rd io.Reader
		if method == http.MethodPost {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, url, rd)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s %s: %s", method, url, resp.Status)
		}
		return nil
	}

	// Latency: alternate direct and proxied requests one by one.
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		direct := &http.Client{Transport: base}
		proxied := &http.Client{Transport: &httpfence.Transport{Base: base, Source: tokenFor("latency", 0)}}
		for range 200 { // warm connections and the floor row
			_ = do(direct, method, up.url+"/w")
			_ = do(proxied, method, px.url+"/w")
		}
		var p50d, p99d, p50p, p99p, added50, added99 []float64
		for range rounds {
			var ld, lp []time.Duration
			for i := range 2 * n {
				c, u, into := direct, up.url, &ld
				if i%2 == 1 {
					c, u, into = proxied, px.url, &lp
				}
				t0 := time.Now()
				if err := do(c, method, u+"/w"); err != nil {
					return err
				}
				*into = append(*into, time.Since(t0))
			}
			d50, d99 := pct(ld, 50), pct(ld, 99)
			q50, q99 := pct(lp, 50), pct(lp, 99)
			p50d, p99d, p50p, p99p = append(p50d, d50), append(p99d, d99), append(p50p, q50), append(p99p, q99)
			added50, added99 = append(added50, q50-d50), append(added99, q99-d99)
		}
		fmt.Printf("latency %-4s (ms, min/median/max over rounds of %d each)\n", method, n)
		fmt.Printf("  direct  p50 %s  p99 %s\n", mmm(p50d), mmm(p99d))
		fmt.Printf("  proxied p50 %s  p99 %s\n", mmm(p50p), mmm(p99p))
		fmt.Printf("  added   p50 %s  p99 %s\n", mmm(added50), mmm(added99))
	}

	// Throughput: fixed time per side, sides alternating round by round.
	for _, shape := range []struct {
		writers   int
		resources int
	}{{1, 1}, {8, 1}, {8, 8}} {
		if raise && shape.resources < shape.writers {
			fmt.Printf("writes/s, %d writers on %d resource: not measured with -raise (their fences would refuse each other)\n", shape.writers, shape.resources)
			continue
		}
		var direct, proxied, ratio []float64
		for r := range rounds {
			sides := []bool{false, true}
			if r%2 == 1 {
				sides = []bool{true, false}
			}
			got := map[bool]float64{}
			for _, viaProxy := range sides {
				var count atomic.Int64
				var firstErr atomic.Value
				deadline := time.Now().Add(dur)
				var wg sync.WaitGroup
				for w := range shape.writers {
					res := "tput-" + strconv.Itoa(w%shape.resources)
					c, u := &http.Client{Transport: base}, up.url
					if viaProxy {
						c, u = &http.Client{Transport: &httpfence.Transport{Base: base, Source: tokenFor(res, w)}}, px.url
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						for time.Now().Before(deadline) {
							if err := do(c, http.MethodPost, u+"/w"); err != nil {
								firstErr.CompareAndSwap(nil, err)
								return
							}
							count.Add(1)
						}
					}()
				}
				wg.Wait()
				if err, _ := firstErr.Load().(error); err != nil {
					return err
				}
				got[viaProxy] = float64(count.Load()) / dur.Seconds()
			}
			direct, proxied = append(direct, got[false]), append(proxied, got[true])
			ratio = append(ratio, got[false]/got[true])
		}
		fmt.Printf("writes/s, %d writer(s) on %d resource(s) (min/median/max over %d rounds of %s per side)\n", shape.writers, shape.resources, rounds, dur)
		fmt.Printf("  unfenced (direct) %s\n", mmmN(direct))
		fmt.Printf("  fenced (proxy)    %s\n", mmmN(proxied))
		fmt.Printf("  unfenced/fenced   %s\n", mmmX(ratio))
	}
	return nil
}

func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, len(s)*p/100)
	return float64(s[i]) / float64(time.Millisecond)
}

func stats(xs []float64) (lo, med, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[0], m, s[len(s)-1]
}

func mmm(xs []float64) string {
	lo, med, hi := stats(xs)
	return fmt.Sprintf("%.3f / %.3f / %.3f", lo, med, hi)
}

func mmmN(xs []float64) string {
	lo, med, hi := stats(xs)
	return fmt.Sprintf("%.0f / %.0f / %.0f", lo, med, hi)
}

func mmmX(xs []float64) string {
	lo, med, hi := stats(xs)
	return fmt.Sprintf("%.2fx / %.2fx / %.2fx", lo, med, hi)
}
