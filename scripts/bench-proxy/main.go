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
//     one resource (one holder at one fence: the proxy forwards them
//     together, or one at a time with -exclusive) and on 8.
//
// The upstream is another process (this program with -role upstream); its
// write is either an append to memory ("memory": the proxy's overhead at its
// plainest) or an append to a file followed by fdatasync ("fsync": a durable
// write, as an API backed by storage makes). The proxy is the fence-proxy
// binary (make fence-proxy) on a fresh state file. Writes carry one fence
// per writer, so the floor is raised once and then checked; -raise makes
// every write carry a higher fence, so every write raises (and fsyncs) it.
//
// With -profile DIR it measures nothing: it writes through the proxy with 1
// writer, then 8 writers on 8 resources, for -dur each while taking a CPU
// profile of the proxy (fence-proxy -debug-addr) and of the upstream at
// once, and saves them in DIR as proxy-WORK-wN.pprof and
// upstream-WORK-wN.pprof (go tool pprof -top out/bin/fence-proxy FILE).
//
// With -baseline BIN, another fence-proxy binary (an earlier build) runs
// beside the proxy on its own state file, as a third side in the same
// alternation, so a change to the proxy is measured against its predecessor;
// -baseline-args gives it flags (-baseline out/bin/fence-proxy
// -baseline-args -exclusive measures shared admission against one write at
// a time).
//
// With -floor, a reverse proxy that does nothing but forward (this program
// with -role floor: net/http/httputil.ReverseProxy over an http.Transport
// that keeps connections alive) is another side in the same alternation,
// sent the same requests as the proxy: what a second HTTP process costs per
// write, whatever it does. fence-proxy against it is the part that is
// fence-proxy's own.
//
// Besides writes per second, the throughput rows give each proxy's and the
// upstream's CPU time per write (from /proc, over the same interval).
//
// Usage: go run ./scripts/bench-proxy [-rounds 5] [-n 2000] [-dur 2s] [-work memory,fsync] [-raise] [-floor] [-baseline BIN [-baseline-args FLAGS]] [-profile DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
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

	"github.com/lease-fence/lease-fence/internal/benchkit"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
)

func main() {
	role := flag.String("role", "bench", "bench, or upstream or floor (internal)")
	upstreamURL := flag.String("upstream", "", "floor: the upstream to forward to")
	floor := flag.Bool("floor", false, "add a do-nothing reverse proxy as a side (the cost of a second HTTP process)")
	work := flag.String("work", "memory,fsync", "the upstream's write: memory, fsync, or both (comma-separated)")
	dir := flag.String("dir", "", "upstream: directory for the fsync file")
	rounds := flag.Int("rounds", 5, "rounds per measurement")
	n := flag.Int("n", 2000, "latency: requests per side per round")
	dur := flag.Duration("dur", 2*time.Second, "throughput: time per side per round")
	proxyBin := flag.String("proxy", "out/bin/fence-proxy", "the fence-proxy binary")
	raise := flag.Bool("raise", false, "every write carries a higher fence (raises the floor each time)")
	baseBin := flag.String("baseline", "", "another fence-proxy binary, measured as a third side in the same alternation")
	baseArgs := flag.String("baseline-args", "", "flags for the baseline proxy (space-separated), e.g. -exclusive with -baseline out/bin/fence-proxy")
	profile := flag.String("profile", "", "write CPU profiles of the proxy and the upstream under load to this directory instead of measuring")
	debug := flag.String("debug", "", "upstream: serve the runtime's profiles on this address")
	flag.Parse()
	if *role == "floor" {
		floorProxy(*upstreamURL)
		return
	}
	if *role == "upstream" {
		if *debug != "" {
			go func() { _ = http.ListenAndServe(*debug, debugMux()) }()
		}
		upstream(*work, *dir)
		return
	}
	if *profile != "" {
		for _, w := range strings.Split(*work, ",") {
			if err := profileUnderLoad(w, *proxyBin, *profile, *dur, *raise); err != nil {
				benchkit.Fatal(err)
			}
		}
		return
	}
	fmt.Println("load before:", benchkit.Load())
	for _, w := range strings.Split(*work, ",") {
		if err := bench(w, *proxyBin, *baseBin, strings.Fields(*baseArgs), *floor, *rounds, *n, *dur, *raise); err != nil {
			benchkit.Fatal(err)
		}
	}
	fmt.Println("load after:", benchkit.Load())
}

