package serverproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// InProcess is a server's run function running in a goroutine of this
// process (a command's tests run its main this way), whose listening line
// was read.
type InProcess struct {
	// URL follows "listening on " in the first line run printed.
	URL    string
	cancel context.CancelFunc
	done   chan error
	closed bool
}

// StartInProcess runs run in a goroutine, with a context that Cancel and
// Close end and a pipe as its standard output, and reads the first line it
// prints there. If run ends without printing a line, the error says what
// run returned. The rest of its output is drained.
func StartInProcess(run func(ctx context.Context, stdout io.Writer) error) (*InProcess, error) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	p := &InProcess{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := run(ctx, pw)
		pw.CloseWithError(errors.New("the server returned"))
		p.done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		return nil, fmt.Errorf("no listening line: %v (the server returned %v)", err, <-p.done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	p.URL = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	return p, nil
}

// Cancel ends run's context, and so begins its shutdown, without waiting
// for it.
func (p *InProcess) Cancel() { p.cancel() }

// Close ends run's context, waits for run to return and returns its error;
// a second Close returns nil at once.
func (p *InProcess) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	p.cancel()
	return <-p.done
}
