//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/serverproc"

	"github.com/lease-fence/lease-fence/gates/httpfence"
	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// The tests in this file run the real programs: lease-fence (with the race
// detector), the coordinator and fence-proxy (built once, or taken from
// $LEASE_FENCE_TEST_BIN, where make test-cli builds them), each
// on a port chosen by the kernel. The command lease-fence runs is this test binary
// in the role of a child (childMain), which takes orders on its standard
// input and reports on its standard output: the test talks to it through
// the pipes lease-fence hands down.

// childModeEnv makes this test binary the child (childMain).
const childModeEnv = "LEASE_FENCE_E2E_CHILD"

// deadline bounds every wait on a condition: against hangs only.
const deadline = 60 * time.Second

var bins struct{ cli, coordinator, proxy string }

func TestMain(m *testing.M) {
	if os.Getenv(childModeEnv) == "1" {
		childMain()
		os.Exit(0)
	}
	// The coordinator, fence-proxy and lease-fence built with the race
	// detector (race/lease-fence: make lease-fence-race) are taken from
	// $LEASE_FENCE_TEST_BIN if set; otherwise they are built here.
	dir := os.Getenv("LEASE_FENCE_TEST_BIN")
	tmp, err := os.MkdirTemp("", "lease-fence-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := func(pkg string, flags ...string) string {
		out := filepath.Join(tmp, pkg)
		cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, "../"+pkg)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", pkg+":", err)
			os.RemoveAll(tmp)
			os.Exit(1)
		}
		return out
	}
	if dir != "" {
		bins.cli = filepath.Join(dir, "race", "lease-fence")
		bins.coordinator = filepath.Join(dir, "coordinator")
		bins.proxy = filepath.Join(dir, "fence-proxy")
	} else {
		bins.cli = build("lease-fence", "-race")
		bins.coordinator = build("coordinator")
		bins.proxy = build("fence-proxy")
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// childReport is the first line the child prints.
type childReport struct {
	Pid, Pgid                       int
	Resource, Holder, Fence, Header string
}

// childMain is the command lease-fence runs in these tests. It prints a
// childReport, then obeys one order a line on stdin:
//
//	trap           catch SIGINT and SIGTERM too (print them, do not die)
//	write URL      PUT URL with its Lease-Fence header; print "status N"
//	exit N         exit with status N
//	spawn          start a grandchild in the same process group, print "spawned PID"
//
// It prints "signal NAME" for each SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2
// (and SIGINT, SIGTERM after trap). At the end of stdin it waits for a
// signal.
func childMain() {
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	go func() {
		for s := range sigc {
			say("signal %s", s)
		}
	}()
	b, _ := json.Marshal(childReport{Pid: os.Getpid(), Pgid: syscall.Getpgrp(), Resource: os.Getenv(envResource),
		Holder: os.Getenv(envHolder), Fence: os.Getenv(envFence), Header: os.Getenv(envHeader)})
	say("%s", b)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		order, arg, _ := strings.Cut(sc.Text(), " ")
		switch order {
		case "trap":
			signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
			say("trapped")
		case "write":
			req, _ := http.NewRequest(http.MethodPut, arg, strings.NewReader("from "+os.Getenv(envHolder)))
			req.Header.Set(httpfence.Header, os.Getenv(envHeader))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				say("error %v", err)
				continue
			}
			resp.Body.Close()
			say("status %d", resp.StatusCode)
		case "exit":
			n, _ := strconv.Atoi(arg)
			os.Exit(n)
		case "spawn":
			exe, _ := os.Executable()
			g := exec.Command(exe)
			g.Env = os.Environ()
			g.Stdout = os.Stdout
			if err := g.Start(); err != nil {
				say("error %v", err)
				continue
			}
			say("spawned %d", g.Process.Pid)
		}
	}
	select {}
}

