package gatetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// workerEnv names the job of a writer process started by the suite.
const workerEnv = "LEASE_FENCE_GATETEST_WORKER"

// job is what a writer process is asked to do.
type job struct {
	Test     string // t.Name() of the test that called Run
	Addr     string
	Resource string
	Holder   string
	Seed     uint64
	N        int // commits to make; -1: until killed
}

func workerJob() (job, bool) {
	s := getenv(workerEnv)
	if s == "" {
		return job{}, false
	}
	var j job
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return job{}, false
	}
	return j, true
}

// The lines a writer process prints, after this prefix: "ready", then for
// each commit "start <attempt JSON>" and "done <attempt JSON>", then "end".
const linePrefix = "gatetest: "

// runWorker is the writer process: attach, say ready, wait for the go line
// on standard input, write, report every commit as it starts and ends.
func runWorker(t *testing.T, c Config, j job) {
	if c.Attach == nil {
		t.Fatal("gatetest: worker started for a gate without Config.Attach")
	}
	g := c.Attach(t, j.Addr)
	var mu sync.Mutex
	say := func(kind string, v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, "%s%s %s\n", linePrefix, kind, b)
	}
	say("ready", nil)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("gatetest worker: waiting for go: %v", err)
	}
	writeRandom(context.Background(), g, j.Resource, j.Holder, j.Seed, j.N, func(start bool, a attempt) {
		if start {
			say("start", a)
		} else {
			say("done", a)
		}
	})
	say("end", nil)
}

// worker is a writer process seen from the parent.
type worker struct {
	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	ready  chan struct{}
	events chan event // start/done, closed at the end of output
	stderr bytes.Buffer
	write  func(string) error
}

type event struct {
	start bool
	a     attempt
}

// runPattern turns a test name into a -test.run pattern matching exactly it.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// startWorker starts a writer process for j and returns once it is ready.
func startWorker(t testing.TB, runName string, j job) *worker {
	t.Helper()
	j.Test = runName
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern(runName), "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(b))
	w := &worker{cmd: cmd, ready: make(chan struct{}), events: make(chan event, 1024)}
	cmd.Stderr = &w.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.stdin = in
	w.write = func(s string) error { _, err := in.Write([]byte(s)); return err }
	if err := cmd.Start(); err != nil {
		t.Fatalf("gatetest: starting a writer process: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		defer close(w.events)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		readied := false
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), linePrefix)
			if !ok {
				continue
			}
			kind, body, _ := strings.Cut(line, " ")
			switch kind {
			case "ready":
				if !readied {
					readied = true
					close(w.ready)
				}
			case "start", "done":
				var a attempt
				if json.Unmarshal([]byte(body), &a) == nil {
					w.events <- event{start: kind == "start", a: a}
				}
			}
		}
	}()
	select {
	case <-w.ready:
	case <-time.After(2 * time.Minute):
		t.Fatalf("gatetest: writer process not ready after 2 minutes; stderr:\n%s", w.stderr.String())
	}
	return w
}

// collect reads w's events until its output ends, and returns the finished
// attempts and those started without an outcome.
func (w *worker) collect(onDone func(n int)) (done, inflight []attempt) {
	started := map[string]attempt{}
	for e := range w.events {
		if e.start {
			started[e.a.Value] = e.a
			continue
		}
		delete(started, e.a.Value)
		done = append(done, e.a)
		if onDone != nil {
			onDone(len(done))
		}
	}
	for _, a := range started {
		inflight = append(inflight, a)
	}
	return done, inflight
}

// runName is the name of the test that called Run: the rule's parent.
func runName(t testing.TB) string {
	name := t.Name()
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[:i]
	}
	return name
}

// twoProcesses: two writer processes and goroutines of this one commit to
// one resource at once.
func twoProcesses(t testing.TB, c Config) {
	const each = 30
	g, addr := c.New(t, Options{MaxRejections: 10 * each})
	var ws []*worker
	for i := range 2 {
		ws = append(ws, startWorker(t, runName(t), job{Addr: addr, Resource: res, Holder: fmt.Sprintf("proc%d", i), Seed: uint64(100 + i), N: each}))
	}
	local := []Gate{g, c.Attach(t, addr)}
	for _, w := range ws {
		if err := w.write("go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var all []attempt
	var wg sync.WaitGroup
	for i, h := range local {
		wg.Go(func() {
			got := writeRandom(context.Background(), h, res, fmt.Sprintf("local%d", i), uint64(200+i), each, nil)
			mu.Lock()
			all = append(all, got...)
			mu.Unlock()
		})
	}
	for i, w := range ws {
		done, inflight := w.collect(nil)
		if err := w.cmd.Wait(); err != nil {
			t.Fatalf("writer process %d: %v\n%s", i, err, w.stderr.String())
		}
		if len(done) != each || len(inflight) != 0 {
			t.Fatalf("writer process %d reported %d commits (%d unfinished), want %d", i, len(done), len(inflight), each)
		}
		mu.Lock() // the local writers may still be appending theirs
		all = append(all, done...)
		mu.Unlock()
	}
	wg.Wait()
	checkHistory(t, g, res, all, nil)
}

// killedWriter: a writer process killed with SIGKILL in the middle of its
// commits leaves all or nothing of the commit it was making; the other
// writers and the gate carry on.
func killedWriter(t testing.TB, c Config) {
	const each, killAfter = 30, 12
	g, addr := c.New(t, Options{MaxRejections: 10 * each})
	w := startWorker(t, runName(t), job{Addr: addr, Resource: res, Holder: "victim", Seed: 300, N: -1})
	if err := w.write("go\n"); err != nil {
		t.Fatal(err)
	}
	localDone := make(chan []attempt, 1)
	go func() {
		localDone <- writeRandom(context.Background(), g, res, "survivor", 301, each, nil)
	}()
	done, inflight := w.collect(func(n int) {
		if n == killAfter {
			_ = w.cmd.Process.Kill()
		}
	})
	err := w.cmd.Wait()
	if len(done) < killAfter {
		t.Fatalf("the writer process ended after %d commits (%v):\n%s", len(done), err, w.stderr.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.Success() {
		t.Fatalf("the writer process was not killed: %v", err)
	}
	all := append(done, <-localDone...)
	checkHistory(t, g, res, all, inflight)
	// The gate still admits a newer fence.
	mustCommit(t, g, tk("after", 1000), "after#1000#0")
	wantFloor(t, g, res, 1000)
}
