// Package child starts a server program in a process group of its own,
// waits for the URL it prints, and ends the group: a coordinator, a
// fence-proxy, or wrangler dev with the workerd it runs. cmd/devserver's
// live mode and the benchmark programs (through benchkit) use it.
package child

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Server is a process started by Start.
type Server struct {
	URL   string // after "listening on " or wrangler's "Ready on "
	Debug string // the scheme, host and port after "debug on ", if asked for
	Cmd   *exec.Cmd
	dir   string
	done  chan struct{}
	once  sync.Once

	mu   sync.Mutex
	last []string // its last lines of output, for an error
}

// Options configure Start.
type Options struct {
	Dir     string          // a directory Stop removes; "" for none
	Log     io.Writer       // receives each line of output, after its time; nil: none
	Debug   bool            // also wait for the "debug on URL" line
	Timeout time.Duration   // the longest wait for the URL; 0: 90 s
	Cancel  <-chan struct{} // closed: the wait ends, and the server is stopped
}

var (
	urlRe   = regexp.MustCompile(`(?:listening on|Ready on) (https?://127\.0\.0\.1:\d+)`)
	debugRe = regexp.MustCompile(`debug on (http://127\.0\.0\.1:\d+)`)
)

// Start starts cmd in a process group of its own and waits for the URL it
// prints on its standard output or error (and, with o.Debug, its debug
// URL). If it exits first, the error quotes its last lines; if it fails, the
// server is stopped and o.Dir removed.
func Start(cmd *exec.Cmd, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	ownGroup(cmd)
	out, err := cmd.StdoutPipe()
	var errp io.Reader
	if err == nil {
		errp, err = cmd.StderrPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		if o.Dir != "" {
			os.RemoveAll(o.Dir)
		}
		return nil, fmt.Errorf("cannot start %s: %w", filepath.Base(cmd.Path), err)
	}
	s := &Server{Cmd: cmd, dir: o.Dir, done: make(chan struct{})}
	found, dbg := make(chan string, 1), make(chan string, 1)
	var scanning sync.WaitGroup
	scan := func(r io.Reader) {
		defer scanning.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			s.mu.Lock()
			fmt.Fprintf(o.Log, "%s %s\n", time.Now().Format("15:04:05.000"), sc.Text())
			s.last = append(s.last[max(0, len(s.last)-9):], sc.Text())
			s.mu.Unlock()
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
	go scan(out)
	go scan(errp)
	go func() { scanning.Wait(); _ = cmd.Wait(); close(s.done) }()
	timeout := cmp.Or(o.Timeout, 90*time.Second)
	expired := time.After(timeout)
	wait := func(ch chan string) (string, error) {
		var err error
		select {
		case u := <-ch:
			return u, nil
		case <-s.done:
			err = fmt.Errorf("%s exited before it was ready: %s", filepath.Base(cmd.Path), s.output())
		case <-expired:
			err = fmt.Errorf("%s was not ready within %v: %s", filepath.Base(cmd.Path), timeout, s.output())
		case <-o.Cancel:
			err = errors.New("stopped")
		}
		s.Stop()
		return "", err
	}
	if s.URL, err = wait(found); err == nil && o.Debug {
		s.Debug, err = wait(dbg)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// output is the last lines the server printed.
func (s *Server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.last) == 0 {
		return "(no output)"
	}
	return strings.Join(s.last, "\n")
}

// Pid is the server's process id, and its process group's.
func (s *Server) Pid() int { return s.Cmd.Process.Pid }

// Done is closed once the server has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Kill ends the server's process group at once, as a crash would, and
// waits for it.
func (s *Server) Kill() {
	_ = signalGroup(s.Cmd.Process, os.Kill)
	<-s.done
}

// Stop ends the server's process group, once, whoever calls it: SIGINT,
// then SIGKILL if it has not exited within 15 s (and to what outlives it, as
// workerd may outlive wrangler by a moment); then removes its directory.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = signalGroup(s.Cmd.Process, os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
		}
		s.Kill()
		if s.dir != "" {
			os.RemoveAll(s.dir)
		}
	})
}

// Wrangler is the command of `wrangler dev` for the Worker in workerDir, on
// a free loopback port, offline, its state in persist, with args added
// (wrangler, if a path, must be absolute: it runs in workerDir).
func Wrangler(wrangler, workerDir, persist string, args ...string) *exec.Cmd {
	cmd := exec.Command(wrangler, append([]string{"dev", "--ip", "127.0.0.1", "--port", "0", "--inspector-port", "0", "--persist-to", persist,
		"--log-level", "info", "--show-interactive-dev-session=false"}, args...)...)
	cmd.Dir = workerDir
	cmd.Env = append(os.Environ(), "WRANGLER_SEND_METRICS=false", "CLOUDFLARE_CF_FETCH_ENABLED=false", "CI=1", "NO_COLOR=1")
	return cmd
}
