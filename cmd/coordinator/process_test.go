//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/serverproc"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/holdtest"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// The tests in this file run the coordinator as a child process: the test
// binary itself, which TestMain turns into the coordinator when childEnv is
// set, so that it can be killed with SIGKILL or started under a lowered
// file-descriptor limit.
const childEnv = "LEASE_FENCE_COORDINATOR_CHILD"

// The tests that spend their time waiting on fsync or real timers, each
// with its own child processes and state directory (TestKill9, the log
// damage, the holding suites), call t.Parallel: go test runs them
// GOMAXPROCS at a time, after the others, so their waits overlap.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	if os.Getenv(holdtest.EnvCampaigner) == "1" {
		holdtest.CampaignerMain()
		os.Exit(0)
	}
	code := m.Run()
	if err := stopSharedPG(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// child is one coordinator process.
type child struct {
	cmd *exec.Cmd
	url string
}

// startChild starts the coordinator with args; shell, if not empty, runs it
// through sh -c with that prefix (for ulimit).
func startChild(t *testing.T, shell string, args ...string) *child {
	t.Helper()
	return startChildOn(t, shell, os.Stderr, args...)
}

// startChildLogged is startChild with the child's stderr in logs.
func startChildLogged(t *testing.T, logs io.Writer, args ...string) *child {
	t.Helper()
	return startChildOn(t, "", logs, args...)
}

func startChildOn(t *testing.T, shell string, stderr io.Writer, args ...string) *child {
	t.Helper()
	return startExe(t, "", shell, stderr, args...)
}

// bareEnv names a coordinator binary built without the race detector
// (`make test-service` sets it to out/bin/coordinator). The children that
// only ever end by SIGKILL run it (startKilledChild): a process killed
// with SIGKILL never reports a race (the race detector fails a process at
// its exit), so the detector there would only multiply the child's CPU.
// Without it they run the test binary, like the others.
const bareEnv = "LEASE_FENCE_COORDINATOR_BIN"

// startKilledChild is startChildOn for a child that ends only by SIGKILL
// (its own test's or the cleanup's), which may run bareEnv's binary.
func startKilledChild(t *testing.T, stderr io.Writer, args ...string) *child {
	t.Helper()
	return startExe(t, os.Getenv(bareEnv), "", stderr, args...)
}

// childCmd is the command of a coordinator child that runs exe ("": this
// test binary) with -addr 127.0.0.1:0 -quiet and args, through shell
// first unless it is "".
func childCmd(t *testing.T, exe, shell string, args ...string) *exec.Cmd {
	t.Helper()
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			t.Fatal(err)
		}
	}
	args = append([]string{"-addr", "127.0.0.1:0", "-quiet"}, args...)
	cmd := exec.Command(exe, args...)
	if shell != "" {
		cmd = exec.Command("/bin/sh", append([]string{"-c", shell + ` && exec "$0" "$@"`, exe}, args...)...)
	}
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return cmd
}

// startExe starts childCmd's child, its stderr to stderr, once it listens.
func startExe(t *testing.T, exe, shell string, stderr io.Writer, args ...string) *child {
	t.Helper()
	cmd := childCmd(t, exe, shell, args...)
	cmd.Stderr = stderr
	// A child outlives nothing: if the test dies, so does the coordinator.
	srv, err := serverproc.Start(cmd, false)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, url: srv.URL}
	t.Cleanup(func() { c.kill() })
	return c
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		_ = c.cmd.Wait()
	}
}

// killClient is one holder of the kill test, with its own resources.
type killClient struct {
	id     string
	c      *client.Client
	rng    *rand.Rand
	free   []string                 // resources it may acquire
	held   map[string]*client.Lease // acknowledged, not released
	fences []uint64                 // every fence acknowledged to it
	// released holds the leases whose release was answered ok since the
	// last restart: a release may be answered before it is durable, so
	// after a kill each is either ended or still held by this client.
	released map[string]*client.Lease
}

func newKillClient(t *testing.T, id, url string, seed uint64) *killClient {
	k := &killClient{id: id, rng: rand.New(rand.NewPCG(seed, 1)), held: map[string]*client.Lease{}, released: map[string]*client.Lease{}}
	k.connect(t, url)
	for i := range 400 {
		k.free = append(k.free, id+"-res-"+strconv.Itoa(i))
	}
	return k
}

