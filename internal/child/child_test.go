//go:build unix

package child

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartReadsTheURLsAndKillEndsTheGroup(t *testing.T) {
	// A server with a child of its own, which holds its output open: Done
	// is closed only once both have ended.
	script := `sleep 600 & echo "listening on http://127.0.0.1:1234"; echo "debug on http://127.0.0.1:5678/debug/memory" >&2; wait`
	s, err := Start(exec.Command("sh", "-c", script), Options{Debug: true, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != "http://127.0.0.1:1234" || s.Debug != "http://127.0.0.1:5678" {
		t.Fatalf("URL %q, Debug %q", s.URL, s.Debug)
	}
	s.Kill()
	<-s.Done()
}

func TestStopInterruptsAndRemovesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Start(exec.Command("sh", "-c", `echo "listening on http://127.0.0.1:1"; exec sleep 600`), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	<-s.Done()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the directory is still there: %v", err)
	}
}

func TestStartSaysWhatAServerThatExitedPrinted(t *testing.T) {
	_, err := Start(exec.Command("sh", "-c", "echo 'cannot open the state' >&2; exit 3"), Options{Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "cannot open the state") {
		t.Fatalf("Start = %v; want the server's last line", err)
	}
	if _, err := Start(exec.Command(filepath.Join(t.TempDir(), "missing")), Options{}); err == nil {
		t.Fatal("a missing program started")
	}
}
