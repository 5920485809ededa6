//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// The tests in this file run the proxy, the upstream API and the agents as
// separate processes: the test binary itself, which TestMain turns into one
// of them when roleEnv is set. The proxy can then be killed with SIGKILL.
const (
	roleEnv      = "FENCE_PROXY_TEST_ROLE"
	blockEnv     = "FENCE_PROXY_TEST_BLOCK_AT_ADMIT"
	upstreamLog  = "FENCE_PROXY_TEST_UPSTREAM_LOG"
	admittedLine = "admitted "
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case "proxy":
		os.Exit(proxyRole())
	case "upstream":
		os.Exit(upstreamRole())
	case "agent":
		os.Exit(agentRole())
	}
	fmt.Fprintln(os.Stderr, "unknown role", os.Getenv(roleEnv))
	os.Exit(2)
}

// proxyRole is fence-proxy with os.Args[1:]; with blockEnv set it stops
// every write after the floor is raised and before it is forwarded, and
// says so on stdout.
func proxyRole() int {
	var hook func(context.Context, fence.Token)
	if os.Getenv(blockEnv) == "1" {
		hook = func(_ context.Context, tok fence.Token) {
			fmt.Printf("%s%s %d\n", admittedLine, tok.Resource, tok.Fence)
			select {} // until killed
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }() // stdin closed: shut down
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, hook); err != nil {
		fmt.Fprintln(os.Stderr, "fence-proxy:", err)
		return 1
	}
	return 0
}

// upstreamRole is the API behind the proxy: it appends a line per request
// ("METHOD PATH BODY") to the file named by upstreamLog, synced before it
// answers 201, and runs until its stdin closes.
func upstreamRole() int {
	f, err := os.OpenFile(os.Getenv(upstreamLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		_, err := fmt.Fprintf(f, "%s %s %s\n", r.Method, r.URL.Path, body)
		if err == nil {
			err = f.Sync()
		}
		mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); srv.Close() }()
	_ = srv.Serve(ln)
	return 0
}

// agentResult is what an agent process reports.
type agentResult struct {
	Admitted int                       `json:"admitted"`
	Stale    []httpfence.RejectionJSON `json:"stale"`
	Other    []string                  `json:"other"`
}

// agentRole writes n times to PROXY/deploy as HOLDER with FENCE (args:
// PROXY HOLDER FENCE N), through httpfence.Transport, once a line arrives on
// stdin; it prints an agentResult.
func agentRole() int {
	url, holder := os.Args[1], os.Args[2]
	f, _ := strconv.ParseUint(os.Args[3], 10, 64)
	n, _ := strconv.Atoi(os.Args[4])
	tok := fence.Token{Resource: "deploy-slot", HolderID: holder, Fence: f}
	client := &http.Client{Transport: &httpfence.Transport{Source: httpfence.TokenFunc(func() fence.Token { return tok })}}
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	res := agentResult{Stale: []httpfence.RejectionJSON{}, Other: []string{}}
	for i := range n {
		resp, err := client.Post(url+"/deploy", "text/plain", strings.NewReader(fmt.Sprintf("%s/%d/%d", holder, f, i)))
		if err != nil {
			res.Other = append(res.Other, err.Error())
			continue
		}
		stale := httpfence.StaleFence(resp)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated && resp.Header.Get("Lease-Fence-Floor") == strconv.FormatUint(f, 10):
			res.Admitted++
		case stale != nil:
			r := stale.Rejection
			res.Stale = append(res.Stale, httpfence.RejectionJSON{Seq: r.Seq, Resource: r.Resource, RefusedHolderID: r.RefusedHolderID, RefusedFence: r.RefusedFence, AdmittedHolderID: r.AdmittedHolderID, AdmittedFence: r.AdmittedFence})
		default:
			res.Other = append(res.Other, resp.Status)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// proc is one child process of a test.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

func spawn(t testing.TB, role string, env []string, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A child's log is shown only if the test fails.
	stderr := &syncio.Buffer{}
	cmd.Stderr = stderr
	p := &proc{cmd: cmd}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() && stderr.String() != "" {
			t.Logf("stderr of %s %v:\n%s", role, args, stderr)
		}
	})
	return p
}

