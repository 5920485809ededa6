//go:build !js && !wasip1

package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/test/rig/docsession"
)

// curlTimedOut is curl's exit status when --max-time ends it (the session
// reads the refusal stream, which stays open, for a second).
const curlTimedOut = 28

var refusalTime = regexp.MustCompile(`"at":[0-9]+`)

// The curl session of docs/fencing.md, run as written against a proxy on a
// free port (the only change: 127.0.0.1:8081 becomes that port) in front of
// an API that answers every write with 204. Each command's output must be
// the lines the page shows under it.
func TestDocSession(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is missing (scripts/setup.sh installs it): ", err)
	}
	steps, err := docsession.Read("../../docs/fencing.md", "fence-proxy-session")
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 5 {
		t.Fatalf("the session has %d commands", len(steps))
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer api.Close()
	s := start(t, "-upstream", api.URL, "-state", filepath.Join(t.TempDir(), "proxy.db"), "-init", "-quiet")
	host := strings.TrimPrefix(s.url, "http://")
	for _, st := range steps {
		if !strings.HasPrefix(st.Cmd, "curl ") {
			t.Fatalf("not a curl command: %s", st.Cmd)
		}
		cmd := exec.Command("bash", "-c", strings.ReplaceAll(st.Cmd, "127.0.0.1:8081", host))
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(curl)+":/usr/bin:/bin")
		out, err := cmd.Output()
		var exit *exec.ExitError
		if err != nil && !(strings.Contains(st.Cmd, "--max-time") && errors.As(err, &exit) && exit.ExitCode() == curlTimedOut) {
			t.Fatalf("%s: %v", st.Cmd, err)
		}
		// A refusal's time differs from the page's.
		got := refusalTime.ReplaceAllString(string(out), `"at":1767225600000`)
		if got, want := strings.TrimRight(got, "\n"), strings.Join(st.Want, "\n"); got != want {
			t.Errorf("%s\ngot:\n%s\nthe page shows:\n%s", st.Cmd, got, want)
		}
	}
}
