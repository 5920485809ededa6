//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// The tests of draining: the coordinator as a child process, stopped with
// SIGTERM while clients are calling it.

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n int
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n += n
	return n, err
}

// rawCall posts body on a new connection and reads the answer, reporting
// whether it failed after the first byte of an answer had arrived (a reset
// mid-answer), which a drain must never do.
func rawCall(addr, path string, body []byte) (status int, reply []byte, midAnswer bool, err error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, nil, false, err
	}
	defer conn.Close()
	cc := &countingConn{Conn: conn}
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	if _, err := conn.Write([]byte(req)); err != nil {
		return 0, nil, false, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(cc), nil)
	if err != nil {
		return 0, nil, cc.n > 0, err
	}
	defer resp.Body.Close()
	reply, err = io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, true, err
	}
	return resp.StatusCode, reply, false, nil
}

// drainHolder is a client of the drain test: acquire, renew, release, on
// resources of its own, each outcome recorded only once acknowledged.
type drainHolder struct {
	id       string
	held     map[string]uint64 // acknowledged grants not released
	released map[string]bool   // acknowledged releases (and not acquired again)
	unknown  map[string]bool   // calls that got no answer: their outcome is not known
	calls    int
}

// TestDrainUnderLoad: SIGTERM while six clients acquire, renew and release
// over kept-alive connections, and four calls wait: the waiting calls are
// answered at once (a denial, with the holder and retryAfterMillis), no
// answer is cut off, /readyz on the metrics listener says draining, the
// process exits 0, and a restart over the same state finds every
// acknowledged lease held by its holder and every acknowledged release
// done.
func TestDrainUnderLoad(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	logs := &syncio.Buffer{}
	srv := startChildLogged(t, logs, "-init", "-state", state, "-ttl", "1h", "-metrics-addr", "127.0.0.1:0", "-drain-timeout", "2m")
	addr := strings.TrimPrefix(srv.url, "http://")
	// The child's stderr is copied by a goroutine of exec.Cmd: the line
	// may come after the listening line on stdout.
	opsURL := strings.TrimSuffix(strings.Trim(strings.Fields(waitLog(t, logs, "metrics on "))[0], `"`), "/metrics")
	hc := &http.Client{}
	// Four waiting calls on a held resource.
	if st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "h", "held", "keeper", 0)); st != 200 || !r.OK {
		t.Fatalf("%d %+v", st, r)
	}
	type waited struct {
		status int
		reply  []byte
		mid    bool
		err    error
	}
	waits := make(chan waited, 4)
	for i := range 4 {
		m := killMsg(wire.OpAcquire, "w"+strconv.Itoa(i), "held", "waiter-"+strconv.Itoa(i), 0)
		m.Wait = time.Minute
		body, _ := wire.EncodeMessage(m)
		go func() {
			st, reply, mid, err := rawCall(addr, "/v1/acquire", body)
			waits <- waited{st, reply, mid, err}
		}()
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Millisecond) {
		if scrape(t, hc, opsURL+"/metrics", "").Value("leasefence_waiters") == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the calls never waited")
		}
	}
	// Six clients at full speed; raw calls on new connections beside them.
	var wg sync.WaitGroup
	holders := make([]*drainHolder, 6)
	var mids, rawErrs sync.Map
	stop := make(chan struct{})
	for i := range holders {
		h := &drainHolder{id: "c" + strconv.Itoa(i), held: map[string]uint64{}, released: map[string]bool{}, unknown: map[string]bool{}}
		holders[i] = h
		wg.Add(2)
		go func() {
			defer wg.Done()
			c := holder(t, srv.url, h.id)
			leases := map[string]*client.Lease{}
			for n := 0; ; n++ {
				res := h.id + "-" + strconv.Itoa(n%8)
				var err error
				if l, ok := leases[res]; ok {
					if n%3 == 0 {
						_, err = c.Renew(context.Background(), l)
					} else if err = c.Release(context.Background(), l); err == nil {
						delete(leases, res)
						delete(h.held, res)
						h.released[res] = true
					}
				} else {
					var l *client.Lease
					if l, err = c.Acquire(context.Background(), res); err == nil {
						leases[res] = l
						h.held[res] = l.Token().Fence
						delete(h.released, res)
					}
				}
				if err != nil {
					if isAnswer(err) {
						t.Errorf("%s: an answer while draining: %v", h.id, err)
					}
					h.unknown[res] = true // sent, never answered: its outcome is not known
					delete(h.held, res)
					delete(h.released, res)
					return
				}
				h.calls++
			}
		}()
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _, mid, err := rawCall(addr, "/v1/inspect", []byte(`{"resource":"held"}`))
				if mid {
					mids.Store(n, err)
				}
				if err != nil {
					rawErrs.Store(err.Error(), true)
					if errors.Is(err, syscall.ECONNREFUSED) {
						return
					}
				}
			}
		}()
	}
	// Let them run, then drain. The clients call in a loop until their
	// first unanswered call, so they are mid-call at the SIGTERM whatever
	// their pace; the count only makes sure each has had its turn (a loaded
	// runner with -race managed under 15 grants/s), and the deadline is
	// against a hang.
	for deadline := time.Now().Add(5 * time.Minute); scrape(t, hc, opsURL+"/metrics", "").Value("leasefence_grants_total") < 60; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the clients made no progress")
		}
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		w := <-waits
		var r wire.Reply
		if w.err != nil || w.status != 200 || wire.ParseError(w.status, w.reply) != nil || !strings.Contains(string(w.reply), `"heldBy":"keeper"`) ||
			!strings.Contains(string(w.reply), `"retryAfterMillis"`) {
			t.Errorf("waiting call %d: %d %s %v (mid-answer %v) %+v", i, w.status, w.reply, w.err, w.mid, r)
		}
	}
	// The metrics listener stays open while the server drains.
	if resp, err := http.Get(opsURL + "/readyz"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || !strings.Contains(string(body), "draining") {
			t.Errorf("/readyz while draining: %d %s", resp.StatusCode, body)
		}
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the drained coordinator exited with %v; log:\n%s", err, logs.String())
		}
	case <-time.After(3 * time.Minute): // -drain-timeout is 2m
		t.Fatalf("the coordinator did not exit after SIGTERM; log:\n%s", logs.String())
	}
	close(stop)
	wg.Wait()
	mids.Range(func(k, v any) bool {
		t.Errorf("a raw call (%v) was cut off mid-answer: %v", k, v)
		return true
	})
	if !strings.Contains(logs.String(), "drained: every change answered is durable") {
		t.Errorf("the log does not say it drained:\n%s", logs.String())
	}
	// After the restart, every acknowledged lease is held by its holder,
	// every acknowledged release is done.
	srv = startChild(t, "", "-state", state, "-ttl", "1h")
	held, released := 0, 0
	for _, h := range holders {
		for res := range h.held {
			st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "s-"+res, res, "stranger", 0))
			if st != 200 || r.HeldBy != h.id {
				t.Errorf("%s held by %s before the drain: after it %d %+v", res, h.id, st, r)
			}
			held++
		}
		for res := range h.released {
			st, r := post(t, hc, srv.url, killMsg(wire.OpAcquire, "s-"+res, res, "stranger", 0))
			if st != 200 || !r.OK {
				t.Errorf("%s released by %s before the drain: after it %d %+v", res, h.id, st, r)
			}
			released++
		}
	}
	var errs []string
	rawErrs.Range(func(k, _ any) bool { errs = append(errs, k.(string)); return true })
	t.Logf("%d calls acknowledged; after the restart %d leases held and %d releases done as acknowledged; the raw calls after the drain got: %v",
		func() (n int) {
			for _, h := range holders {
				n += h.calls
			}
			return
		}(), held, released, errs)
}

