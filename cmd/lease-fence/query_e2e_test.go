//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/testpki"
)

// ndjson parses each line of out as a T.
func ndjson[T any](t *testing.T, out string) []T {
	t.Helper()
	var all []T
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		all = append(all, v)
	}
	return all
}

// ls and inspect show the live leases, their waiters and values; revoke
// removes a waiter, and says when there is nothing to revoke.
func TestLsInspectRevoke(t *testing.T) {
	t.Parallel()
	url := coordinator(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	// A watch tells when the waiter is in the queue.
	events := goClient(t, url, "watcher").Watch(ctx, client.WatchOptions{Prefix: "jobs/"})
	nextEvent, stop := iterPull(events)
	defer stop()
	if ev := nextEvent(t); ev.Type != wire.EventHello {
		t.Fatalf("first event %+v", ev)
	}
	a := goClient(t, url, "agent-a")
	ha, err := a.Hold(ctx, "jobs/a", client.HoldOptions{Value: "10.0.0.1:80"})
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Release(ctx)
	hb, err := a.Hold(ctx, "jobs/b", client.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Release(ctx)
	hx, err := goClient(t, url, "agent-x").Hold(ctx, "other/x", client.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hx.Release(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := goClient(t, url, "agent-b").Hold(ctx, "jobs/a", client.HoldOptions{Wait: client.WaitForever})
		waited <- err
	}()
	for ev := nextEvent(t); ev.Type != wire.EventWaiting; ev = nextEvent(t) {
	}

	code, out, errs := runCLI(t, url, "ls", "--json", "jobs/")
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, errs)
	}
	leases := ndjson[wire.LeaseInfo](t, out)
	if len(leases) != 2 || leases[0].Resource != "jobs/a" || leases[0].HolderID != "agent-a" || leases[0].Fence != ha.Token().Fence ||
		leases[0].Waiters != 1 || leases[0].Value == nil || *leases[0].Value != "10.0.0.1:80" || leases[0].WaiterIDs != nil ||
		leases[1].Resource != "jobs/b" || leases[1].RemainingMillis <= 0 {
		t.Fatalf("ls --json jobs/ printed %s", out)
	}
	code, out, _ = runCLI(t, url, "ls", "jobs/", "--waiters", "--json")
	if leases := ndjson[wire.LeaseInfo](t, out); code != 0 || len(leases) != 2 || strings.Join(leases[0].WaiterIDs, ",") != "agent-b" {
		t.Fatalf("ls --waiters --json: exit %d, %s", code, out)
	}
	code, out, _ = runCLI(t, url, "ls", "--waiters")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(rows) != 4 || strings.Join(strings.Fields(rows[0]), " ") != "RESOURCE HOLDER FENCE REMAINING WAITERS VALUE WAITER IDS" ||
		!strings.HasPrefix(rows[1], "jobs/a ") || !strings.HasSuffix(rows[1], ` 1        "10.0.0.1:80"  agent-b`) ||
		!strings.HasSuffix(rows[2], " 0        -              -") || !strings.HasPrefix(rows[3], "other/x ") {
		t.Fatalf("ls --waiters: exit %d, printed\n%s", code, out)
	}
	code, out, _ = runCLI(t, url, "inspect", "jobs/a")
	if code != 0 || !strings.Contains(out, "holder     agent-a\n") || !strings.Contains(out, `value      "10.0.0.1:80"`) {
		t.Fatalf("inspect jobs/a: exit %d, printed\n%s", code, out)
	}
	code, out, _ = runCLI(t, url, "inspect", "jobs/never")
	if code != 0 || !strings.Contains(out, "holder      -\nlast fence  0\n") {
		t.Fatalf("inspect jobs/never: exit %d, printed\n%s", code, out)
	}

	code, out, errs = runCLI(t, url, "revoke", "--holder", "agent-b", "--json", "jobs/a")
	if code != 0 || strings.TrimSpace(out) != `{"resource":"jobs/a","removedWaiter":"agent-b"}` {
		t.Fatalf("revoke of the waiter: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if err := <-waited; !errors.Is(err, client.ErrLeaseRevoked) {
		t.Fatalf("the removed waiter's Hold returned %v", err)
	}
	code, out, errs = runCLI(t, url, "revoke", "jobs/none")
	if code != exitError || out != "" || errs != "lease-fence: nothing to revoke: \"jobs/none\" has no live lease\n" {
		t.Fatalf("revoke of nothing: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// iterPull pulls the events of a watch one at a time.
func iterPull(seq func(func(client.Event, error) bool)) (func(*testing.T) client.Event, func()) {
	ch := make(chan client.Event)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		for ev, err := range seq {
			if err != nil {
				return
			}
			select {
			case ch <- ev:
			case <-done:
				return
			}
		}
	}()
	next := func(t *testing.T) client.Event {
		t.Helper()
		ev, ok := <-ch
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	}
	return next, func() { close(done) }
}

// watch --json prints a hello, then each event under the prefix as a JSON
// line, in sequence; SIGINT ends it with 0.
func TestWatchJSON(t *testing.T) {
	t.Parallel()
	url := coordinator(t)
	w := startCLI(t, url, "watch", "--json", "jobs/")
	var hello helloJSON
	if err := json.Unmarshal([]byte(w.next()), &hello); err != nil || hello.Type != "hello" || hello.Stream == "" {
		t.Fatalf("the first line is not a hello: %+v (%v)", hello, err)
	}
	// A watch for people resumes from that hello, whenever it connects.
	people := startCLI(t, url, "watch", "--stream", hello.Stream, "--after-seq", strconv.FormatUint(hello.Seq, 10), "jobs/")
	ctx := context.Background()
	c := goClient(t, url, "agent-a")
	if _, err := c.Acquire(ctx, "other/x"); err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(ctx, "jobs/w")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	var got []wire.Event
	for _, line := range []string{w.next(), w.next()} {
		var ev wire.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not an event: %q", line)
		}
		got = append(got, ev)
	}
	if got[0].Type != wire.EventGranted || got[0].Resource != "jobs/w" || got[0].HolderID != "agent-a" || got[0].Fence != l.Token().Fence ||
		got[1].Type != wire.EventReleased || got[1].Seq != got[0].Seq+1 {
		t.Fatalf("events %+v", got)
	}
	// The same events for people, resumed: no hello.
	granted := fmt.Sprintf("%-8d %-10s jobs/w  holder agent-a  fence %d  remaining ", got[0].Seq, "granted", got[0].Fence)
	if l := people.next(); !strings.HasPrefix(l, granted) || !strings.HasSuffix(l, "  waiters 0") {
		t.Fatalf("watch printed %q, want %q...", l, granted)
	}
	released := fmt.Sprintf("%-8d %-10s jobs/w  holder agent-a  fence %d  waiters 0", got[1].Seq, "released", got[1].Fence)
	if l := people.next(); l != released {
		t.Fatalf("watch printed %q, want %q", l, released)
	}
	if e := people.stderr.String(); e != "" {
		t.Fatalf("the resumed watch's stderr: %q", e)
	}
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := w.exit(); code != 0 {
		t.Fatalf("watch exited %d after SIGINT; stderr:\n%s", code, w.stderr.String())
	}
}

// With a token from token new: lock and ls within its scope; no token, or
// a revoke outside its scope, exits 77 and says why.
func TestTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, out, errs := runCLI(t, "", "token", "new", "ops", "--resources", "jobs/*")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("token new: exit %d, %q, %s", code, out, errs)
	}
	tokens, tokenFile := filepath.Join(dir, "tokens.json"), filepath.Join(dir, "ops.token")
	writeFile(t, tokens, "["+lines[1]+"]\n")
	writeFile(t, tokenFile, lines[0]+"\n")
	url := coordinator(t, "-auth", tokens)

	if code, _, errs := runCLI(t, url, "lock", "--token-file", tokenFile, "--holder", "ops-1", "jobs/x", "--", "true"); code != 0 {
		t.Fatalf("lock with the token: exit %d: %s", code, errs)
	}
	if code, out, errs := runCLI(t, url, "ls", "--json", "--token-file", tokenFile); code != 0 || out != "" {
		t.Fatalf("ls with the token: exit %d, %q: %s", code, out, errs)
	}
	code, _, errs = runCLI(t, url, "ls")
	if code != exitConn || !strings.Contains(errs, "unauthorized") || !strings.Contains(errs, envTokenFile) {
		t.Fatalf("ls without a token: exit %d: %s", code, errs)
	}
	code, _, errs = runCLI(t, url, "revoke", "--token-file", tokenFile, "other/y")
	if code != exitConn || !strings.Contains(errs, "forbidden") {
		t.Fatalf("revoke outside the scope: exit %d: %s", code, errs)
	}
}

// TLS: --ca trusts the coordinator's CA, --cert and --key present a client
// certificate; without them the call fails with 77, naming the cause.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pki, err := testpki.New(dir, "cli")
	if err != nil {
		t.Fatal(err)
	}
	url := coordinator(t, "-tls-cert", pki.Server, "-tls-key", pki.ServerKey, "-tls-client-ca", pki.CA)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the coordinator serves %s", url)
	}
	if code, _, errs := runCLI(t, url, "ls", "--ca", pki.CA, "--cert", pki.Client, "--key", pki.ClientKey); code != 0 {
		t.Fatalf("ls over mutual TLS: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI(t, url, "ls", "--ca", pki.CA); code != exitConn || !strings.Contains(errs, "certificate") {
		t.Fatalf("ls without a client certificate: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI(t, url, "ls", "--cert", pki.Client, "--key", pki.ClientKey); code != exitConn || !strings.Contains(errs, "certificate") {
		t.Fatalf("ls without the CA: exit %d: %s", code, errs)
	}
}

// cutter is a TCP proxy in front of a coordinator whose connections the
// test can cut.
type cutter struct {
	ln       net.Listener
	target   string
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.accepted++
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

// cut closes every connection open through the proxy.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cutter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted
}

// watch resumes after a disconnect: each event once, in sequence, and no
// second hello.
func TestWatchResumesAfterADisconnect(t *testing.T) {
	t.Parallel()
	url := coordinator(t)
	px := newCutter(t, strings.TrimPrefix(url, "http://"))
	w := startCLI(t, "http://"+px.ln.Addr().String(), "watch", "--json", "jobs/")
	if l := w.next(); !strings.Contains(l, `"type":"hello"`) {
		t.Fatalf("first line %q", l)
	}
	ctx := context.Background()
	c := goClient(t, url, "agent-a")
	nextEvent := func() wire.Event {
		t.Helper()
		l := w.next()
		var ev wire.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Type == "hello" {
			t.Fatalf("not an event: %q", l)
		}
		return ev
	}
	if _, err := c.Acquire(ctx, "jobs/1"); err != nil {
		t.Fatal(err)
	}
	first := nextEvent()
	px.cut()
	for _, r := range []string{"jobs/2", "jobs/3"} {
		if _, err := c.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range []string{"jobs/2", "jobs/3"} {
		if ev := nextEvent(); ev.Type != wire.EventGranted || ev.Resource != r || ev.Seq != first.Seq+uint64(i)+1 {
			t.Fatalf("after the cut, event %+v; want %s granted at seq %d", ev, r, first.Seq+uint64(i)+1)
		}
	}
	if n := px.count(); n < 2 {
		t.Fatalf("%d connections: the watch did not reconnect", n)
	}
}