func (k *killClient) connect(t *testing.T, url string) {
	k.c = newClient(t, k.id, client.Config{BaseURL: url, Attempts: 1})
}

// step does one random call. A call that got no answer (the server died)
// returns its error and leaves its resource in an unknown state: the
// client never touches that resource again.
func (k *killClient) step(ctx context.Context) error {
	if len(k.held) > 0 && k.rng.IntN(3) > 0 {
		names := make([]string, 0, len(k.held))
		for n := range k.held {
			names = append(names, n)
		}
		slices.Sort(names)
		name := names[k.rng.IntN(len(names))]
		l := k.held[name]
		if k.rng.IntN(2) == 0 {
			l2, err := k.c.Renew(ctx, l)
			if err != nil {
				delete(k.held, name)
				return err
			}
			if l2.Token() != l.Token() {
				return fmt.Errorf("renewal of %v came back as %v", l.Token(), l2.Token())
			}
			k.held[name] = l2
			return nil
		}
		err := k.c.Release(ctx, l)
		delete(k.held, name)
		if err != nil {
			return err
		}
		k.free = append(k.free, name)
		k.released[name] = l
		return nil
	}
	if len(k.free) == 0 {
		return nil
	}
	i := k.rng.IntN(len(k.free))
	name := k.free[i]
	k.free = append(k.free[:i], k.free[i+1:]...)
	delete(k.released, name)
	l, err := k.c.Acquire(ctx, name)
	if err != nil {
		return err
	}
	k.held[name] = l
	k.fences = append(k.fences, l.Token().Fence)
	return nil
}

// isAnswer reports whether err is an answer of the coordinator (a denial,
// an expiry, a refusal), none of which it should give here: the leases are
// an hour long and each resource has one client. Anything else is a call
// that got no answer.
func isAnswer(err error) bool {
	var we *wire.Error
	var de *client.DeniedError
	return errors.Is(err, client.ErrExpired) || errors.As(err, &de) || errors.As(err, &we)
}