// stall opens a call that never finishes sending its body. It returns once
// the server's handler reads the body (the handler's first read sends 100
// Continue), so a SIGTERM after it finds the call in flight, never still
// in the listener's backlog.
func stall(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("POST /v1/inspect HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("no 100 Continue from the server: %q %v", line, err)
	}
	conn.SetReadDeadline(time.Time{})
	if _, err := conn.Write([]byte(`{"res`)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestDrainTimeout: a call that holds the drain up (a body that never
// comes) is cut off at -drain-timeout, and the coordinator exits 1, saying
// so, well before its read timeout would have ended the call.
func TestDrainTimeout(t *testing.T) {
	logs := &syncio.Buffer{}
	srv := startChildLogged(t, logs, "-memory", "-read-timeout", "5m", "-drain-timeout", "300ms")
	stall(t, strings.TrimPrefix(srv.url, "http://"))
	srv.cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, srv, 1, 60*time.Second)
	if !strings.Contains(logs.String(), "longer than -drain-timeout") {
		t.Fatalf("the log does not say why:\n%s", logs.String())
	}
}

// TestSecondSIGTERM: a second SIGTERM while a drain waits exits at once
// (status 1, saying so).
func TestSecondSIGTERM(t *testing.T) {
	logs := &syncio.Buffer{}
	srv := startChildLogged(t, logs, "-memory", "-read-timeout", "5m", "-drain-timeout", "5m")
	stall(t, strings.TrimPrefix(srv.url, "http://"))
	srv.cmd.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "draining"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no drain started:\n%s", logs.String())
		}
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, srv, 1, 60*time.Second)
	if !strings.Contains(logs.String(), "a second terminated while draining: exiting at once") {
		t.Fatalf("the log does not say why:\n%s", logs.String())
	}
}

