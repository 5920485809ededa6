package httpapi

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// openSession dials srv and asks for a session, returning the connection
// and the answer's status.
func openSession(t *testing.T, srv *httptest.Server, head string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // against a hang only
	if _, err := io.WriteString(c, "POST "+wire.SessionPath+" HTTP/1.1\r\nHost: t\r\n"+head+"Content-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return c, br, resp.StatusCode
}

const upgradeHead = "Connection: Upgrade\r\nUpgrade: " + wire.SessionProtocol + "\r\n"

// frame sends one call frame and reads its answer; ok is false if the
// connection ended instead.
func frame(t *testing.T, c net.Conn, br *bufio.Reader, op byte, length uint32, body []byte) (status int, answer string, ok bool) {
	t.Helper()
	head := []byte{op, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(head[1:], length)
	if _, err := c.Write(append(head, body...)); err != nil {
		return 0, "", false
	}
	var ah [wire.SessionAnswerHead]byte
	if _, err := io.ReadFull(br, ah[:]); err != nil {
		return 0, "", false
	}
	data := make([]byte, binary.BigEndian.Uint32(ah[2:]))
	if _, err := io.ReadFull(br, data); err != nil {
		return 0, "", false
	}
	return int(binary.BigEndian.Uint16(ah[:])), string(data), true
}

// ended reports whether the server closed c (a read finds its end).
func ended(br *bufio.Reader) bool {
	_, err := br.ReadByte()
	return errors.Is(err, io.EOF)
}

func releaseBody(t *testing.T) []byte {
	t.Helper()
	body, err := wire.EncodeMessage(wire.Message{Op: wire.OpRelease, Secret: strings.Repeat("s", 32),
		Request: lease.Request{RequestID: "q1", Resource: "r", HolderID: "h", Fence: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestSessionCalls: calls on a session are answered as the same requests
// would be, one after the other on one connection; a call that waits is
// refused and the session goes on; a frame that cannot be read (an
// unknown call, a body over the limit) is refused and ends the session.
func TestSessionCalls(t *testing.T) {
	var mu sync.Mutex
	var answered []string
	h := NewHandler(callOnly{}, HandlerOptions{Sessions: NewSessions(SessionOptions{}), MaxBodyBytes: 4096,
		Answered: func(op wire.Op, result string, _ *wire.Error) {
			mu.Lock()
			defer mu.Unlock()
			answered = append(answered, string(op)+" "+result)
		}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, br, status := openSession(t, srv, upgradeHead)
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %d", status)
	}
	body := releaseBody(t)
	release := byte(wire.SessionOp(wire.OpRelease))
	for range 3 {
		if st, ans, ok := frame(t, c, br, release, uint32(len(body)), body); !ok || st != 200 || ans != `{"ok":true}` {
			t.Fatalf("release on a session: %v %d %s", ok, st, ans)
		}
	}
	clk, _ := clock.NewManual("h", clock.ManualOptions{Start: 1000})
	lc, _ := lease.NewClient(lease.ClientConfig{Clock: clk, HolderID: "h"})
	req, _ := lc.BeginAcquire("r")
	waiting, _ := wire.EncodeMessage(wire.Message{Op: wire.OpAcquire, Request: req, Secret: strings.Repeat("s", 32), Wait: time.Second})
	if st, ans, ok := frame(t, c, br, byte(wire.SessionOp(wire.OpAcquire)), uint32(len(waiting)), waiting); !ok || st != 400 || !strings.Contains(ans, "not on a session") {
		t.Fatalf("a waiting call on a session: %v %d %s", ok, st, ans)
	}
	if st, ans, ok := frame(t, c, br, release, uint32(len(body)), body); !ok || st != 200 {
		t.Fatalf("after a refused call: %v %d %s", ok, st, ans)
	}
	if st, ans, ok := frame(t, c, br, 9, 0, nil); !ok || st != 404 || !ended(br) {
		t.Fatalf("an unknown call: %v %d %s", ok, st, ans)
	}
	c, br, _ = openSession(t, srv, upgradeHead)
	if st, ans, ok := frame(t, c, br, release, 4097, nil); !ok || st != 413 || !ended(br) {
		t.Fatalf("a body over the limit: %v %d %s", ok, st, ans)
	}
	want := "release ok,release ok,release ok,acquire refused,release ok, refused,release refused"
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(answered, ","); got != want {
		t.Fatalf("answered %s, want %s", got, want)
	}
}

// TestSessionRefusals: a handler without Sessions answers the path 404,
// as any unknown path; an upgrade without its headers is refused 400.
func TestSessionRefusals(t *testing.T) {
	srv := httptest.NewServer(NewHandler(callOnly{}, HandlerOptions{}))
	defer srv.Close()
	if _, _, st := openSession(t, srv, upgradeHead); st != 404 {
		t.Fatalf("without sessions: %d", st)
	}
	srv2 := httptest.NewServer(NewHandler(callOnly{}, HandlerOptions{Sessions: NewSessions(SessionOptions{})}))
	defer srv2.Close()
	if _, _, st := openSession(t, srv2, "Upgrade: "+wire.SessionProtocol+"\r\n"); st != 400 {
		t.Fatalf("without Connection: Upgrade: %d", st)
	}
	if _, _, st := openSession(t, srv2, "Connection: Upgrade\r\nUpgrade: websocket\r\n"); st != 400 {
		t.Fatalf("another protocol: %d", st)
	}
}

// blockOnce answers its first call only once release is closed.
type blockOnce struct {
	started chan struct{}
	release chan struct{}
	calls   int
}

func (b *blockOnce) Call(context.Context, wire.Message) (wire.Reply, error) {
	b.calls++
	if b.calls == 1 {
		close(b.started)
		<-b.release
	}
	return wire.Reply{OK: true}, nil
}

// TestSessionsClose: Close ends an idle session at once, lets one
// answering a call write its answer first, waits for both, and refuses
// later upgrades 503.
func TestSessionsClose(t *testing.T) {
	b := &blockOnce{started: make(chan struct{}), release: make(chan struct{})}
	ss := NewSessions(SessionOptions{})
	srv := httptest.NewServer(NewHandler(b, HandlerOptions{Sessions: ss}))
	defer srv.Close()
	_, idleR, _ := openSession(t, srv, upgradeHead)
	busy, busyR, _ := openSession(t, srv, upgradeHead)
	body := releaseBody(t)
	type res struct {
		st int
		ok bool
	}
	got := make(chan res, 1)
	go func() {
		st, _, ok := frame(t, busy, busyR, byte(wire.SessionOp(wire.OpRelease)), uint32(len(body)), body)
		got <- res{st, ok}
	}()
	<-b.started
	closed := make(chan error, 1)
	go func() { closed <- ss.Close(context.Background()) }()
	if !ended(idleR) {
		t.Fatal("the idle session was not closed")
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a call was being answered", err)
	default:
	}
	close(b.release)
	if r := <-got; !r.ok || r.st != 200 {
		t.Fatalf("the call in flight: %+v calls %d", r, b.calls)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !ended(busyR) {
		t.Fatal("the busy session was not closed after its answer")
	}
	if _, _, st := openSession(t, srv, upgradeHead); st != 503 {
		t.Fatalf("an upgrade after Close: %d", st)
	}
}

// TestSessionsCloseMidFrame: a session whose call's head is read but not
// yet its body counts as busy: Close lets it read the rest and answer
// (ending the idle ones at once), rather than cutting its read short.
func TestSessionsCloseMidFrame(t *testing.T) {
	active := make(chan struct{}, 1)
	ss := NewSessions(SessionOptions{ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateActive {
			active <- struct{}{}
		}
	}})
	srv := httptest.NewServer(NewHandler(callOnly{}, HandlerOptions{Sessions: ss}))
	defer srv.Close()
	_, idleR, _ := openSession(t, srv, upgradeHead)
	busy, busyR, _ := openSession(t, srv, upgradeHead)
	body := releaseBody(t)
	head := []byte{byte(wire.SessionOp(wire.OpRelease)), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(head[1:], uint32(len(body)))
	if _, err := busy.Write(head); err != nil {
		t.Fatal(err)
	}
	<-active // the session marked itself busy and reads the body next
	closed := make(chan error, 1)
	go func() { closed <- ss.Close(context.Background()) }()
	// The idle session's end comes after Close marked every session
	// (its removal waits for Close's lock).
	if !ended(idleR) {
		t.Fatal("the idle session was not closed")
	}
	if _, err := busy.Write(body); err != nil {
		t.Fatal(err)
	}
	var ah [wire.SessionAnswerHead]byte
	if _, err := io.ReadFull(busyR, ah[:]); err != nil {
		t.Fatalf("the call whose body came after Close was not answered: %v", err)
	}
	data := make([]byte, binary.BigEndian.Uint32(ah[2:]))
	if _, err := io.ReadFull(busyR, data); err != nil || binary.BigEndian.Uint16(ah[:]) != 200 || string(data) != wire.OKBody {
		t.Fatalf("the call in flight: %d %s (%v)", binary.BigEndian.Uint16(ah[:]), data, err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !ended(busyR) {
		t.Fatal("the busy session was not closed after its answer")
	}
}

// TestSessionDocUpgrade: the upgrade docs/service.md shows, sent as it is
// there, opens a session.
func TestSessionDocUpgrade(t *testing.T) {
	page, err := os.ReadFile("../../docs/service.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(page), "### Call sessions")
	_, block, _ := strings.Cut(after, "```\n")
	block, _, _ = strings.Cut(block, "```\n")
	if !strings.HasPrefix(block, "POST "+wire.SessionPath) {
		t.Fatalf("no upgrade in the page's Call sessions: %q", block)
	}
	srv := httptest.NewServer(NewHandler(callOnly{}, HandlerOptions{Sessions: NewSessions(SessionOptions{})}))
	defer srv.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // against a hang only
	if _, err := io.WriteString(c, strings.ReplaceAll(block, "\n", "\r\n")+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != wire.SessionProtocol {
		t.Fatalf("%v %+v", err, resp)
	}
	body := releaseBody(t)
	if st, ans, ok := frame(t, c, br, byte(wire.SessionOp(wire.OpRelease)), uint32(len(body)), body); !ok || st != 200 || ans != `{"ok":true}` {
		t.Fatalf("a release on the session: %v %d %s", ok, st, ans)
	}
}
