//go:build !js

package httpfence_test

import (
	"cmp"
	"context"
	"database/sql"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/gatetest"
	"github.com/lease-fence/lease-fence/gates/httpfence"
	"github.com/lease-fence/lease-fence/gates/httpfence/httpfencetest"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// The conformance suite against the proxy in this process (cmd/fence-proxy
// runs it against the proxy as a child process): the adapter is
// httpfencetest's; the proxy keeps its floors in sqlfence on an SQLite file,
// as cmd/fence-proxy does.

// proxyInstance is a proxy over a state file, restartable on its address.
type proxyInstance struct {
	state, addr string
	upstream    *url.URL
	wrap        func(httpfence.Store) httpfence.Store
	newProxy    func(httpfence.Options) (*httpfence.Proxy, error)
	exclusive   bool
	mu          sync.Mutex
	db          *sql.DB
	srv         *http.Server
}

func (p *proxyInstance) start(t testing.TB) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+p.state+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlfence.Open(context.Background(), db, sqlfence.Options{Dialect: sqlfence.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	var store httpfence.Store = st
	if p.wrap != nil {
		store = p.wrap(st)
	}
	newProxy := httpfence.New
	if p.newProxy != nil {
		newProxy = p.newProxy
	}
	h, err := newProxy(httpfence.Options{Upstream: p.upstream, Store: store, Exclusive: p.exclusive})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cmp.Or(p.addr, "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	p.mu.Lock()
	p.db, p.srv = db, srv
	p.mu.Unlock()
}

func (p *proxyInstance) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		p.srv.Close()
		p.db.Close()
		p.srv = nil
	}
}

var proxies sync.Map // addr -> *proxyInstance

// proxyConfig is the suite's config for proxies made by p's fields (state,
// addr and upstream set per gate).
func proxyConfig(like *proxyInstance) gatetest.Config {
	return httpfencetest.Config(func(t testing.TB, api *httpfencetest.API) string {
		up, _ := url.Parse(api.URL)
		p := &proxyInstance{state: filepath.Join(t.TempDir(), "proxy.db"), upstream: up, wrap: like.wrap, newProxy: like.newProxy, exclusive: like.exclusive}
		p.start(t)
		t.Cleanup(p.stop)
		proxies.Store(httpfencetest.Addr("http://"+p.addr, api), p)
		return "http://" + p.addr
	}, func(t testing.TB, addr string) {
		v, _ := proxies.Load(addr)
		p := v.(*proxyInstance)
		p.stop()
		p.start(t)
	}, !like.exclusive)
}

// The proxy passes the conformance suite, writer processes included, with
// shared admission (RaiseWaitsForEqualWrites with 8 writes at the floor's
// fence in flight). Its
// header carries fences up to httpfence.MaxHeaderFence (an RFC 8941 integer
// has at most 15 digits), so it declares that ceiling: the fences above it,
// up to fence.MaxFence, are refused as malformed (400) before anything
// changes. A write that fails upstream keeps the floor raised (KeepsFloor):
// the upstream may hold part of it. Refusals are not capped: every one is
// kept in the state file. Restart closes the proxy and its state file and
// serves again on the same address.
func TestConformance(t *testing.T) {
	gatetest.Run(t, proxyConfig(&proxyInstance{}))
}

// With Exclusive, writes to a resource are forwarded one at a time: the
// in-process rules with one write at a time at the floor's fence.
func TestConformanceExclusive(t *testing.T) {
	c := proxyConfig(&proxyInstance{exclusive: true})
	c.Attach = nil
	gatetest.Run(t, c)
}

// The deliberate break of shared admission: a raise that does not wait for
// the writes in flight with the floor's fence (httpfence.NewBroken) fails
// RaiseWaitsForEqualWrites.
func TestConformanceRaiseThatDoesNotWaitCaught(t *testing.T) {
	got := gatetest.Failures(t, proxyConfig(&proxyInstance{newProxy: httpfence.NewBroken}))
	if len(got["RaiseWaitsForEqualWrites"]) == 0 {
		t.Errorf("rule RaiseWaitsForEqualWrites did not catch a proxy whose raise does not wait (failures: %v)", got)
	}
}

// forgetfulStore is the deliberate break: it refuses and logs a stale token
// like the real store, but never raises the floor.
type forgetfulStore struct{ *sqlfence.Store }

func (s forgetfulStore) Admit(ctx context.Context, tok fence.Token) error {
	if err := tok.Validate(); err != nil {
		return err
	}
	f, err := s.Floor(ctx, tok.Resource)
	if err != nil {
		return err
	}
	if tok.Fence < f {
		return s.Store.Admit(ctx, tok)
	}
	return nil
}

func TestConformanceBreakCaught(t *testing.T) {
	got := gatetest.Failures(t, proxyConfig(&proxyInstance{wrap: func(s httpfence.Store) httpfence.Store { return forgetfulStore{s.(*sqlfence.Store)} }}))
	for _, rule := range []string{"FloorRaisedBeforeWrite", "LowerFenceRefused", "AdmitRaisesWithoutWriting", "FailedWrite"} {
		if len(got[rule]) == 0 {
			t.Errorf("rule %s did not catch a proxy whose store never raises the floor (failures: %v)", rule, got)
		}
	}
}
