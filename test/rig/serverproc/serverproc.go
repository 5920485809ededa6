//go:build linux

// Package serverproc starts a server program of this repository (the
// coordinator, fence-proxy) for a test or a benchmark: it prints
// "listening on URL" first and, given -debug-addr, "debug on URL" on its
// standard error.
package serverproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
)

// Server is a process started by Start, whose listening line was read.
type Server struct {
	Cmd *exec.Cmd
	// URL follows "listening on " in the first line of its standard output.
	URL string
	// Debug follows "debug on " on its standard error, if Start was asked
	// to wait for it.
	Debug string
}

// Start starts cmd, killed when this process dies unless cmd.SysProcAttr
// says otherwise, and reads the first line of its standard output. With
// debug it also waits for the "debug on URL" line on its standard error
// (cmd.Stderr must then be nil); otherwise the standard error goes to
// cmd.Stderr, or nowhere. The rest of the standard output is drained.
func Start(cmd *exec.Cmd, debug bool) (*Server, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var errp io.Reader
	if debug {
		if errp, err = cmd.StderrPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	dbg := make(chan string, 1)
	if debug {
		go func() {
			sc := bufio.NewScanner(errp)
			for sc.Scan() {
				if _, rest, ok := strings.Cut(sc.Text(), "debug on "); ok {
					select {
					case dbg <- strings.TrimSpace(rest):
					default:
					}
				}
			}
			close(dbg)
		}()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s printed no listening line: %w", cmd.Path, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	s := &Server{Cmd: cmd, URL: strings.TrimSpace(strings.TrimPrefix(line, "listening on "))}
	if debug {
		var ok bool
		if s.Debug, ok = <-dbg; !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, errors.New(cmd.Path + " printed no debug line")
		}
	}
	return s, nil
}