func (p *proc) line(t testing.TB) string {
	t.Helper()
	l, err := p.stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: no line on stdout: %v", p.cmd.Env[len(os.Environ())], err)
	}
	return strings.TrimSpace(l)
}

// url reads the "listening on URL" line.
func (p *proc) url(t testing.TB) string {
	t.Helper()
	return strings.TrimPrefix(p.line(t), "listening on ")
}

// stop closes stdin, which ends the process cleanly, and waits.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("%v ended with %v", p.cmd.Args, err)
	}
}

func startUpstream(t *testing.T) (url, logPath string) {
	logPath = filepath.Join(t.TempDir(), "upstream.log")
	up := spawn(t, "upstream", []string{upstreamLog + "=" + logPath})
	return up.url(t), logPath
}

func startProxy(t *testing.T, block bool, args ...string) (*proc, string) {
	env := []string{}
	if block {
		env = append(env, blockEnv+"=1")
	}
	p := spawn(t, "proxy", env, append([]string{"-listen", "127.0.0.1:0", "-quiet"}, args...)...)
	return p, p.url(t)
}

func startAgent(t *testing.T, proxyURL, holder string, f uint64, n int) *proc {
	return spawn(t, "agent", nil, proxyURL, holder, strconv.FormatUint(f, 10), strconv.Itoa(n))
}

func (p *proc) result(t *testing.T) agentResult {
	t.Helper()
	var r agentResult
	if err := json.Unmarshal([]byte(p.line(t)), &r); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	return r
}

func runAgent(t *testing.T, proxyURL, holder string, f uint64, n int) agentResult {
	a := startAgent(t, proxyURL, holder, f, n)
	_, _ = io.WriteString(a.stdin, "go\n")
	return a.result(t)
}

func upstreamWrites(t *testing.T, logPath string) []string {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.ReplaceAll(string(b), "POST /deploy ", ""), "\n", " "))
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// Two agent processes write to one resource through the proxy (a third
// process) to a real upstream server (a fourth). The stale one is refused
// with 409 and never seen upstream; then both write at once, and the
// upstream's record is the proof: fences in the order it received them never
// go down, and every write an agent was told landed is there, once.
func TestTwoAgentProcessesThroughTheProxy(t *testing.T) {
	upURL, logPath := startUpstream(t)
	state := filepath.Join(t.TempDir(), "proxy.db")
	proxy, proxyURL := startProxy(t, false, "-upstream", upURL, "-state", state, "-init")

	// agent-a holds fence 7 and writes; its lease expires; agent-b gets 8
	// and writes; agent-a, which stalled, writes again: refused.
	if r := runAgent(t, proxyURL, "agent-a", 7, 3); r.Admitted != 3 || len(r.Stale)+len(r.Other) != 0 {
		t.Fatalf("agent-a before the handover: %+v", r)
	}
	if r := runAgent(t, proxyURL, "agent-b", 8, 1); r.Admitted != 1 || len(r.Stale)+len(r.Other) != 0 {
		t.Fatalf("agent-b: %+v", r)
	}
	r := runAgent(t, proxyURL, "agent-a", 7, 2)
	if r.Admitted != 0 || len(r.Stale) != 2 || len(r.Other) != 0 {
		t.Fatalf("agent-a after the handover: %+v", r)
	}
	for i, s := range r.Stale {
		want := httpfence.RejectionJSON{Seq: uint64(i + 1), Resource: "deploy-slot", RefusedHolderID: "agent-a", RefusedFence: 7, AdmittedHolderID: "agent-b", AdmittedFence: 8}
		if s != want {
			t.Fatalf("refusal %d: %+v, want %+v", i, s, want)
		}
	}
	want := []string{"agent-a/7/0", "agent-a/7/1", "agent-a/7/2", "agent-b/8/0"}
	if got := upstreamWrites(t, logPath); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("upstream saw %q, want %q", got, want)
	}

	// Both at once: agent-c (fence 9) and agent-d (fence 10) start together.
	// c's writes land until d's first does, and are refused after.
	const n = 40
	c := startAgent(t, proxyURL, "agent-c", 9, n)
	d := startAgent(t, proxyURL, "agent-d", 10, n)
	_, _ = io.WriteString(c.stdin, "go\n")
	_, _ = io.WriteString(d.stdin, "go\n")
	rc, rd := c.result(t), d.result(t)
	if rd.Admitted != n || len(rc.Other)+len(rd.Other) != 0 || rc.Admitted+len(rc.Stale) != n {
		t.Fatalf("agent-c %+v, agent-d %+v", rc, rd)
	}
	got := upstreamWrites(t, logPath)[len(want):]
	count := map[string]int{}
	last := uint64(0)
	for _, w := range got {
		parts := strings.Split(w, "/")
		f, _ := strconv.ParseUint(parts[1], 10, 64)
		if f < last {
			t.Fatalf("upstream received fence %d after %d: %q", f, last, got)
		}
		last = f
		count[parts[0]]++
	}
	if count["agent-c"] != rc.Admitted || count["agent-d"] != n || len(got) != rc.Admitted+n {
		t.Fatalf("upstream has %v (%d writes), agents were told c %d, d %d", count, len(got), rc.Admitted, n)
	}
	// Every refusal is in the proxy's log, numbered on from the first two.
	var list struct {
		Rejections []httpfence.RejectionJSON `json:"rejections"`
	}
	getJSON(t, proxyURL+"/.lease-fence/rejections?resource=deploy-slot", &list)
	if len(list.Rejections) != 2+len(rc.Stale) {
		t.Fatalf("%d rejections logged, want %d", len(list.Rejections), 2+len(rc.Stale))
	}
	for i, s := range rc.Stale {
		if s != list.Rejections[2+i] || s.Seq != uint64(3+i) || s.AdmittedFence != 10 || s.RefusedFence != 9 {
			t.Fatalf("refusal %+v, logged %+v", s, list.Rejections[2+i])
		}
	}
	t.Logf("agent-c: %d admitted before agent-d's first write, %d refused after", rc.Admitted, len(rc.Stale))
	proxy.stop(t)
}

