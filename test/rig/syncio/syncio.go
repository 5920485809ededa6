// Package syncio holds writers that goroutines share: the output of a
// child process read from two pipes, the sink of a logger.
package syncio

import (
	"bytes"
	"io"
	"sync"
)

// Writer passes each Write to W, one at a time.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

// Write implements io.Writer.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.W.Write(p)
}

// Buffer is a bytes.Buffer that may be written and read at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
