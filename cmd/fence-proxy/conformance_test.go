//go:build linux

package main

import (
	"net/url"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/lease-fence/lease-fence/gates/gatetest"
	"github.com/lease-fence/lease-fence/gates/httpfence/httpfencetest"
)

// proxyProcess is fence-proxy running as a child process (this test binary
// in the proxy role) on a state file.
type proxyProcess struct {
	state, upstream, listen string
	p                       *proc
}

func (pp *proxyProcess) start(t testing.TB, init bool) {
	t.Helper()
	args := []string{"-listen", pp.listen, "-quiet", "-upstream", pp.upstream, "-state", pp.state}
	if init {
		args = append(args, "-init")
	}
	pp.p = spawn(t, "proxy", nil, args...)
	u, err := url.Parse(pp.p.url(t))
	if err != nil {
		t.Fatal(err)
	}
	pp.listen = u.Host
}

var processes sync.Map // addr -> *proxyProcess

// The conformance suite against the fence-proxy program as a child process,
// writer processes included, in front of an upstream API in the test's
// process. Restart kills the proxy with SIGKILL and starts it again on the
// same state file and address: floors, refusals and the upstream's values
// are all there, and a stale fence is still refused. The header's ceiling
// (httpfence.MaxHeaderFence) is declared, so the fences above it are
// required to be refused as malformed.
func TestConformance(t *testing.T) {
	gatetest.Run(t, httpfencetest.Config(func(t testing.TB, api *httpfencetest.API) string {
		pp := &proxyProcess{state: filepath.Join(t.TempDir(), "proxy.db"), upstream: api.URL, listen: "127.0.0.1:0"}
		pp.start(t, true)
		processes.Store(httpfencetest.Addr("http://"+pp.listen, api), pp)
		return "http://" + pp.listen
	}, func(t testing.TB, addr string) {
		v, _ := processes.Load(addr)
		pp := v.(*proxyProcess)
		if err := pp.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = pp.p.cmd.Wait()
		pp.start(t, false)
	}, true))
}
