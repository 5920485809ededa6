//go:build e2e

package workere2e

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/lease-fence/lease-fence/internal/testrig/procgroup"
	"github.com/lease-fence/lease-fence/internal/testrig/syncio"
)

// wranglerDev is one `wrangler dev` of the Worker (the runtime): offline,
// on a free loopback port, --inspector-port 0 (two at once must not both
// take 9229), its state in persist, in a process group of its own.
type wranglerDev struct {
	cmd  *exec.Cmd
	addr string // host:port
	log  *syncio.Buffer
}

var readyLine = regexp.MustCompile(`Ready on http://(127\.0\.0\.1:\d+)`)

// startWrangler starts the runtime with extra arguments (--var, --env-file)
// and waits for its ready line (at most 90 s); its output goes to log.
func startWrangler(persist string, log *syncio.Buffer, extra ...string) (*wranglerDev, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "wasm/worker/build/app.wasm")); err != nil {
		return nil, errors.New("the worker is not built; run make worker")
	}
	args := append([]string{"dev", "--inspector-port", "0", "--ip", "127.0.0.1", "--port", "0", "--persist-to", persist,
		"--log-level", "info", "--show-interactive-dev-session=false"}, extra...)
	cmd := exec.Command(filepath.Join(root, "node_modules/.bin/wrangler"), args...)
	cmd.Dir = filepath.Join(root, "wasm/worker")
	cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CLOUDFLARE_CF_FETCH_ENABLED=false", "CI=1", "NO_COLOR=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &wranglerDev{cmd: cmd, log: log}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			log.Write([]byte(sc.Text() + "\n"))
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		close(found)
	}()
	select {
	case a, ok := <-found:
		if !ok {
			w.stop()
			return nil, errors.New("wrangler dev exited before it was ready")
		}
		w.addr = a
		return w, nil
	case <-time.After(90 * time.Second):
		w.stop()
		return nil, errors.New("wrangler dev was not ready after 90s")
	}
}

// url is the runtime's base URL.
func (w *wranglerDev) url() string { return "http://" + w.addr }

// stop ends the runtime's process group: SIGINT, then SIGKILL after 15 s.
func (w *wranglerDev) stop() {
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	procgroup.Stop(w.cmd.Process.Pid, done, 15*time.Second)
}
