//go:build !js

// Package rigproc holds what the server rigs (pgtest, redistest) and their
// commands (pgserver, redisserver) share: a watchdog that cleans up after a
// server however the process that started it ends, and the loop of a
// command that serves one server to tests in other languages.
package rigproc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
)

// Watchdog is a small shell process that runs its script once the write
// end of a pipe held by this process closes: at Stop, or when this process
// ends in any other way (a panic, a test timeout, SIGKILL), so no server
// outlives the tests that started it.
type Watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File
}

// StartWatchdog starts sh with args (the first is the script, which should
// begin by reading its standard input to the end), the environment with env
// added, and its output in out. It runs in a process group of its own, so a
// signal to the test's group does not end it first.
func StartWatchdog(out io.Writer, env []string, args ...string) (*Watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := exec.Command("sh", append([]string{"-c"}, args...)...)
	c.Stdin = r
	c.Stdout, c.Stderr = out, out
	c.Env = append(os.Environ(), env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = c.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &Watchdog{cmd: c, pipe: w}, nil
}

// Stop closes the pipe and waits for the script to end.
func (d *Watchdog) Stop() error {
	d.pipe.Close()
	return d.cmd.Wait()
}

// Serve prints url on one line, then reads commands from the standard
// input, one a line: with restart, "restart" calls it and prints
// "restarted" (or "restart failed"). When the standard input closes or the
// process gets SIGINT or SIGTERM, it calls stop and exits, with status 1
// if stop failed.
func Serve(url string, restart, stop func() error) {
	fmt.Println(url)
	done := make(chan struct{}, 2)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "restart" && restart != nil {
				if err := restart(); err != nil {
					fmt.Fprintln(os.Stderr, err)
					fmt.Println("restart failed")
					continue
				}
				fmt.Println("restarted")
			}
		}
		done <- struct{}{}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; done <- struct{}{} }()
	<-done
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// FreePort returns a port of 127.0.0.1 that was free a moment ago: a
// server started on it may find it taken, and should retry with another.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Main is the TestMain of a package whose tests share one server: it sets
// *srv to what start returns, runs the tests, stops the server and exits,
// with status 1 if the server fails to start or to stop.
func Main[S interface{ Stop() error }](m *testing.M, srv *S, start func() (S, error)) {
	var err error
	if *srv, err = start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := (*srv).Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}
