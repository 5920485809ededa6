//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lease-fence/lease-fence/gates/httpfence"
	"github.com/lease-fence/lease-fence/service/client"
)

// The environment a command run under a lease gets.
const (
	envResource = "LEASE_FENCE_RESOURCE"
	envHolder   = "LEASE_FENCE_HOLDER"
	envFence    = "LEASE_FENCE_FENCE"
	envHeader   = "LEASE_FENCE_HEADER"
)

// forwarded are the signals passed on to the command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// defaultKillAfter is --kill-after's default.
const defaultKillAfter = 10 * time.Second

const lockLine = "lock [--wait D] [--kill-after D] [--holder ID] [--renew-every D] [connection flags] RESOURCE -- CMD [ARGS...]"

// waitFlag is --wait: a duration, or "forever" (the default).
type waitFlag struct{ d time.Duration }

func (w *waitFlag) String() string {
	if w == nil || w.d == client.WaitForever {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		w.d = client.WaitForever
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return errors.New("a duration such as 30s, 0 (ask once) or forever")
	}
	w.d = d
	return nil
}

// holdFlags are what lock and elect share.
type holdFlags struct {
	holder     string
	killAfter  time.Duration
	renewEvery time.Duration
}

func addHoldFlags(fs *flag.FlagSet, h *holdFlags) {
	fs.StringVar(&h.holder, "holder", "", "the holder id (default HOSTNAME-PID); a token's holders patterns must match it")
	fs.DurationVar(&h.killAfter, "kill-after", defaultKillAfter, "when the lease is lost, how long after SIGTERM the command's process group gets SIGKILL")
	fs.DurationVar(&h.renewEvery, "renew-every", 0, "how often the lease is renewed (default a third of the coordinator's TTL)")
}

// client checks hf, names the holder (HOSTNAME-PID unless --holder says)
// and returns conn's client for it.
func (hf *holdFlags) client(getenv func(string) string, conn *connFlags) (*client.Client, error) {
	if hf.killAfter < 0 || hf.renewEvery < 0 {
		return nil, &usageError{"--kill-after and --renew-every must not be negative"}
	}
	if hf.holder == "" {
		hf.holder = defaultHolder()
	}
	return conn.client(getenv, hf.holder)
}

func (s *stdio) lock(ctx context.Context, args []string) int {
	fs := s.newFlags("lock", lockLine)
	wait := waitFlag{d: client.WaitForever}
	fs.Var(&wait, "wait", "how long to wait for the lease: a duration, 0 to ask once, or forever; then exit 75")
	var hf holdFlags
	addHoldFlags(fs, &hf)
	conn := addConnFlags(fs)
	ops, cmd, err := parse(fs, args, 1)
	if err != nil {
		return parseFailed(err)
	}
	switch {
	case len(ops) == 0:
		return s.fail(fs, &usageError{"lock needs a RESOURCE and a command"})
	case len(cmd) == 0:
		return s.fail(fs, &usageError{"lock needs a command to run: lease-fence lock RESOURCE -- CMD [ARGS...]"})
	}
	c, err := hf.client(s.getenv, conn)
	if err != nil {
		return s.fail(fs, err)
	}
	resource := ops[0]
	return s.holdAndRun(ctx, c, cmd, hf, func(ctx context.Context) (*client.Held, error) {
		h, err := c.Hold(ctx, resource, client.HoldOptions{Wait: wait.d, RenewEvery: hf.renewEvery})
		var de *client.DeniedError
		if errors.As(err, &de) {
			return nil, &notObtained{fmt.Sprintf("%q is held by %q: not obtained within --wait %v", resource, de.HeldBy, wait.String())}
		}
		if errors.Is(err, client.ErrLeaseRevoked) || errors.Is(err, client.ErrExpired) {
			// An operator removed the wait, or the wait ran out as the
			// grant expired.
			return nil, &notObtained{fmt.Sprintf("%q not obtained: %v", resource, err)}
		}
		return h, err
	})
}

// notObtained is a lease not obtained in time (or whose wait an operator
// ended): exit 75.
type notObtained struct{ msg string }

func (e *notObtained) Error() string { return e.msg }

