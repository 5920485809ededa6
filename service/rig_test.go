package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

const ttl = time.Second

// memPersist is a Persister in memory that keeps entries encoded, as a disk
// would, records every write, and fails writes when told to.
type memPersist struct {
	mu      sync.Mutex
	mark    uint64
	entries map[string][]byte
	writes  []write
	// fail, if set, is called by Write; an error it returns fails the
	// write and changes nothing.
	fail func(Batch) error
}

type write struct {
	b    Batch
	sync bool
}

func newMemPersist() *memPersist { return &memPersist{entries: map[string][]byte{}} }

func (m *memPersist) Load(context.Context) (Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Stored{Mark: m.mark}
	for k, v := range m.entries {
		e, err := DecodeEntry(k, v)
		if err != nil {
			return Stored{}, err
		}
		st.Entries = append(st.Entries, e)
	}
	return st, nil
}

func (m *memPersist) Write(_ context.Context, b Batch, sync bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		if err := m.fail(b); err != nil {
			return err
		}
	}
	m.writes = append(m.writes, write{b, sync})
	m.mark = max(m.mark, b.Mark)
	for _, e := range b.Put {
		v, err := EncodeEntry(e)
		if err != nil {
			return err
		}
		m.entries[e.Resource] = v
	}
	for _, name := range b.Delete {
		delete(m.entries, name)
	}
	return nil
}

// contents is everything stored, as text.
func (m *memPersist) contents() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]string{"mark": strconv.FormatUint(m.mark, 10)}
	for k, v := range m.entries {
		out[k] = string(v)
	}
	return out
}

type rig struct {
	t     *testing.T
	clk   *clock.Manual
	disk  *memPersist
	store *Local
	svc   *Service
	h     http.Handler
	logs  *bytes.Buffer
}

// newRig is a service over a Local whose clock starts at 1000, TTL 1s,
// persisted in disk (a fresh one if nil), with cfg's limits; the service's
// wake-ups run on the same manual clock.
func newRig(t *testing.T, disk *memPersist, cfg LocalConfig) *rig {
	t.Helper()
	return newRigWaiters(t, disk, cfg, 0)
}

// newRigWaiters is newRig with a service that lets at most waiters calls
// wait (0: the default).
func newRigWaiters(t *testing.T, disk *memPersist, cfg LocalConfig, waiters int) *rig {
	t.Helper()
	clk, err := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if disk == nil {
		disk = newMemPersist()
	}
	cfg.Clock, cfg.TTL, cfg.Persist = clk, ttl, disk
	store, err := NewLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{TTL: ttl, Store: store, AfterFunc: clk.AfterFunc, MaxWaiters: waiters})
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	h := httpapi.NewHandler(svc, httpapi.HandlerOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return &rig{t: t, clk: clk, disk: disk, store: store, svc: svc, h: h, logs: logs}
}

// do sends body to path and returns the status and the decoded answer.
func (r *rig) do(method, path, body string) (int, map[string]any) {
	r.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		r.t.Fatalf("%s %s: content type %q", method, path, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		r.t.Fatalf("%s %s: answer %q is not JSON: %v", method, path, rec.Body.String(), err)
	}
	return rec.Code, out
}

func (r *rig) post(op wire.Op, m wire.Message) (int, map[string]any) {
	r.t.Helper()
	body, err := wire.EncodeMessage(m)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.do(http.MethodPost, op.Path(), string(body))
}

