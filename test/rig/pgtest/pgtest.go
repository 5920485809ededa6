//go:build !js

// Package pgtest starts a throwaway PostgreSQL server for tests: initdb in a
// temporary directory, the server bound to 127.0.0.1 on a free port (and a
// Unix socket in that directory), run as a non-root user, stopped and removed
// by Stop. It uses the Debian package's binaries (/usr/lib/postgresql/*/bin,
// installed by scripts/setup.sh) and fails, never skips, when they are
// missing.
package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/lease-fence/lease-fence/test/rig/rigproc"
)

// Server is a running PostgreSQL server.
type Server struct {
	Dir  string // data directory and socket directory, removed by Stop
	Port int
	bin  string
	run  []string // prefix that runs a command as the server's user

	watchdog *rigproc.Watchdog // stops the server
	out      bytes.Buffer
	settings string       // the server's -o options, port included
	killed   bool         // Kill ended it: Stop only removes its directory
	dbs      atomic.Int64 // databases NewDatabase made
}

// Options tunes the server.
type Options struct {
	// Durable keeps fsync and synchronous_commit on (benchmarks); tests
	// turn them off to start and run faster.
	Durable bool
	// Settings are more of the server's settings, each "name=value".
	Settings []string
}

// Without Durable, fsync is off (the data lives in the operating system's
// cache, which a crash of the server does not lose) but synchronous_commit
// stays on: a commit that returned has its WAL written, so it survives
// Restart, which stops the server as a crash would.

// BinDir returns the directory of the newest installed PostgreSQL's
// binaries, or an error saying how to install them.
func BinDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", errors.New("pgtest: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); run scripts/setup.sh as root, or apt-get install postgresql")
	}
	sort.Slice(found, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(found[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(found[j])))
		return vi < vj
	})
	return found[len(found)-1], nil
}

// Start initializes and starts a server. The caller must call Stop.
func Start(opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as nobody, in a
		// directory nobody owns.
		u, err := user.Lookup("nobody")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: running as root and there is no user nobody to run postgres as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.run = []string{"runuser", "-u", "nobody", "--"}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.cmd("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	settings := []string{
		"-c listen_addresses=127.0.0.1",
		"-c unix_socket_directories=" + dir,
		"-c max_connections=100",
		"-c shared_buffers=32MB",
		"-c deadlock_timeout=50ms", // deadlock tests resolve quickly
	}
	for _, x := range opts.Settings {
		settings = append(settings, "-c "+x)
	}
	if !opts.Durable {
		settings = append(settings, "-c fsync=off", "-c full_page_writes=off")
	}
	var lastErr error
	for range 5 { // the free port may be taken before postgres binds it
		port, err := rigproc.FreePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		log, err := s.start(port, strings.Join(append(settings, "-p "+strconv.Itoa(port)), " "))
		if err == nil {
			return s, nil
		}
		if log == nil { // started, but not watched
			os.RemoveAll(dir)
			return nil, err
		}
		lastErr = fmt.Errorf("pgtest: pg_ctl start: %w", err)
		if !bytes.Contains(log, []byte("in use")) {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// Restart stops the server at once, as a crash would (pg_ctl stop -m
// immediate: the postmaster and every backend end without a checkpoint, and
// every client connection breaks), and starts it again on the same data
// directory and port. It returns once the server accepts connections again,
// having replayed its WAL: every commit that returned before is there.
func (s *Server) Restart() error {
	data := filepath.Join(s.Dir, "data")
	if out, err := s.cmd("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %v\n%s", err, out)
	}
	if out, err := s.cmd("pg_ctl", "-D", data, "-o", s.settings, "-l", filepath.Join(s.Dir, "log"), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
		return fmt.Errorf("pgtest: pg_ctl start after stop: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// start runs pg_ctl start on s's data directory with the options o (its
// port last, port), its log in s.Dir, and then the watchdog. On a failed
// start it returns the server's log, which the error quotes; a server that
// started but could not be watched is stopped again.
func (s *Server) start(port int, o string) (log []byte, err error) {
	data := filepath.Join(s.Dir, "data")
	out, err := s.cmd("pg_ctl", "-D", data, "-o", o, "-l", filepath.Join(s.Dir, "log"), "-w", "-t", "60", "start").CombinedOutput()
	if err != nil {
		log, _ = os.ReadFile(filepath.Join(s.Dir, "log"))
		return log, fmt.Errorf("%v\n%s\n%s", err, out, log)
	}
	s.Port, s.settings = port, o
	if err := s.watch(); err != nil {
		_, _ = s.cmd("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").CombinedOutput()
		return nil, err
	}
	return nil, nil
}

func (s *Server) cmd(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, s.run...), filepath.Join(s.bin, name)), args...)
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = s.Dir
	c.Env = append(os.Environ(), "LC_ALL=C")
	// Keep the server out of the test's process group, so a Ctrl-C to the
	// test does not kill it before Stop can.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// DSN returns a connection string for database db ("postgres" if empty),
// in the key=value form pgx and libpq accept.
func (s *Server) DSN(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", s.Port, db)
}

// URL returns the same as a postgres:// URL (for node's pg).
func (s *Server) URL(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// watch starts a small process that stops the server and removes its
// directory when the write end of a pipe held by this process closes: at
// Stop, or when this process ends in any other way (a panic, a test timeout,
// SIGKILL), so no server outlives the tests that started it.
func (s *Server) watch() error {
	script := `cat >/dev/null; "$@"; rc=$?; rm -rf "$PGTEST_DIR"; exit $rc`
	args := append([]string{script, "pgtest-watchdog"}, s.run...)
	args = append(args, filepath.Join(s.bin, "pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-m", "immediate", "-w", "stop")
	d, err := rigproc.StartWatchdog(&s.out, []string{"PGTEST_DIR=" + s.Dir, "LC_ALL=C"}, args...)
	if err != nil {
		return fmt.Errorf("pgtest: starting the watchdog: %w", err)
	}
	s.watchdog = d
	return nil
}

// Stop stops the server at once and removes its directory.
func (s *Server) Stop() error {
	if err := s.watchdog.Stop(); err != nil && !s.killed {
		return fmt.Errorf("pgtest: pg_ctl stop: %v\n%s", err, s.out.String())
	}
	return nil
}
