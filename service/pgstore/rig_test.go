//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/pgtest"
	"github.com/lease-fence/lease-fence/test/rig/rigproc"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// pg is the PostgreSQL server the tests of this package share; each rig
// gets its own schema on it (search_path), so its state, sequence and
// fence tables are its own.
var pg *pgtest.Server

var schemaSeq atomic.Int32

func TestMain(m *testing.M) {
	rigproc.Main(m, &pg, func() (*pgtest.Server, error) { return pgtest.Start(pgtest.Options{}) })
}

// ttl is the rig's lease length. Expiries are stepped (rig.step), never
// waited for, so it is long: a test whose leases must stay live throughout
// (TestListPagesOnPostgres) took 36 s at load 35 and saw them expire at
// 30 s.
const (
	ttl   = 5 * time.Minute
	ttlMs = 300_000.0
)

// rigTimeout bounds each call of a rig's store unless its test sets one
// (it is also PostgreSQL's lock_timeout): 160 acquisitions of one token at
// once queue on its owner row, and under -race on a loaded runner the last
// waited past the 5 s default, and past a minute (503 unavailable). It is
// a guard against a hang, not a figure.
const rigTimeout = 5 * time.Minute

// newSchema makes a fresh schema and returns a connection string whose
// search_path is that schema.
func newSchema(t testing.TB) string {
	t.Helper()
	return newSchemaOn(t, pg)
}

