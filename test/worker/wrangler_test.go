//go:build e2e

package workere2e

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lease-fence/lease-fence/internal/child"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
	"github.com/lease-fence/lease-fence/test/rig/wranglerdev"
)

// directClient sends the tests' raw calls to a runtime's own URL, and
// sends again a call that wrangler dev's proxy lost (its 503 "Your worker
// restarted mid-request") or that met a kept-alive connection the proxy
// had closed (EOF), as wranglerdev.Transport does: a waiting acquisition
// of TestWorkerTokenLimits met both beside other suites. Each call carries
// its request id, so one sent twice is answered as one.
var directClient = &http.Client{Transport: wranglerdev.Transport{}}

// wranglerDev is one `wrangler dev` of the Worker (the runtime): offline,
// on a free loopback port, --inspector-port 0 (two at once must not both
// take 9229), its state in persist, in a process group of its own.
type wranglerDev struct {
	*child.Server
	addr string // host:port
}

// startWrangler starts the runtime with extra arguments (--var, --env-file)
// and waits for its ready line (at most 5 min, a guard against a hang: a
// first start beside other suites on two loaded cores has taken over 90 s);
// its output goes to log.
func startWrangler(persist string, log *syncio.Buffer, extra ...string) (*wranglerDev, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "wasm/worker/build/app.wasm")); err != nil {
		return nil, errors.New("the worker is not built; run make worker")
	}
	cmd := child.Wrangler(filepath.Join(root, "node_modules/.bin/wrangler"), filepath.Join(root, "wasm/worker"), persist, extra...)
	s, err := child.Start(cmd, child.Options{Log: log, Timeout: 5 * time.Minute})
	if err != nil {
		return nil, err
	}
	return &wranglerDev{Server: s, addr: strings.TrimPrefix(s.URL, "http://")}, nil
}

// url is the runtime's base URL.
func (w *wranglerDev) url() string { return w.URL }

// stop ends the runtime's process group: SIGINT, then SIGKILL after 15 s.
func (w *wranglerDev) stop() { w.Stop() }