// coordinator starts a coordinator in memory with args, and returns its
// URL.
func coordinator(t *testing.T, args ...string) string {
	t.Helper()
	return startServer(t, bins.coordinator, append([]string{"-addr", "127.0.0.1:0", "-memory", "-quiet"}, args...)...)
}

// startServer starts a program that prints "listening on URL" first, and
// returns the URL. It is killed at the end of the test.
func startServer(t *testing.T, exe string, args ...string) string {
	t.Helper()
	cmd := exec.Command(exe, args...)
	logs := &syncio.Buffer{}
	cmd.Stderr = logs
	srv, err := serverproc.Start(cmd, false)
	if err != nil {
		t.Fatalf("%v; its log:\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s's log:\n%s", filepath.Base(exe), logs.String())
		}
	})
	return srv.URL
}

// cli is one lease-fence process.
type cli struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // its stdout (and its child's), line by line; closed at EOF
	stderr *syncio.Buffer
	done   chan struct{} // closed once it exited
	code   int
}

// startCLI starts lease-fence with args, LEASE_FENCE_URL set to url (if
// not empty) and the child role set for the command it runs.
func startCLI(t *testing.T, url string, args ...string) *cli {
	t.Helper()
	c := &cli{t: t, cmd: exec.Command(bins.cli, args...), lines: make(chan string, 100), stderr: &syncio.Buffer{}, done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), childModeEnv+"=1", envURL+"="+url)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	go func() {
		_ = c.cmd.Wait()
		c.code = c.cmd.ProcessState.ExitCode()
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.code = 128 + int(ws.Signal())
		}
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// next returns the next line of stdout; it fails the test at EOF or after
// the deadline.
func (c *cli) next() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("stdout ended; stderr:\n%s", c.stderr.String())
		}
		return l
	case <-time.After(deadline):
		c.t.Fatalf("no line within %v; stderr:\n%s", deadline, c.stderr.String())
	}
	return ""
}

// report reads the child's report: the command runs, under the lease.
func (c *cli) report() childReport {
	c.t.Helper()
	var r childReport
	if l := c.next(); json.Unmarshal([]byte(l), &r) != nil || r.Pid == 0 {
		c.t.Fatalf("not a child's report: %q", l)
	}
	// The child and what it spawns are killed if the test fails.
	c.t.Cleanup(func() { _ = syscall.Kill(-r.Pgid, syscall.SIGKILL) })
	return r
}

// tell sends the child an order.
func (c *cli) tell(order string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, order+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// expect reads lines until one equals want (failing on EOF or after the
// deadline).
func (c *cli) expect(want string) {
	c.t.Helper()
	for {
		if l := c.next(); l == want {
			return
		}
	}
}

// exit waits for lease-fence to exit and returns its code.
func (c *cli) exit() int {
	c.t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(deadline):
		c.t.Fatalf("lease-fence did not exit within %v; stderr:\n%s", deadline, c.stderr.String())
	}
	return 0
}

// eof waits for the end of stdout: every process that held it (the child
// and its group) is gone.
func (c *cli) eof() {
	c.t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case _, ok := <-c.lines:
			if !ok {
				return
			}
		case <-timeout:
			c.t.Fatalf("stdout still open after %v", deadline)
		}
	}
}

// runCLI runs lease-fence to its end with LEASE_FENCE_URL url and returns
// its exit code, stdout and stderr.
func runCLI(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.cli, args...)
	cmd.Env = append(os.Environ(), envURL+"="+url)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// goClient is a holder of its own, in the test.
func goClient(t *testing.T, url, holder string) *client.Client {
	t.Helper()
	c, err := benchkit.NewClient(holder, 0, client.Config{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// inspectJSONOf runs inspect --json on resource.
func inspectJSONOf(t *testing.T, url, resource string) inspectJSON {
	t.Helper()
	code, out, errs := runCLI(t, url, "inspect", "--json", resource)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errs)
	}
	var st inspectJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("inspect --json printed %q: %v", out, err)
	}
	return st
}