// holdAndRun gets a lease with acquire, runs cmd while it is held, and
// returns the exit code: the command's status, or exitLost if the lease
// was lost (the command's process group then gets SIGTERM, and SIGKILL
// kill-after later). The signals that forwarded lists are caught from the
// start: while waiting for the lease they end the wait (exit 128+signal),
// while the command runs they are sent to its process group.
func (s *stdio) holdAndRun(ctx context.Context, c *client.Client, cmd []string, hf holdFlags, acquire func(context.Context) (*client.Held, error)) int {
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwarded...)
	defer signal.Stop(sigc)

	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	got := make(chan struct{})
	var h *client.Held
	var err error
	go func() {
		defer close(got)
		h, err = acquire(wctx)
	}()
	var stopped os.Signal
	for waiting := true; waiting; {
		select {
		case <-got:
			waiting = false
		case sig := <-sigc:
			if stopped == nil {
				stopped = sig
				cancel(errors.New("stopped by " + sig.String()))
			}
		}
	}
	if stopped != nil {
		if h != nil {
			_ = h.Release(context.WithoutCancel(ctx))
		}
		fmt.Fprintf(s.stderr, "lease-fence: %v while waiting for the lease\n", stopped)
		return 128 + int(stopped.(syscall.Signal))
	}
	if err != nil {
		var no *notObtained
		if errors.As(err, &no) {
			fmt.Fprintln(s.stderr, "lease-fence:", no.msg)
			return exitNotObtained
		}
		return s.fail(nil, err)
	}

	tok := h.Token()
	env := childEnv(os.Environ(), tok.Resource, tok.HolderID, tok.Fence)
	if v, herr := httpfence.FormatHeader(tok); herr == nil {
		env = append(env, envHeader+"="+v)
	} else {
		fmt.Fprintln(s.stderr, "lease-fence: no", envHeader, "for this token:", herr)
	}
	child := exec.Command(cmd[0], cmd[1:]...)
	child.Env = env
	child.Stdin, child.Stdout, child.Stderr = s.stdin, s.stdout, s.stderr
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		_ = h.Release(context.WithoutCancel(ctx))
		fmt.Fprintln(s.stderr, "lease-fence:", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNoCommand
		}
		return exitCannotRun
	}
	pgid := child.Process.Pid
	exited := make(chan struct{})
	go func() {
		_ = child.Wait()
		close(exited)
	}()

	lost := h.Context().Done()
	var killT <-chan time.Time
	var lostCause error
	for {
		select {
		case sig := <-sigc:
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
		case <-lost:
			lost = nil
			lostCause = context.Cause(h.Context())
			if !errors.Is(lostCause, client.ErrLeaseLost) {
				// ctx ended: not a loss. The command is ended as for one.
				lostCause = fmt.Errorf("stopped: %w", lostCause)
			}
			fmt.Fprintf(s.stderr, "lease-fence: %v; SIGTERM to the command's process group, SIGKILL after %v\n", lostCause, hf.killAfter)
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			t := time.NewTimer(hf.killAfter)
			defer t.Stop()
			killT = t.C
		case <-killT:
			killT = nil
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case <-exited:
			if lostCause == nil {
				if code, ended := s.endedWhileRunning(ctx, c, h); ended {
					return code
				}
				return status(child.ProcessState)
			}
			// What is left of the group still runs under a lost lease:
			// it gets the rest of --kill-after, then SIGKILL.
			if killT != nil && syscall.Kill(-pgid, 0) == nil {
				<-killT
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			return exitLost
		}
	}
}

// endedWhileRunning checks, once the command exited, that the lease was
// still held then: a renewal must succeed (else the lease ended at the
// coordinator while the command ran, revoked or lost between two
// renewals: exitLost). Then it releases the lease. ended is false when
// the command's status stands.
func (s *stdio) endedWhileRunning(ctx context.Context, c *client.Client, h *client.Held) (code int, ended bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalCheck)
	defer cancel()
	lost := h.Context().Err() != nil
	cause := context.Cause(h.Context())
	if !lost {
		if _, err := c.Renew(ctx, h.Lease()); errors.Is(err, client.ErrExpired) {
			lost, cause = true, err
		} else if err != nil {
			fmt.Fprintln(s.stderr, "lease-fence: the lease could not be checked after the command:", err)
		}
	}
	if err := h.Release(ctx); err != nil && !errors.Is(err, client.ErrLeaseLost) {
		fmt.Fprintln(s.stderr, "lease-fence: the release failed:", err)
	}
	if lost {
		fmt.Fprintln(s.stderr, "lease-fence: the lease ended before the command did:", cause)
		return exitLost, true
	}
	return 0, false
}

// finalCheck bounds the renewal and release after the command.
const finalCheck = 5 * time.Second

// childEnv is env without any LEASE_FENCE_* variable of a lease (an outer
// lock's), plus those of this one but the header.
func childEnv(env []string, resource, holder string, fenceN uint64) []string {
	out := make([]string, 0, len(env)+4)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case envResource, envHolder, envFence, envHeader:
			continue
		}
		out = append(out, kv)
	}
	return append(out, envResource+"="+resource, envHolder+"="+holder, envFence+"="+strconv.FormatUint(fenceN, 10))
}

// status is the exit code that reports ps: its exit status, or 128+N if
// signal N ended it.
func status(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