// The proxy is SIGKILLed after it raised the floor for a write and before it
// forwarded it. The floor survives the restart; the write never reached the
// upstream; the older holder is refused; the holder of the new floor writes.
func TestProxyKilledBetweenRaisingTheFloorAndForwarding(t *testing.T) {
	upURL, logPath := startUpstream(t)
	state := filepath.Join(t.TempDir(), "proxy.db")
	proxy, proxyURL := startProxy(t, true, "-upstream", upURL, "-state", state, "-init")

	req, _ := http.NewRequest("POST", proxyURL+"/deploy", strings.NewReader("agent-b/9/0"))
	req.Header.Set("Lease-Fence", `resource="deploy-slot", holder="agent-b", fence=9`)
	sent := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %s", resp.Status)
		}
		sent <- err
	}()
	if l := proxy.line(t); l != admittedLine+"deploy-slot 9" {
		t.Fatalf("proxy said %q", l)
	}
	if err := proxy.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proxy.cmd.Wait()
	if err := <-sent; err == nil || strings.HasPrefix(err.Error(), "answered") {
		t.Fatalf("the client of the killed proxy: %v, want a broken connection", err)
	}

	_, proxyURL = startProxy(t, false, "-upstream", upURL, "-state", state)
	var floor struct{ Floor uint64 }
	getJSON(t, proxyURL+"/.lease-fence/floor?resource=deploy-slot", &floor)
	if floor.Floor != 9 {
		t.Fatalf("floor after the restart: %d, want 9", floor.Floor)
	}
	if got := upstreamWrites(t, logPath); len(got) != 0 {
		t.Fatalf("the upstream saw %q; the write was never forwarded", got)
	}
	if r := runAgent(t, proxyURL, "agent-a", 8, 1); len(r.Stale) != 1 || r.Stale[0].AdmittedFence != 9 || r.Stale[0].AdmittedHolderID != "agent-b" {
		t.Fatalf("agent-a (fence 8) after the restart: %+v", r)
	}
	if r := runAgent(t, proxyURL, "agent-b", 9, 1); r.Admitted != 1 {
		t.Fatalf("agent-b (fence 9) after the restart: %+v", r)
	}
	if got := upstreamWrites(t, logPath); strings.Join(got, " ") != "agent-b/9/0" {
		t.Fatalf("upstream saw %q", got)
	}
}
