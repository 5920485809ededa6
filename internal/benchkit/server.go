package benchkit

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/lease-fence/lease-fence/internal/child"
)

// Server is a server process started by Start.
type Server = child.Server

// Start starts cmd in a process group of its own (child.Start), copying its
// output to log (nil: nowhere) and waiting for its URL and, with debug, its
// debug URL. Stop ends the group and removes the directory tmp ("" for
// none); so do Fatal, and SIGINT or SIGTERM to the program (a server in a
// group of its own does not get the terminal's ^C).
func Start(cmd *exec.Cmd, tmp string, log io.Writer, debug bool) (*Server, error) {
	onSignal.Do(func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() { Fatal(fmt.Errorf("%v", <-sig)) }()
	})
	s, err := child.Start(cmd, child.Options{Dir: tmp, Log: log, Debug: debug})
	if err != nil {
		return nil, err
	}
	atExit(s.Stop)
	return s, nil
}

var onSignal sync.Once

// Wrangler is the command of `wrangler dev` for the Worker of wasm/worker,
// its state in persist, with args added.
func Wrangler(wrangler, persist string, args ...string) (*exec.Cmd, error) {
	wr, err := filepath.Abs(wrangler)
	if err != nil {
		return nil, err
	}
	return child.Wrangler(wr, "wasm/worker", persist, args...), nil
}