// TestKill9 kills the durable coordinator with SIGKILL 25 times while four
// clients acquire, renew and release, each at a seeded moment (after a
// seeded number of answered calls), and restarts it over the same database
// each time. It checks that the database is accepted every time, that no
// fence is ever handed out twice and every fence acknowledged after a
// restart is above every fence acknowledged before, and that every lease
// whose grant was acknowledged (and not released) survives: its holder
// renews it with its secret after the restart, and a stranger is denied.
// A lease whose release was answered in the round is, after the restart,
// either free (a stranger gets it with a new fence) or still held by the
// same holder (the release was answered before it was durable), who can
// then release it; never anything else.
func TestKill9(t *testing.T) {
	t.Parallel()
	const kills = 25
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	rng := rand.New(rand.NewPCG(9, 9))
	srv := startKilledChild(t, os.Stderr, "-init", "-state", state, "-ttl", "1h")
	var clients []*killClient
	for i := range 4 {
		clients = append(clients, newKillClient(t, "holder-"+strconv.Itoa(i), srv.url, uint64(i)))
	}
	seen := map[uint64]bool{}
	var before uint64 // highest fence acknowledged before the last kill
	releasesKept, releasesLost := 0, 0
	ctx := context.Background()
	for round := range kills {
		// Run the clients until `answered` calls were answered, then kill.
		answered := 10 + rng.IntN(40)
		var mu sync.Mutex
		count := 0
		killed := make(chan struct{})
		var once sync.Once
		kill := func() { once.Do(func() { close(killed); srv.kill() }) }
		var wg sync.WaitGroup
		errs := make(chan error, len(clients))
		for _, k := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if err := k.step(ctx); err != nil {
						select {
						case <-killed:
							if isAnswer(err) {
								errs <- fmt.Errorf("%s: %w", k.id, err)
							}
						default: // no answer, or a wrong one, before the kill
							errs <- fmt.Errorf("%s: %w", k.id, err)
							kill()
						}
						return
					}
					mu.Lock()
					count++
					if count == answered {
						kill()
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		// Every fence acknowledged in this round is new and above the
		// fences of earlier rounds.
		var top uint64
		for _, k := range clients {
			for _, f := range k.fences {
				if seen[f] {
					t.Fatalf("round %d: fence %d was handed out twice", round, f)
				}
				if f <= before {
					t.Fatalf("round %d: fence %d is not above %d, acknowledged before the restart", round, f, before)
				}
				seen[f] = true
				top = max(top, f)
			}
			k.fences = nil
		}
		before = max(before, top)

		srv = startKilledChild(t, os.Stderr, "-state", state, "-ttl", "1h")
		stranger := newKillClient(t, "stranger", srv.url, 99)
		for _, k := range clients {
			k.connect(t, srv.url)
			names := make([]string, 0, len(k.released))
			for n := range k.released {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, name := range names {
				l := k.released[name]
				sl, err := stranger.c.Acquire(ctx, name)
				var de *client.DeniedError
				switch {
				case err == nil:
					releasesKept++
				case errors.As(err, &de) && de.HeldBy == k.id:
					// The release was lost with the process: the lease
					// is held by the same holder, who can end it.
					releasesLost++
					if err := k.c.Release(ctx, l); err != nil {
						t.Fatalf("round %d: releasing %v again after the restart: %v", round, l.Token(), err)
					}
					if sl, err = stranger.c.Acquire(ctx, name); err != nil {
						t.Fatalf("round %d: %v released again, then a stranger got %v", round, l.Token(), err)
					}
				default:
					t.Fatalf("round %d: after its release was answered, %v is neither free nor held by its holder: %v", round, l.Token(), err)
				}
				f := sl.Token().Fence
				if seen[f] || f <= before {
					t.Fatalf("round %d: the stranger got fence %d (seen before: %v; last before the restart %d)", round, f, seen[f], before)
				}
				seen[f] = true
				before = f
				if err := stranger.c.Release(ctx, sl); err != nil {
					t.Fatal(err)
				}
			}
			clear(k.released)
			for name, l := range k.held {
				var de *client.DeniedError
				if _, err := stranger.c.Acquire(ctx, name); !errors.As(err, &de) || de.HeldBy != k.id {
					t.Fatalf("round %d: the acknowledged lease %v was lost: a stranger got %v", round, l.Token(), err)
				}
				l2, err := k.c.Renew(ctx, l)
				if err != nil || l2.Token() != l.Token() {
					t.Fatalf("round %d: the holder of %v could not renew it after the restart: %v", round, l.Token(), err)
				}
				k.held[name] = l2
			}
		}
	}
	t.Logf("%d kills, %d fences acknowledged, none repeated; of the releases answered in a round, %d were durable at the kill, %d were lost (the lease still held by its holder)",
		kills, len(seen), releasesKept, releasesLost)
	if len(seen) < kills*5 {
		t.Fatalf("only %d grants in %d rounds: the test did too little", len(seen), kills)
	}
}

// TestIdleConnectionsDoNotStarveNewClients runs the coordinator with its
// file-descriptor limit at 1024, opens 1,100 connections that stay idle
// (600 kept alive after one request, 500 that never send anything), and
// checks that a new client still gets an answer, that the server never held
// more descriptors than its limit allows, and that it is still running.
func TestIdleConnectionsDoNotStarveNewClients(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < 1400 {
		t.Fatalf("this test needs at least 1400 file descriptors of its own (ulimit -n), has %d: %v", rl.Cur, err)
	}
	srv := startChild(t, "ulimit -n 1024", "-memory", "-idle-timeout", "1h", "-read-header-timeout", "1h")
	addr := strings.TrimPrefix(srv.url, "http://")
	pid := srv.cmd.Process.Pid
	maxFDs := 0
	countFDs := func() {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		if err != nil {
			t.Fatalf("the coordinator is gone: %v", err)
		}
		maxFDs = max(maxFDs, len(ents))
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	body := func(i int) string {
		return fmt.Sprintf(`{"requestId":"idle-%d","resource":"idle-%d","holderId":"h","sentAt":{"millis":1,"domain":"h"},"kind":"acquire","secret":"0123456789abcdef"}`, i, i)
	}
	for i := range 1100 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%11 < 6 { // 600 kept-alive connections after one answered request
			b := body(i)
			fmt.Fprintf(c, "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("connection %d: status %d", i, resp.StatusCode)
			}
		}
		if i%100 == 0 {
			countFDs()
		}
	}
	countFDs()
	// A new client, with its own connection.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Post(srv.url+"/v1/acquire", "application/json", strings.NewReader(body(5000)))
	if err != nil {
		t.Fatalf("a new client got no answer: %v", err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("a new client: %d %s", resp.StatusCode, out)
	}
	countFDs()
	if maxFDs >= 1024 {
		t.Fatalf("the coordinator held %d descriptors, at its limit", maxFDs)
	}
	t.Logf("1,100 idle connections, then a new client answered; the coordinator held at most %d descriptors", maxFDs)
}

// post sends m to the coordinator at url and decodes the reply.
func post(t *testing.T, hc *http.Client, url string, m wire.Message) (int, wire.Reply) {
	t.Helper()
	body, err := wire.EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Post(url+m.Op.Path(), "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s %s: %v", m.Op, m.Request.Resource, err)
	}
	defer resp.Body.Close()
	var r wire.Reply
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, r
}

// TestKill9RightAfterRelease: four holders each acquire a resource and
// release it, and the coordinator is killed with SIGKILL as soon as the
// last release is answered (before the release's transaction is written,
// often: releases are answered first). After the restart each resource is
// either free or still held by the same holder with the same fence, never
// anything else; in the second case the retried release (same request id,
// same secret) is answered ok and ends it. Fences stay above every fence
// acknowledged before. Ten kills.
func TestKill9RightAfterRelease(t *testing.T) {
	t.Parallel()
	const kills, holders = 10, 4
	state := filepath.Join(t.TempDir(), "state")
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	msg := func(op wire.Op, kind, id, resource, holder string, fence uint64) wire.Message {
		q := lease.Request{Kind: lease.Kind(kind), RequestID: id, Resource: resource, HolderID: holder, Fence: fence}
		if kind != "" {
			q.SentAt = clock.At("agent-"+holder, 1)
		}
		return wire.Message{Op: op, Request: q, Secret: "secret-of-" + holder + "-0123456789"}
	}
	var top uint64
	lost, kept := 0, 0
	srv := startKilledChild(t, os.Stderr, "-init", "-state", state, "-ttl", "1h")
	for round := range kills {
		fences := make([]uint64, holders)
		var wg sync.WaitGroup
		for i := range holders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, res := "h"+strconv.Itoa(i), "r"+strconv.Itoa(round)+"-"+strconv.Itoa(i)
				st, r := post(t, hc, srv.url, msg(wire.OpAcquire, "acquire", "a-"+res, res, h, 0))
				if st != 200 || !r.OK {
					t.Errorf("acquire %s: %d %+v", res, st, r)
					return
				}
				fences[i] = r.Grant.Fence
				if st, r := post(t, hc, srv.url, msg(wire.OpRelease, "", "rel-"+res, res, h, r.Grant.Fence)); st != 200 || !r.OK {
					t.Errorf("release %s: %d %+v", res, st, r)
				}
			}()
		}
		wg.Wait()
		srv.kill()
		if t.Failed() {
			t.FailNow()
		}
		prev := top
		for _, f := range fences {
			if f <= prev {
				t.Fatalf("round %d: fence %d is not above %d, acknowledged before", round, f, prev)
			}
			top = max(top, f)
		}
		srv = startKilledChild(t, os.Stderr, "-state", state, "-ttl", "1h")
		for i := range holders {
			h, res := "h"+strconv.Itoa(i), "r"+strconv.Itoa(round)+"-"+strconv.Itoa(i)
			st, r := post(t, hc, srv.url, msg(wire.OpAcquire, "acquire", "s-"+res, res, "stranger", 0))
			switch {
			case st == 200 && r.OK:
				kept++
			case st == 200 && r.HeldBy == h:
				lost++
				// The holder still holds it with its fence: a renewal
				// works, and the retried release ends it.
				if st, r := post(t, hc, srv.url, msg(wire.OpRenew, "renew", "n-"+res, res, h, fences[i])); st != 200 || !r.OK || r.Grant.Fence != fences[i] {
					t.Fatalf("round %d: renewing %s (fence %d) after the lost release: %d %+v", round, res, fences[i], st, r)
				}
				if st, r := post(t, hc, srv.url, msg(wire.OpRelease, "", "rel-"+res, res, h, fences[i])); st != 200 || !r.OK {
					t.Fatalf("round %d: the retried release of %s: %d %+v", round, res, st, r)
				}
				if st, r = post(t, hc, srv.url, msg(wire.OpAcquire, "acquire", "s2-"+res, res, "stranger", 0)); st != 200 || !r.OK {
					t.Fatalf("round %d: %s after the retried release: %d %+v", round, res, st, r)
				}
			default:
				t.Fatalf("round %d: %s after its release was answered: %d %+v", round, res, st, r)
			}
			if r.Grant.Fence <= top {
				t.Fatalf("round %d: the stranger got fence %d, not above %d", round, r.Grant.Fence, top)
			}
			top = r.Grant.Fence
		}
	}
	t.Logf("%d kills right after %d answered releases: %d were durable, %d lost (held by the same holder, then released by the retry)",
		kills, kills*holders, kept, lost)
}

