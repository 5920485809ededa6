//go:build unix

package benchkit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lease-fence/lease-fence/internal/testrig/procgroup"
)

// Server is a server process started by Start: a coordinator, fence-proxy
// or wrangler dev with its workerd.
type Server struct {
	URL   string // after "listening on " or wrangler's "Ready on "
	Debug string // the scheme, host and port after "debug on ", if Start waited for it
	Cmd   *exec.Cmd
	tmp   string
	done  chan struct{}
	once  sync.Once
}

var (
	urlRe   = regexp.MustCompile(`(?:listening on|Ready on) (https?://127\.0\.0\.1:\d+)`)
	debugRe = regexp.MustCompile(`debug on (http://127\.0\.0\.1:\d+)`)
)

// Start starts cmd in a process group of its own, copies the lines of its
// standard output and error to log (with the time of each; nil discards
// them), and waits up to 90 s for its URL and, with debug, its debug URL.
// Stop (also run by Fatal) ends the group and removes the directory tmp
// ("" for none).
func Start(cmd *exec.Cmd, tmp string, log io.Writer, debug bool) (*Server, error) {
	if log == nil {
		log = io.Discard
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Cmd: cmd, tmp: tmp, done: make(chan struct{})}
	AtExit(s.Stop)
	var logMu sync.Mutex
	var last []string // its last lines, for an error
	found, dbg := make(chan string, 1), make(chan string, 1)
	var scanning sync.WaitGroup
	scan := func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			logMu.Lock()
			fmt.Fprintf(log, "%s %s\n", time.Now().Format("15:04:05.000"), sc.Text())
			last = append(last[max(0, len(last)-9):], sc.Text())
			logMu.Unlock()
			for re, ch := range map[*regexp.Regexp]chan string{urlRe: found, debugRe: dbg} {
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					select {
					case ch <- m[1]:
					default:
					}
				}
			}
		}
	}
	scanning.Add(2)
	go func() { defer scanning.Done(); scan(out) }()
	go func() { defer scanning.Done(); scan(errp) }()
	go func() { scanning.Wait(); _ = cmd.Wait(); close(s.done) }()
	timeout := time.After(90 * time.Second)
	wait := func(ch chan string) (string, error) {
		select {
		case u := <-ch:
			return u, nil
		case <-s.done:
			return "", fmt.Errorf("%s exited before it was ready: %s", filepath.Base(cmd.Path), strings.Join(last, "\n"))
		case <-timeout:
			s.Stop()
			return "", errors.New(filepath.Base(cmd.Path) + " not ready after 90s")
		}
	}
	if s.URL, err = wait(found); err == nil && debug {
		s.Debug, err = wait(dbg)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Pid is the server's process id, and its process group's.
func (s *Server) Pid() int { return s.Cmd.Process.Pid }

// Kill ends the server's process group at once, as a crash would, and
// waits for it.
func (s *Server) Kill() {
	_ = syscall.Kill(-s.Pid(), syscall.SIGKILL)
	<-s.done
}

// Stop ends the server's process group (SIGINT, then SIGKILL after 15 s)
// and removes its directory, once, whoever calls it.
func (s *Server) Stop() {
	s.once.Do(func() {
		procgroup.Stop(s.Cmd.Process.Pid, s.done, 15*time.Second)
		if s.tmp != "" {
			os.RemoveAll(s.tmp)
		}
	})
}

// Wrangler is the command of `wrangler dev` for the Worker of
// wasm/worker, on a free loopback port, its state in persist, with args
// added.
func Wrangler(wrangler, persist string, args ...string) (*exec.Cmd, error) {
	wr, err := filepath.Abs(wrangler)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(wr, append([]string{"dev", "--ip", "127.0.0.1", "--port", "0", "--inspector-port", "0", "--persist-to", persist,
		"--log-level", "info", "--show-interactive-dev-session=false"}, args...)...)
	cmd.Dir = "wasm/worker"
	cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CLOUDFLARE_CF_FETCH_ENABLED=false", "CI=1", "NO_COLOR=1")
	return cmd, nil
}

// StopOnSignal makes SIGINT and SIGTERM end the program through Fatal, so
// that the servers started are stopped.
func StopOnSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { Fatal(fmt.Errorf("%v", <-sig)) }()
}