// waitLog waits (at most 10 s) until logs holds want, and returns what
// follows it.
func waitLog(t *testing.T, logs *syncio.Buffer, want string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if _, rest, ok := strings.Cut(logs.String(), want); ok && strings.Contains(rest, "\n") {
			return rest
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", want, logs.String())
		}
	}
}

// waitExit waits for the child to exit with code, failing after within
// (far shorter than the timeouts that would otherwise have ended it).
func waitExit(t *testing.T, c *child, code int, within time.Duration) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	select {
	case err := <-exited:
		got := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			got = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if got != code {
			t.Fatalf("exited with status %d, want %d", got, code)
		}
	case <-time.After(within):
		t.Fatalf("still running after %v", within)
	}
}

// drainHoldTTL is TestDrainKeepsHolds' lease length: far above the time a
// restart takes on a loaded machine.
const drainHoldTTL = "60s"

// TestDrainKeepsHolds: a lease kept by Client.Hold lives through a drain
// and a restart of the coordinator on the same address: its renewals fail
// while no server listens and are tried again sooner, the first one after
// the restart succeeds, and the work's context never ends. An observer
// waiting when SIGTERM comes is answered at once with the state then (held
// by the keeper, its fence).
//
// The hold renews every 300 ms, so the TTL sets only how long the gap
// between the last renewal before the drain and the first after the
// restart (a drain, an exit, a new process opening the state) may be: at
// 6 s a loaded machine's slow start of a -race child could lose the lease.
// A drain that dropped the leases still fails the test: the first renewal
// after the restart is refused and the hold ends.
func TestDrainKeepsHolds(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	logs := &syncio.Buffer{}
	srv := startChildLogged(t, logs, "-init", "-state", state, "-ttl", drainHoldTTL)
	addr := strings.TrimPrefix(srv.url, "http://")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := holder(t, srv.url, "keeper").Hold(ctx, "kept", client.HoldOptions{RenewEvery: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fence := h.Token().Fence
	waitRenewals := func(n int, what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); h.Renewals() < n; time.Sleep(time.Millisecond) {
			if h.Context().Err() != nil {
				t.Fatalf("%s: the hold ended: %v; log:\n%s", what, context.Cause(h.Context()), logs)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d renewals, want %d; log:\n%s", what, h.Renewals(), n, logs)
			}
		}
	}
	waitRenewals(2, "before the drain")
	type observed struct {
		st  client.Status
		err error
	}
	obs := make(chan observed, 1)
	go func() {
		st, err := holder(t, srv.url, "observer").Observe(ctx, "kept", fence, 30*time.Second)
		obs <- observed{st, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); scrape(t, http.DefaultClient, srv.url+"/metrics", "").Value("leasefence_waiters") != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			select {
			case o := <-obs:
				t.Fatalf("the observer never waited: answered %+v %v", o.st, o.err)
			default:
			}
			t.Fatalf("the observer never waited: leasefence_waiters %v", scrape(t, http.DefaultClient, srv.url+"/metrics", "").Value("leasefence_waiters"))
		}
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-obs:
		if o.err != nil || !o.st.Held || o.st.HolderID != "keeper" || o.st.Fence != fence {
			t.Fatalf("the observer, at the drain: %+v %v", o.st, o.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the observer was not answered at the drain")
	}
	waitExit(t, srv, 0, 30*time.Second)
	before := h.Renewals()
	srv = startKilledChild(t, logs, "-state", state, "-ttl", drainHoldTTL, "-addr", addr)
	waitRenewals(before+2, "after the restart")
	if h.Token().Fence != fence || h.Context().Err() != nil {
		t.Fatalf("the hold after the restart: fence %d (was %d), %v", h.Token().Fence, fence, context.Cause(h.Context()))
	}
	st, err := holder(t, srv.url, "observer").Inspect(ctx, "kept")
	if err != nil || !st.Held || st.HolderID != "keeper" || st.Fence != fence {
		t.Fatalf("after the restart: %+v %v", st, err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