// upstream serves GET (a small answer) and POST (the write) until it is
// interrupted.
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
	_ = srv.Serve(ln)
}

// floorProxy forwards every request to upstream and nothing else, until it
// is interrupted: the least a Go reverse proxy does.
func floorProxy(upstream string) {
	u, err := url.Parse(upstream)
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	_ = (&http.Server{Handler: rp}).Serve(ln)
}

func startChild(name string, args ...string) (*benchkit.Server, error) {
	return benchkit.Start(exec.Command(name, args...), "", nil, false)
}

// startUpstream starts this program as the upstream of work, in a fresh
// directory; stop stops it and removes the directory.
func startUpstream(work string, args ...string) (up *benchkit.Server, dir string, stop func(), err error) {
	if dir, err = os.MkdirTemp("", "bench-proxy"); err != nil {
		return nil, "", nil, err
	}
	self, err := os.Executable()
	if err == nil {
		up, err = startChild(self, append([]string{"-role", "upstream", "-work", work, "-dir", dir}, args...)...)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	return up, dir, func() { up.Stop(); os.RemoveAll(dir) }, nil
}

func bench(work, proxyBin, baseBin string, baseArgs []string, floor bool, rounds, n int, dur time.Duration, raise bool) error {
	up, dir, stop, err := startUpstream(work)
	if err != nil {
		return err
	}
	defer stop()
	// The sides: the upstream called directly, through the proxy, and
	// through the baseline proxy if there is one (each on its own state).
	type side struct {
		name, url string
		proxied   bool // sent fenced writes
		srv       *benchkit.Server
	}
	sides := []side{{"direct", up.URL, false, nil}}
	for i, bin := range []string{proxyBin, baseBin} {
		if bin == "" {
			continue
		}
		var args []string
		if i == 1 {
			args = baseArgs
		}
		px, err := startProxy(bin, up.URL, filepath.Join(dir, "proxy"+strconv.Itoa(i)+".db"), args...)
		if err != nil {
			return err
		}
		defer px.Stop()
		sides = append(sides, side{[]string{"proxy", "baseline"}[i], px.URL, true, px})
	}
	if floor {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		fl, err := startChild(self, "-role", "floor", "-upstream", up.URL)
		if err != nil {
			return err
		}
		defer fl.Stop()
		sides = append(sides, side{"floor", fl.URL, true, fl})
	}

	fmt.Printf("\n== upstream write: %s; %d rounds; raise every write: %v\n", work, rounds, raise)
	base := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	// With -raise, each writer has its own resources (so no write is stale).
	var run atomic.Uint64
	client := func(sd side, resource string, holder int) *http.Client {
		if !sd.proxied {
			return &http.Client{Transport: base}
		}
		if raise {
			resource += "-run" + strconv.FormatUint(run.Add(1), 10)
		}
		return writer(base, resource, holder, raise)
	}

	// Latency: the sides in turn, request by request.
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		clients := make([]*http.Client, len(sides))
		for i, sd := range sides {
			clients[i] = client(sd, "latency-"+sd.name, 0)
		}
		for range 200 { // warm connections and the floor rows
			for i, sd := range sides {
				_ = do(clients[i], method, sd.url+"/w")
			}
		}
		p50 := make([][]float64, len(sides))
		p99 := make([][]float64, len(sides))
		added50 := make([][]float64, len(sides))
		added99 := make([][]float64, len(sides))
		for range rounds {
			lat := make([][]time.Duration, len(sides))
			for i := range len(sides) * n {
				k := i % len(sides)
				t0 := time.Now()
				if err := do(clients[k], method, sides[k].url+"/w"); err != nil {
					return err
				}
				lat[k] = append(lat[k], time.Since(t0))
			}
			for k := range sides {
				p50[k] = append(p50[k], pct(lat[k], 50))
				p99[k] = append(p99[k], pct(lat[k], 99))
				added50[k] = append(added50[k], pct(lat[k], 50)-pct(lat[0], 50))
				added99[k] = append(added99[k], pct(lat[k], 99)-pct(lat[0], 99))
			}
		}
		fmt.Printf("latency %-4s (ms, min/median/max over rounds of %d each)\n", method, n)
		for k, sd := range sides {
			fmt.Printf("  %-8s p50 %s  p99 %s\n", sd.name, mmm(p50[k]), mmm(p99[k]))
		}
		for k, sd := range sides[1:] {
			fmt.Printf("  added by %-8s p50 %s  p99 %s\n", sd.name, mmm(added50[k+1]), mmm(added99[k+1]))
		}
	}

	// Throughput: fixed time per side, the order of the sides rotating
	// round by round.
	for _, shape := range []struct {
		writers   int
		resources int
	}{{1, 1}, {8, 1}, {8, 8}} {
		if raise && shape.resources < shape.writers {
			fmt.Printf("writes/s, %d writers on %d resource: not measured with -raise (their fences would refuse each other)\n", shape.writers, shape.resources)
			continue
		}
		rates := make([][]float64, len(sides))
		ratio := make([][]float64, len(sides))
		cpu := make([][]float64, len(sides))   // µs of the side's proxy per write
		upCPU := make([][]float64, len(sides)) // µs of the upstream per write
		for r := range rounds {
			got := make([]float64, len(sides))
			for j := range sides {
				k := (j + r) % len(sides)
				sd := sides[k]
				// The writers of one resource are one holder, writing at
				// its fence in parallel (shared admission).
				cs := make([]*http.Client, shape.writers)
				for w := range cs {
					cs[w] = client(sd, "tput-"+strconv.Itoa(w%shape.resources), w%shape.resources)
				}
				up0, px0 := cpuOf(up), cpuOf(sd.srv)
				count, el, err := benchkit.Loop(shape.writers, math.MaxInt, dur, func(_ context.Context, w int) error {
					return do(cs[w], http.MethodPost, sd.url+"/w")
				})
				if err != nil {
					return err
				}
				got[k] = float64(count) / el.Seconds()
				perWrite := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(count) }
				upCPU[k] = append(upCPU[k], perWrite(cpuOf(up)-up0))
				if sd.srv != nil {
					cpu[k] = append(cpu[k], perWrite(cpuOf(sd.srv)-px0))
				}
			}
			for k := range sides {
				rates[k] = append(rates[k], got[k])
				ratio[k] = append(ratio[k], got[0]/got[k])
			}
		}
		fmt.Printf("writes/s, %d writer(s) on %d resource(s) (min/median/max over %d rounds of %s per side)\n", shape.writers, shape.resources, rounds, dur)
		for k, sd := range sides {
			fmt.Printf("  %-8s %s", sd.name, mmmN(rates[k]))
			if sd.srv != nil {
				fmt.Printf("  its CPU µs/write %s", mmmN(cpu[k]))
			}
			fmt.Printf("  upstream's CPU µs/write %s\n", mmmN(upCPU[k]))
		}
		for k, sd := range sides[1:] {
			fmt.Printf("  direct/%-8s %s\n", sd.name, mmmX(ratio[k+1]))
		}
		for k, sd := range sides[2:] {
			var speed []float64
			for r := range rates[1] {
				speed = append(speed, rates[1][r]/rates[k+2][r])
			}
			fmt.Printf("  proxy/%s (writes/s) %s\n", sd.name, mmmX(speed))
		}
	}
	return nil
}

