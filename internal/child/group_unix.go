//go:build unix

package child

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that
// signalGroup reaches every process it starts (wrangler runs workerd).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group that p leads.
func signalGroup(p *os.Process, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return p.Signal(sig)
	}
	return syscall.Kill(-p.Pid, s)
}
