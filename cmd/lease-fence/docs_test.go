//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/test/rig/docsession"
)

// The session of docs/cli.md, run as written in one bash against a fresh
// coordinator (the only change: 127.0.0.1:8787 becomes its address), with
// the built lease-fence first on PATH. Each command's output (stdout and
// stderr) must be the lines the page shows under it, durations and
// remainingMillis read as any number, runs of spaces as one.
func TestDocSession(t *testing.T) {
	t.Parallel()
	steps, err := docsession.Read("../../docs/cli.md", "cli-session")
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 8 {
		t.Fatalf("the session has %d commands", len(steps))
	}
	url := coordinator(t)
	host := strings.TrimPrefix(url, "http://")
	var script strings.Builder
	script.WriteString("exec 2>&1\n")
	for i, st := range steps {
		script.WriteString("echo @@" + strconv.Itoa(i) + "\n")
		script.WriteString(strings.ReplaceAll(st.Cmd, "127.0.0.1:8787", host) + "\n")
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bins.cli)+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the session failed: %v\n%s", err, out)
	}
	parts := regexp.MustCompile(`(?m)^@@\d+\n`).Split(string(out), -1)
	if len(parts) != len(steps)+1 {
		t.Fatalf("the session printed %d parts for %d commands:\n%s", len(parts)-1, len(steps), out)
	}
	for i, st := range steps {
		got, want := normalize(strings.TrimRight(parts[i+1], "\n")), normalize(strings.Join(st.Want, "\n"))
		if got != want {
			t.Errorf("$ %s\ngot:\n%s\nthe page shows:\n%s", st.Cmd, parts[i+1], strings.Join(st.Want, "\n"))
		}
	}
}

var (
	durationRE = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`)
	remainRE   = regexp.MustCompile(`"remainingMillis":[0-9.e+-]+`)
	spacesRE   = regexp.MustCompile(` {2,}`)
)

// normalize reads durations and remainingMillis as any number, and runs of
// spaces as one.
func normalize(s string) string {
	s = durationRE.ReplaceAllString(s, "D")
	s = remainRE.ReplaceAllString(s, `"remainingMillis":N`)
	return spacesRE.ReplaceAllString(s, " ")
}