// writer is a client that writes through httpfence.Transport over base as
// holder "writer-N" on resource, at fence 1 or, with raise, at a fence one
// higher every write.
func writer(base http.RoundTripper, resource string, holder int, raise bool) *http.Client {
	tok := fence.Token{Resource: resource, HolderID: "writer-" + strconv.Itoa(holder), Fence: 1}
	var next atomic.Uint64
	return &http.Client{Transport: &httpfence.Transport{Base: base, Source: httpfence.TokenFunc(func() fence.Token {
		t := tok
		if raise {
			t.Fence = next.Add(1)
		}
		return t
	})}}
}

// do sends a request of method to url (a POST with a body of 100 bytes)
// and reads its answer; an error if it is not a 2xx.
func do(c *http.Client, method, url string) error {
	var rd io.Reader
	if method == http.MethodPost {
		rd = strings.NewReader(strings.Repeat("x", 100))
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

// startProxy starts the fence-proxy bin in front of upstream on a fresh
// state file.
func startProxy(bin, upstream, state string, args ...string) (*benchkit.Server, error) {
	return startChild(bin, append([]string{"-init", "-quiet", "-listen", "127.0.0.1:0", "-upstream", upstream, "-state", state}, args...)...)
}

func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

// profileUnderLoad writes through the proxy for dur with 1 writer, then 8
// writers on 8 resources, fetching a CPU profile of the proxy and of the
// upstream over the same time.
func profileUnderLoad(work, proxyBin, out string, dur time.Duration, raise bool) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	upDebug, err := benchkit.FreeAddr()
	if err != nil {
		return err
	}
	up, dir, stop, err := startUpstream(work, "-debug", upDebug)
	if err != nil {
		return err
	}
	defer stop()
	pxDebug, err := benchkit.FreeAddr()
	if err != nil {
		return err
	}
	px, err := startProxy(proxyBin, up.URL, filepath.Join(dir, "proxy.db"), "-debug-addr", pxDebug)
	if err != nil {
		return err
	}
	defer px.Stop()
	base := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	for _, writers := range []int{1, 8} {
		secs := int(dur.Seconds())
		fetch := func(addr, file string, done chan<- error) {
			resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
			if err != nil {
				done <- err
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(file)
			if err == nil {
				_, err = io.Copy(f, resp.Body)
				f.Close()
			}
			done <- err
		}
		done := make(chan error, 2)
		name := fmt.Sprintf("%s-w%d.pprof", work, writers)
		go fetch(pxDebug, filepath.Join(out, "proxy-"+name), done)
		go fetch(upDebug, filepath.Join(out, "upstream-"+name), done)
		cs := make([]*http.Client, writers)
		for w := range cs {
			cs[w] = writer(base, "prof-"+strconv.Itoa(w), w, raise)
		}
		count, el, err := benchkit.Loop(writers, math.MaxInt, dur+time.Second, func(_ context.Context, w int) error {
			return do(cs[w], http.MethodPost, px.URL+"/w")
		})
		if err != nil {
			return err
		}
		for range 2 {
			if err := <-done; err != nil {
				return err
			}
		}
		fmt.Printf("%s, %d writer(s): %.0f writes/s through the proxy while profiling; %s\n", work, writers, float64(count)/el.Seconds(), filepath.Join(out, "{proxy,upstream}-"+name))
	}
	return nil
}

// cpuOf is the CPU time s's process has used (0 for none).
func cpuOf(s *benchkit.Server) time.Duration {
	if s == nil {
		return 0
	}
	d, err := benchkit.PidCPU(s.Pid())
	if err != nil {
		benchkit.Fatal(err)
	}
	return d
}

func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return benchkit.Ms(benchkit.Quantile(s, float64(p)/100))
}

func mmm(xs []float64) string { return benchkit.MMM(xs, "%.3f") }

func mmmN(xs []float64) string { return benchkit.MMM(xs, "%.0f") }

func mmmX(xs []float64) string { return benchkit.MMM(xs, "%.2fx") }