// secretOf is the secret holder chooses in these tests.
// newClient is a client.Client of lc's holder with cfg's settings, retrying
// at once unless cfg.Backoff says otherwise.
func newClient(t *testing.T, lc lease.ClientConfig, cfg client.Config) *client.Client {
	t.Helper()
	var err error
	if cfg.Lease, err = lease.NewClient(lc); err != nil {
		t.Fatal(err)
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 0 }
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func secretOf(holder string) string { return "secret-of-" + holder + "-0123456789" }

func acquireMsg(id, resource, holder string) wire.Message {
	return wire.Message{Op: wire.OpAcquire, Request: reqOf("acquire", id, resource, holder, 0), Secret: secretOf(holder)}
}

func renewMsg(id, resource, holder string, fence uint64, secret string) wire.Message {
	return wire.Message{Op: wire.OpRenew, Request: reqOf("renew", id, resource, holder, fence), Secret: secret}
}

func releaseMsg(id, resource, holder string, fence uint64, secret string) wire.Message {
	return wire.Message{Op: wire.OpRelease, Request: reqOf("", id, resource, holder, fence), Secret: secret}
}

func reqOf(kind, id, resource, holder string, fence uint64) lease.Request {
	r := lease.Request{Kind: lease.Kind(kind), RequestID: id, Resource: resource, HolderID: holder, Fence: fence}
	if kind != "" {
		r.SentAt = clock.At("agent-"+holder, 1)
	}
	return r
}

// grantOf returns the fence of a grant, and the secret its holder chose.
func grantOf(t *testing.T, status int, out map[string]any) (fence uint64, secret string) {
	t.Helper()
	if status != 200 || out["ok"] != true {
		t.Fatalf("not granted: %d %v", status, out)
	}
	g := out["grant"].(map[string]any)
	if _, has := g["secret"]; has {
		t.Fatalf("a grant carries a secret: %v", g)
	}
	return uint64(g["fence"].(float64)), secretOf(g["holderId"].(string))
}

func (r *rig) grant(op wire.Op, m wire.Message) (uint64, string) {
	r.t.Helper()
	st, out := r.post(op, m)
	return grantOf(r.t, st, out)
}

func errCodeOf(t *testing.T, out map[string]any) string {
	t.Helper()
	e, ok := out["error"].(map[string]any)
	if !ok || len(out) != 1 {
		t.Fatalf("not an error body: %v", out)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Fatalf("error without a message: %v", out)
	}
	return e["code"].(string)
}

// state is everything the service holds: what is stored, the entries in
// memory, the counts, and the fence counter.
type state struct {
	Stored           map[string]string
	Memory           map[string]Entry
	Leases, Releases int64
	Issued           uint64
}

func (r *rig) state() state {
	st := state{Stored: r.disk.contents(), Memory: map[string]Entry{}, Leases: r.store.leases.Load(),
		Releases: r.store.releases.Load(), Issued: r.store.Issued()}
	for i := range r.store.stripes {
		s := &r.store.stripes[i]
		s.mu.Lock()
		maps.Copy(st.Memory, s.m)
		s.mu.Unlock()
	}
	return st
}

// entry returns what the store holds of resource, in memory and on disk,
// failing the test if the two differ.
func (r *rig) entry(resource string) (Entry, bool) {
	r.t.Helper()
	e, ok := r.store.Entry(resource)
	v, stored := r.disk.contents()[resource]
	var d Entry
	if stored {
		var err error
		if d, err = DecodeEntry(resource, []byte(v)); err != nil {
			r.t.Fatal(err)
		}
	}
	if ok != stored || (ok && !equalEntry(e, d)) {
		r.t.Fatalf("%s: memory holds %+v (%v), the disk %+v (%v)", resource, e, ok, d, stored)
	}
	return e, ok
}

func equalEntry(a, b Entry) bool {
	ja, _ := EncodeEntry(a)
	jb, _ := EncodeEntry(b)
	return a.Resource == b.Resource && bytes.Equal(ja, jb)
}

var errDiskFull = errors.New("test: disk full")

// wrongSecret checks that a renewal (request id renewID) and a release
// (releaseID) of agent a's lease f on "deploy" with secret are refused 403
// wrong_secret.
func (r *rig) wrongSecret(what, renewID, releaseID string, f uint64, secret string) {
	r.t.Helper()
	if st, out := r.post(wire.OpRenew, renewMsg(renewID, "deploy", "a", f, secret)); st != 403 || errCodeOf(r.t, out) != wire.CodeWrongSecret {
		r.t.Fatalf("renew, %s: %d %v", what, st, out)
	}
	if st, out := r.post(wire.OpRelease, releaseMsg(releaseID, "deploy", "a", f, secret)); st != 403 || errCodeOf(r.t, out) != wire.CodeWrongSecret {
		r.t.Fatalf("release, %s: %d %v", what, st, out)
	}
}