// refusedStart runs the coordinator with args, expects it to refuse to
// start, and returns what it wrote to stderr.
func refusedStart(t *testing.T, args ...string) string {
	t.Helper()
	cmd := childCmd(t, "", "", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || len(out) != 0 {
		t.Fatalf("%v: exit %v, printed %q, stderr %s", args, err, out, stderr.String())
	}
	return stderr.String()
}

// TestSecondServerIsRefused: a second coordinator on the state another one
// serves refuses to start and names the holder's pid.
func TestSecondServerIsRefused(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	first := startChild(t, "", "-init", "-state", state)
	msg := refusedStart(t, "-state", state)
	if want := "held by another process (pid " + strconv.Itoa(first.cmd.Process.Pid) + ")"; !strings.Contains(msg, want) {
		t.Fatalf("the second server said %q, want %q", msg, want)
	}
	// The first one still serves.
	if st, r := post(t, http.DefaultClient, first.url, killMsg(wire.OpAcquire, "a1", "r", "h", 0)); st != 200 || !r.OK {
		t.Fatalf("%d %+v", st, r)
	}
}

func killMsg(op wire.Op, id, resource, holder string, fence uint64) wire.Message {
	q := lease.Request{RequestID: id, Resource: resource, HolderID: holder, Fence: fence}
	if op != wire.OpRelease {
		q.Kind, q.SentAt = lease.Kind(op), clock.At("agent-"+holder, 1)
	}
	return wire.Message{Op: op, Request: q, Secret: "secret-of-" + holder + "-0123456789"}
}

// TestRestoreFromBackup: a copy of the state taken while the coordinator
// was stopped, put back after more than half a fence reserve of grants,
// would issue fences again (shown here: that is why -min-fence exists);
// with -min-fence above the last fence issued, every new fence is above
// it, and the leases the copy holds are still held.
func TestRestoreFromBackup(t *testing.T) {
	dir := t.TempDir()
	state, backup := filepath.Join(dir, "state"), filepath.Join(dir, "backup")
	srv := startChild(t, "", "-init", "-state", state, "-ttl", "1h")
	hc := &http.Client{}
	if st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "kept", "kept", "h", 0)); st != 200 || !r.OK {
		t.Fatalf("%d %+v", st, r)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	srv.cmd.Wait()
	if out, err := exec.Command("cp", "-a", state, backup).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	srv = startChild(t, "", "-state", state, "-ttl", "1h")
	var last uint64
	for i := range fenceReserve/2 + 100 {
		id := "after-" + strconv.Itoa(i)
		st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, id, id, "h", 0))
		if st != 200 || !r.OK {
			t.Fatalf("%d %+v", st, r)
		}
		last = r.Grant.Fence
	}
	srv.kill()
	restore := func() {
		if out, err := exec.Command("sh", "-c", `rm -rf "$0" && cp -a "$1" "$0"`, state, backup).CombinedOutput(); err != nil {
			t.Fatalf("restore: %v %s", err, out)
		}
	}
	restore()
	srv = startChild(t, "", "-state", state, "-ttl", "1h")
	st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "x1", "x1", "h", 0))
	if st != 200 || !r.OK || r.Grant.Fence > last {
		t.Fatalf("without -min-fence the restored copy issued %d (last issued %d): %d %+v", r.Grant.Fence, last, st, r)
	}
	t.Logf("without -min-fence, the restored copy issued fence %d again (fences up to %d were issued after the copy)", r.Grant.Fence, last)
	srv.kill()
	restore()
	srv = startChild(t, "", "-state", state, "-ttl", "1h", "-min-fence", strconv.FormatUint(last+1, 10))
	if st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "x2", "x2", "h", 0)); st != 200 || !r.OK || r.Grant.Fence != last+1 {
		t.Fatalf("with -min-fence %d: %d %+v", last+1, st, r)
	}
	if st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "x3", "kept", "other", 0)); st != 200 || r.HeldBy != "h" {
		t.Fatalf("the copy's lease: %d %+v", st, r)
	}
}

