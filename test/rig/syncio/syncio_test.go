package syncio

import (
	"strings"
	"sync"
	"testing"
)

// Writers at once: every write arrives whole, none is lost.
func TestBufferTakesConcurrentWritesWhole(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("0123456789\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if l != "0123456789" {
			t.Fatalf("a write was cut: %q", l)
		}
	}
}

func TestWriterPassesWritesOn(t *testing.T) {
	var sb strings.Builder
	w := &Writer{W: &sb}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				w.Write([]byte("ab\n"))
			}
		})
	}
	wg.Wait()
	if got := sb.String(); got != strings.Repeat("ab\n", 200) {
		t.Fatalf("got %d bytes, want 600 of whole writes", len(got))
	}
}
