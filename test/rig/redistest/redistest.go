//go:build !js

// Package redistest starts a throwaway redis-server for tests: its data in a
// temporary directory, bound to 127.0.0.1 on a free port, with the AOF on
// and fsynced on every write (--appendonly yes --appendfsync always, no RDB
// snapshots), never the system's service. Kill stops it the hard way
// (SIGKILL, as a crash would) and Start again resumes from its AOF on the
// same port. It uses Debian's redis-server (installed by scripts/setup.sh)
// and fails, never skips, when it is missing.
package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/rigproc"
)

// Server is a redis-server this process started.
type Server struct {
	Dir  string // data directory, removed by Stop
	Port int
	bin  string
	args []string // added to every start (cluster mode)

	cmd      *exec.Cmd
	exited   chan struct{}
	watchdog *rigproc.Watchdog // kills the server and removes Dir
	out      bytes.Buffer
}

// Bin returns the path of redis-server, or an error saying how to install it.
func Bin() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redistest: redis-server is not installed; run scripts/setup.sh as root, or apt-get install redis-server")
	}
	return p, nil
}

// Start starts a server on a fresh directory and a free port. The caller
// must call Stop.
func Start() (*Server, error) { return start(nil) }

// StartWith is Start with more redis-server arguments, which override its
// own (--appendonly no, say).
func StartWith(args ...string) (*Server, error) { return start(args) }

func start(args []string) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin, args: args}
	if err := s.watch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for range 5 { // the free port may be taken before redis binds it
		if s.Port, err = freePort(slices.Contains(s.args, "--cluster-enabled")); err != nil {
			s.Stop()
			return nil, err
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	s.Stop()
	return nil, lastErr
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL returns "redis://127.0.0.1:port".
func (s *Server) URL() string { return "redis://" + s.Addr() }

func (s *Server) start() error {
	args := []string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--daemonize", "no", "--logfile", filepath.Join(s.Dir, "log"),
		"--unixsocket", "", "--protected-mode", "yes",
	}
	c := exec.Command(s.bin, append(args, s.args...)...)
	c.Dir = s.Dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "pid"), []byte(strconv.Itoa(c.Process.Pid)), 0o644); err != nil {
		_ = c.Process.Kill()
		_ = c.Wait()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = c.Wait(); close(exited) }()
	s.cmd, s.exited = c, exited
	// Wait until it answers PING (it reads its AOF first), or exits.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ping(s.Addr()) {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
			return fmt.Errorf("redistest: redis-server exited at start:\n%s", tail(log))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return errors.New("redistest: redis-server did not answer within 60 s")
		}
	}
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	return strings.HasPrefix(string(buf[:n]), "+PONG")
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (s *Server) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
	}
}

// Restart kills the server (SIGKILL) and starts it again on the same
// directory and port; it returns once the server answers, having replayed
// its AOF.
func (s *Server) Restart() error {
	s.kill()
	return s.start()
}

// watch starts a small process that kills the server and removes its
// directory when the write end of a pipe held by this process closes: at
// Stop, or when this process ends in any other way (a panic, a timeout,
// SIGKILL), so no server outlives the tests that started it.
func (s *Server) watch() error {
	script := `cat >/dev/null; [ -f "$D/pid" ] && kill -9 "$(cat "$D/pid")" 2>/dev/null; rm -rf "$D"; exit 0`
	d, err := rigproc.StartWatchdog(&s.out, []string{"D=" + s.Dir}, script, "redistest-watchdog")
	if err != nil {
		return fmt.Errorf("redistest: starting the watchdog: %w", err)
	}
	s.watchdog = d
	return nil
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() error {
	s.kill()
	if err := s.watchdog.Stop(); err != nil {
		return fmt.Errorf("redistest: stopping: %v\n%s", err, s.out.String())
	}
	return nil
}

// freePort returns a free port; with bus, one whose cluster bus port (port
// + 10000) is free too.
func freePort(bus bool) (int, error) {
	for range 50 {
		port, err := rigproc.FreePort()
		if err != nil || !bus {
			return port, err
		}
		if port+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			b.Close()
			return port, nil
		}
	}
	return 0, errors.New("redistest: no free port with a free cluster bus port")
}

// Cluster is a Redis Cluster of servers this process started, each a
// master owning a third (or so) of the hash slots, no replicas.
type Cluster struct {
	Servers []*Server
}

// Addrs returns the servers' "127.0.0.1:port" addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.Addr())
	}
	return out
}

// StartCluster starts n servers in cluster mode and joins them into one
// cluster with redis-cli --cluster create, returning once every slot is
// served (cluster_state:ok on every node). The caller must call Stop.
func StartCluster(n int) (*Cluster, error) {
	c := &Cluster{}
	for range n {
		s, err := start([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"})
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		c.Stop()
		return nil, errors.New("redistest: redis-cli is not installed (Debian's redis-tools, a dependency of redis-server)")
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, s := range c.Servers {
		for {
			out, _ := exec.Command(cli, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Stop()
				return nil, fmt.Errorf("redistest: the cluster is not ok after 60 s:\n%s", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c, nil
}

// Stop stops every server of the cluster and removes their directories.
func (c *Cluster) Stop() error {
	var errs []error
	for _, s := range c.Servers {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
