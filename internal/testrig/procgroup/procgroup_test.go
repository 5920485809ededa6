//go:build unix

package procgroup

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// start runs script under sh in a process group of its own, and returns
// once it printed its first line (after setting up its traps).
func start(t *testing.T, script string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return cmd, exited
}

func TestStopInterruptsTheGroup(t *testing.T) {
	cmd, exited := start(t, "echo ready; exec sleep 60")
	Stop(cmd.Process.Pid, exited, time.Minute)
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("the process ended with %v; want SIGINT", cmd.ProcessState)
	}
}

func TestStopKillsWhatIgnoresTheInterrupt(t *testing.T) {
	cmd, exited := start(t, `trap "" INT; echo ready; while :; do sleep 0.01; done`)
	Stop(cmd.Process.Pid, exited, 200*time.Millisecond)
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the process ended with %v; want SIGKILL", cmd.ProcessState)
	}
}
