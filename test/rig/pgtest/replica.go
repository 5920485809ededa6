//go:build !js

package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/lease-fence/lease-fence/test/rig/rigproc"
)

// StartStandby makes a streaming standby of s on this machine: a base
// backup of s (pg_basebackup -R, which writes primary_conninfo and
// standby.signal) in a new directory, started on a free port with s's
// settings. The caller must call Stop on it. Whether s waits for it before
// a commit returns is s's synchronous_standby_names.
func (s *Server) StartStandby() (*Server, error) { return s.StartStandbyVia("") }

// StartStandbyVia is StartStandby with the standby streaming from s through
// addr (host:port, a Proxy in front of s) instead of from s directly, so
// that a test can cut the replication link alone.
func (s *Server) StartStandbyVia(addr string) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgtest-standby")
	if err != nil {
		return nil, err
	}
	sb := &Server{Dir: dir, bin: s.bin, run: s.run}
	if len(s.run) > 0 {
		fi, err := os.Stat(s.Dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if err := os.Chown(dir, int(st.Uid), int(st.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := sb.cmd("pg_basebackup", "-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres",
		"-R", "-X", "stream", "-c", "fast", "--no-sync").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	if addr != "" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		// A later line of postgresql.auto.conf wins over the one -R wrote.
		line := "primary_conninfo = 'host=" + host + " port=" + port + " user=postgres application_name=standby'\n"
		f, err := os.OpenFile(filepath.Join(data, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(line)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: pointing the standby at %s: %w", addr, err)
		}
	}
	var kept []string
	for _, o := range strings.Split(s.settings, " -c ") {
		o = strings.TrimPrefix(o, "-c ")
		if strings.HasPrefix(o, "unix_socket_directories=") {
			o = "unix_socket_directories=" + dir
		}
		if i := strings.Index(o, " -p "); i >= 0 {
			o = o[:i] // the port is the last option
		}
		kept = append(kept, "-c "+o)
	}
	port, err := rigproc.FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if log, err := sb.start(port, strings.Join(append(kept, "-p "+strconv.Itoa(port)), " ")); err != nil {
		os.RemoveAll(dir)
		if log != nil {
			return nil, fmt.Errorf("pgtest: starting the standby: %w", err)
		}
		return nil, err
	}
	return sb, nil
}

// Promote makes a standby the primary (pg_ctl promote) and returns once it
// accepts writes.
func (s *Server) Promote() error {
	if out, err := s.cmd("pg_ctl", "-D", filepath.Join(s.Dir, "data"), "-w", "-t", "60", "promote").CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_ctl promote: %v\n%s", err, out)
	}
	return nil
}

// Pid returns the postmaster's process id.
func (s *Server) Pid() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
}

// Children returns the processes the postmaster started (backends, the WAL
// writer, a standby's WAL receiver), with their titles (ps's command line,
// such as "postgres: walreceiver streaming 0/3000148").
func (s *Server) Children() (map[int]string, error) {
	pid, err := s.Pid()
	if err != nil {
		return nil, err
	}
	return children(pid), nil
}

func children(parent int) map[int]string {
	out := map[int]string{}
	procs, _ := procfs.AllProcs()
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == parent { // else gone meanwhile
			args, _ := p.CmdLine()
			out[p.PID] = strings.TrimRight(strings.Join(args, " "), " ")
		}
	}
	return out
}

// Kill ends the server the way the loss of its host does: the postmaster
// is stopped (so it starts nothing more), then it and every process it
// started get SIGKILL; nothing is flushed or checkpointed and no client
// gets an answer. It returns once the postmaster is gone. The data
// directory stays until Stop.
func (s *Server) Kill() error {
	pid, err := s.Pid()
	if err != nil {
		return err
	}
	s.killed = true
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pgtest: stopping the postmaster: %w", err)
	}
	for child := range children(pid) {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(30 * time.Second); ; {
		// Gone, or a zombie (a daemon's parent may be a PID 1 that never reaps).
		if st, err := procStat(pid); err != nil || st.State == "Z" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postmaster %d did not die", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func procStat(pid int) (procfs.ProcStat, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, err
	}
	return p.Stat()
}
