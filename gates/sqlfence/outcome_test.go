//go:build !js

package sqlfence_test

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/lease-fence/lease-fence/test/rig/pgtest"
)

// cutProxy forwards TCP connections to PostgreSQL. Armed, it cuts the
// connection that sends a COMMIT: after forwarding it to the server
// (forward true: the commit happens, the client never hears so) or instead of
// forwarding it (the commit never reaches the server).
type cutProxy struct {
	*pgtest.Proxy
	armed   atomic.Bool
	forward bool
	cut     atomic.Int32
}

func newCutProxy(t *testing.T, target string, forward bool) *cutProxy {
	p := &cutProxy{forward: forward}
	px, err := pgtest.NewProxyWith(target, p.up)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	p.Proxy = px
	return p
}

// up forwards what client c sends to the server s, until it cuts.
func (p *cutProxy) up(_ int, s, c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			data := buf[:n]
			if p.armed.Load() && bytes.Contains(bytes.ToLower(data), []byte("commit\x00")) {
				p.armed.Store(false)
				p.cut.Add(1)
				if p.forward {
					_, _ = s.Write(data)
				}
				return
			}
			if _, werr := s.Write(data); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A PostgreSQL COMMIT whose connection is cut with no answer: if the commit
// reached the server, Commit reports success (it asks pg_xact_status); if it
// did not, Commit reports an error. Either way what it says matches the
// database.
func TestPostgresCommitOutcomeAfterCutConnection(t *testing.T) {
	for _, forward := range []bool{true, false} {
		name := map[bool]string{true: "CommitReachedServer", false: "CommitLost"}[forward]
		t.Run(name, func(t *testing.T) {
			b := newPostgres(t)
			proxy := newCutProxy(t, "127.0.0.1:"+strconv.Itoa(pg.Port), forward)
			dsn := b.dsn
			b.dsn = dsn[:len("host=127.0.0.1 port=")] + strconv.Itoa(proxy.Port()) + dsn[len("host=127.0.0.1 port=")+len(strconv.Itoa(pg.Port)):]
			direct := openDB(t, "pgx", dsn)
			createWrites(t, b, direct)
			db := b.open(t)
			s := open(t, b, db)
			ctx := context.Background()
			err := s.Commit(ctx, tok("a", 7), func(ctx context.Context, tx *sql.Tx) error {
				if err := insertWrite(b, tok("a", 7))(ctx, tx); err != nil {
					return err
				}
				proxy.armed.Store(true)
				return nil
			})
			if proxy.cut.Load() != 1 {
				t.Fatalf("the proxy cut %d connections", proxy.cut.Load())
			}
			rows := readWrites(t, direct, "ledger")
			floor, ferr := s.Floor(ctx, "ledger")
			if ferr != nil {
				t.Fatal(ferr)
			}
			t.Logf("Commit returned %v; %d rows, floor %d", err, len(rows), floor)
			if forward {
				if err != nil || len(rows) != 1 || floor != 7 {
					t.Fatalf("the commit happened but Commit returned %v (rows %v, floor %d)", err, rows, floor)
				}
			} else if err == nil || len(rows) != 0 || floor != 0 {
				t.Fatalf("the commit did not happen but Commit returned %v (rows %v, floor %d)", err, rows, floor)
			}
		})
	}
}
