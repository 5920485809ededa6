//go:build !unix

package child

import (
	"os"
	"os/exec"
)

// ownGroup does nothing where there are no process groups.
func ownGroup(*exec.Cmd) {}

// signalGroup signals p alone where there are no process groups.
func signalGroup(p *os.Process, sig os.Signal) error {
	return p.Signal(sig)
}