// TestFullDisk runs the coordinator on a small tmpfs (mounted by the test,
// so it runs as root, as make test does) and fills it: changes are
// refused with 503 unavailable (and the log says why, once, and /readyz
// answers 503 with the reason until there is room) before the
// disk runs out, everything else is still answered, and once there is room
// again grants resume (and the log says so). Then a kill -9 and a restart
// find every acknowledged lease.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a tmpfs and needs root (make test runs as root)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	state := filepath.Join(mnt, "state")
	logs := &syncio.Buffer{}
	srv := startChildLogged(t, logs, "-init", "-state", state, "-ttl", "1h", "-min-free-bytes", strconv.Itoa(16<<20))
	hc := &http.Client{}
	acquire := func(id, res string) (int, wire.Reply) {
		return post(t, hc, srv.url, killMsg(wire.OpAcquire, id, res, "h", 0))
	}
	if st, r := acquire("a1", "held"); st != 200 || !r.OK {
		t.Fatalf("%d %+v", st, r)
	}
	filler := filepath.Join(mnt, "filler")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=36").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v %s", err, out)
	}
	var st int
	for i, deadline := 0, time.Now().Add(20*time.Second); ; i++ {
		id := "fill-" + strconv.Itoa(i) // each a new acquisition: a retry would be answered from memory
		if st, _ = acquire(id, id); st == 503 || time.Now().After(deadline) {
			break
		}
	}
	if st != 503 {
		t.Fatalf("on a full disk: %d; log %s", st, logs.String())
	}
	waitLog(t, logs, "disk full") // the log line comes through a pipe
	if st, body := getReady(t, hc, srv.url); st != 503 || !strings.Contains(body, "less than 16 MiB free") {
		t.Fatalf("/readyz on a full disk: %d %s", st, body)
	}
	if st, r := acquire("a3", "held"); st != 200 || r.HeldBy != "h" {
		t.Fatalf("a denial on a full disk: %d %+v", st, r)
	}
	os.Remove(filler)
	for i, deadline := 0, time.Now().Add(20*time.Second); ; i++ {
		if st, _ = acquire("a4-"+strconv.Itoa(i), "r4"); st == 200 || time.Now().After(deadline) {
			break
		}
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "writable") && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // the log line comes through a pipe
	}
	if st != 200 || strings.Count(logs.String(), "disk full") != 1 || !strings.Contains(logs.String(), "writable") {
		t.Fatalf("with room again: %d; log %s", st, logs.String())
	}
	if st, body := getReady(t, hc, srv.url); st != 200 {
		t.Fatalf("/readyz with room again: %d %s", st, body)
	}
	srv.kill()
	// A start with less than -min-free-bytes free is refused: the raised
	// fence mark is written before the coordinator serves.
	msg := refusedStart(t, "-state", state, "-ttl", "1h")
	if _, last, _ := strings.Cut(msg, "\ncoordinator: "); !strings.Contains(last, "fence mark is raised (written) before the coordinator serves: pebblestore: disk full") ||
		strings.Count(strings.TrimSpace(last), "\n") != 0 {
		t.Fatalf("a start on a full disk said %q", msg)
	}
	srv = startChild(t, "", "-state", state, "-ttl", "1h", "-min-free-bytes", strconv.Itoa(16<<20))
	for _, res := range []string{"held", "r4"} {
		if st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "s-"+res, res, "stranger", 0)); st != 200 || r.HeldBy != "h" {
			t.Fatalf("%s after the restart: %d %+v", res, st, r)
		}
	}
}

// getReady answers GET url/readyz.
func getReady(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