// newSchemaOn is newSchema on another server.
func newSchemaOn(t testing.TB, srv *pgtest.Server) string {
	t.Helper()
	name := fmt.Sprintf("s%d", schemaSeq.Add(1))
	conn, err := pgx.Connect(context.Background(), srv.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	return srv.DSN("") + " search_path=" + name
}

// atOnce makes the calls msg(0) to msg(n-1) at once, call i on replica
// i%len(g.r), and counts their answers: "granted" (an ok answer), or the
// refusal's status and code ("503 too_many_leases").
func (g *rig) atOnce(n int, msg func(i int) wire.Message) map[string]int {
	got := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply, err := g.r[i%len(g.r)].svc.Call(context.Background(), msg(i))
			var rf *wire.Refusal
			key := "granted"
			switch {
			case errors.As(err, &rf):
				we := httpapi.ErrorOf(rf)
				key = strconv.Itoa(we.Status) + " " + we.Code
			case err != nil:
				key = err.Error()
			case !reply.OK:
				key = fmt.Sprintf("not ok: %+v", reply)
			}
			mu.Lock()
			got[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got
}

// throughProxy opens one more store over the rig's state, connected through
// a proxy (pgtest.Proxy) that the test can cut; a call on it has 300 ms.
// Both are closed when the test ends.
func (g *rig) throughProxy() (*pgtest.Proxy, *pgstore.Store) {
	g.t.Helper()
	px := pg.ProxyFor(g.t)
	dsn := strings.Replace(g.dsn, "port="+strconv.Itoa(pg.Port), "port="+strconv.Itoa(px.Port()), 1)
	st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{TTL: ttl, Timeout: 300 * time.Millisecond})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(st.Close)
	return px, st
}

// conn opens a connection to the rig's database and schema.
func (g *rig) conn() *pgx.Conn {
	g.t.Helper()
	conn, err := pgx.Connect(context.Background(), g.dsn)
	if err != nil {
		g.t.Fatal(err)
	}
	return conn
}

// listeningWatch opens a watch of prefix on replica i and waits until that
// replica listens: every decision of another replica from then on sends
// its events. The watch is closed at the test's end.
func (g *rig) listeningWatch(i int, prefix string) *service.Watch {
	g.t.Helper()
	w, err := g.r[i].svc.Watch(wire.WatchRequest{Prefix: prefix}, wire.Caller{}, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(w.Close)
	select {
	case <-pgstore.Listening(g.r[i].store):
	case <-time.After(30 * time.Second): // against a hang only
		g.t.Fatal("the replica does not listen")
	}
	return w
}

// replica is one coordinator over the rig's database: its own Store (pool),
// Service and handler, as another process would have.
type replica struct {
	store *pgstore.Store
	svc   *service.Service
	h     http.Handler
	logs  *syncio.Buffer
}

type rig struct {
	t   *testing.T
	dsn string
	r   []*replica
}

// newRig creates the state in a fresh schema and opens n replicas over it
// with opts (TTL 30s unless set).
func newRig(t *testing.T, n int, opts pgstore.Options) *rig {
	t.Helper()
	g := &rig{t: t, dsn: newSchema(t)}
	if opts.TTL == 0 {
		opts.TTL = ttl
	}
	for i := range n {
		g.r = append(g.r, g.open(opts, i == 0))
	}
	return g
}

func (g *rig) open(opts pgstore.Options, create bool) *replica {
	g.t.Helper()
	if opts.TTL == 0 {
		opts.TTL = ttl
	}
	if opts.Timeout == 0 {
		opts.Timeout = rigTimeout
	}
	logs := &syncio.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	open := pgstore.Open
	if create {
		open = pgstore.Create
	}
	st, err := open(context.Background(), g.dsn, opts)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(st.Close)
	svc, err := service.New(service.Config{TTL: opts.TTL, Store: st})
	if err != nil {
		g.t.Fatal(err)
	}
	return &replica{store: st, svc: svc, h: httpapi.NewHandler(svc, httpapi.HandlerOptions{}), logs: logs}
}

// post sends m to replica i and returns the status and the decoded answer.
func (g *rig) post(i int, m wire.Message) (int, map[string]any) {
	g.t.Helper()
	body, err := wire.EncodeMessage(m)
	if err != nil {
		g.t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, m.Op.Path(), strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = "127.0.0.1:4000" // a loopback caller: a revoke is taken
	rec := httptest.NewRecorder()
	g.r[i].h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		g.t.Fatalf("answer %q is not JSON: %v", rec.Body.String(), err)
	}
	return rec.Code, out
}

// ok posts m to replica i and requires a 200 ok answer, which it returns;
// what names the call in the failure.
func (g *rig) ok(i int, what string, m wire.Message) map[string]any {
	g.t.Helper()
	st, out := g.post(i, m)
	if st != 200 || out["ok"] != true {
		g.t.Fatalf("%s: %d %v", what, st, out)
	}
	return out
}

// grant posts m to replica i, requires a grant and returns its fence and
// coordinator expiry.
func (g *rig) grant(i int, m wire.Message) (uint64, float64) {
	g.t.Helper()
	out := g.ok(i, fmt.Sprintf("%s %s by %s on replica %d: not granted", m.Op, m.Request.Resource, m.Request.HolderID, i), m)
	gr := out["grant"].(map[string]any)
	return uint64(gr["fence"].(float64)), gr["coordinatorExpiresAt"].(map[string]any)["millis"].(float64)
}

func errCode(t testing.TB, st int, out map[string]any) string {
	t.Helper()
	e, ok := out["error"].(map[string]any)
	if !ok {
		t.Fatalf("not an error: %d %v", st, out)
	}
	return e["code"].(string)
}

// secretOf is the secret holder chooses in these tests.
func secretOf(holder string) string { return "secret-of-" + holder + "-0123456789" }

func acquireMsg(id, resource, holder string) wire.Message {
	return wire.Message{Op: wire.OpAcquire, Request: reqOf("acquire", id, resource, holder, 0), Secret: secretOf(holder)}
}

func renewMsg(id, resource, holder string, f uint64) wire.Message {
	return wire.Message{Op: wire.OpRenew, Request: reqOf("renew", id, resource, holder, f), Secret: secretOf(holder)}
}

func releaseMsg(id, resource, holder string, f uint64) wire.Message {
	return wire.Message{Op: wire.OpRelease, Request: reqOf("", id, resource, holder, f), Secret: secretOf(holder)}
}

func reqOf(kind, id, resource, holder string, f uint64) lease.Request {
	r := lease.Request{Kind: lease.Kind(kind), RequestID: id, Resource: resource, HolderID: holder, Fence: f}
	if kind != "" {
		r.SentAt = clock.At("agent-"+holder, 1)
	}
	return r
}

// dbNow reads the database server's clock as the store does (Unix
// milliseconds, whole).
func (g *rig) dbNow() float64 {
	g.t.Helper()
	var now float64
	pgtest.QueryRow(g.t, g.dsn, `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8`, &now)
	return now
}

// sweepAll sweeps through replica i until a sweep finds nothing more.
func (g *rig) sweepAll(i int) {
	g.t.Helper()
	for {
		n, err := g.r[i].store.Sweep(context.Background())
		if err != nil {
			g.t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// step moves the clock every replica reads by ms (from where it is now).
func (g *rig) step(ms float64) {
	for _, r := range g.r {
		pgstore.SetClockOffset(r.store, ms)
	}
}
