//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// newResetProxy forwards loopback connections to target; the first cuts of
// them are reset once cutAfter queries were answered (in the middle of the
// state's checks), as a server that restarts resets them.
func newResetProxy(t *testing.T, target string, cuts, cutAfter int) *pgtest.Proxy {
	p, err := pgtest.NewProxyWith(target, func(i int, s, c net.Conn) {
		if i >= cuts {
			_, _ = io.Copy(s, c)
			return
		}
		forwardQueries(s, c, cutAfter)
		c.(*net.TCPConn).SetLinger(0) // a reset, not a clean end
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// forwardQueries forwards what the client c sends to the server s: the
// startup message, then messages until n queries have ended (n Sync
// messages of the extended protocol), and stops before the next message.
func forwardQueries(s, c net.Conn, n int) {
	var head [5]byte
	if _, err := io.ReadFull(c, head[:4]); err != nil {
		return
	}
	size := int(binary.BigEndian.Uint32(head[:4]))
	if _, err := s.Write(head[:4]); err != nil {
		return
	}
	if _, err := io.CopyN(s, c, int64(size-4)); err != nil {
		return
	}
	for n > 0 {
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return
		}
		if _, err := s.Write(head[:]); err != nil {
			return
		}
		if _, err := io.CopyN(s, c, int64(binary.BigEndian.Uint32(head[1:])-4)); err != nil {
			return
		}
		if head[0] == 'S' {
			n--
		}
	}
}

// TestUnreachableIsNotDamaged: a database whose connections are reset in
// the middle of the state's checks (a server restarting) is tried again,
// said once in the log, and opened once it answers; one that keeps
// resetting them is reported as unreachable, never as a damaged state.
func TestUnreachableIsNotDamaged(t *testing.T) {
	ctx := context.Background()
	dsn := newSchema(t)
	st, err := pgstore.Create(ctx, dsn, pgstore.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	via := func(p *pgtest.Proxy) string {
		return strings.Replace(dsn, "port="+strconv.Itoa(pg.Port), "port="+strconv.Itoa(p.Port()), 1)
	}
	// The connection is reset after the first queries, while the state's
	// objects are checked. Twice, then the database answers.
	const startup = 5
	p := newResetProxy(t, "127.0.0.1:"+strconv.Itoa(pg.Port), 2, startup)
	logs := &syncio.Buffer{}
	st, err = pgstore.Open(ctx, via(p), pgstore.Options{TTL: ttl, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("a database that answers again was refused: %v", err)
	}
	st.Close()
	if n := strings.Count(logs.String(), "the database is unreachable; trying again"); n != 1 || strings.Contains(logs.String(), "damaged") {
		t.Fatalf("the log: %s", logs.String())
	}
	t.Log(strings.TrimSpace(logs.String()))
	// Always cut: unreachable, after StartWait.
	p = newResetProxy(t, "127.0.0.1:"+strconv.Itoa(pg.Port), 1<<30, startup)
	_, err = pgstore.Open(ctx, via(p), pgstore.Options{TTL: ttl, StartWait: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "the database is unreachable (tried for 300ms)") || strings.Contains(err.Error(), "incomplete or damaged") {
		t.Fatalf("a database that keeps resetting: %v", err)
	}
	// A refusal of the server's own (a database that does not exist) is
	// not retried.
	start := time.Now()
	_, err = pgstore.Open(ctx, strings.Replace(dsn, "dbname=postgres", "dbname=nosuchdb", 1), pgstore.Options{TTL: ttl, StartWait: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "nosuchdb") || time.Since(start) > time.Minute {
		t.Fatalf("a database that does not exist: %v", err)
	}
}
