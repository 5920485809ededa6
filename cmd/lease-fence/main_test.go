//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/argerr"
	"github.com/lease-fence/lease-fence/service/wire"
)

// runIn runs the command line in this process with env as its whole
// environment.
func runIn(args []string, env map[string]string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestTokenNew(t *testing.T) {
	code, out, errs := runIn([]string{"token", "new", "indexer", "--resources", "jobs/*", "--admin"}, nil)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", out)
	}
	var e struct {
		Name        string   `json:"name"`
		TokenSha256 string   `json:"tokenSha256"`
		Resources   []string `json:"resources"`
		Admin       bool     `json:"admin"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(lines[0]))
	if e.Name != "indexer" || e.TokenSha256 != hex.EncodeToString(sum[:]) || !e.Admin || len(e.Resources) != 1 || e.Resources[0] != "jobs/*" {
		t.Fatalf("bad entry %+v for token %q", e, lines[0])
	}
}

// Usage errors exit 2, print nothing on stdout, and say why on stderr.
func TestUsageExit2(t *testing.T) {
	url := map[string]string{envURL: "http://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		says string
	}{
		{nil, nil, "usage: lease-fence COMMAND"},
		{[]string{"nope"}, nil, `unknown command "nope"`},
		{[]string{"token"}, nil, `unknown command "token"`},
		{[]string{"token", "new"}, nil, "one NAME"},
		{[]string{"token", "new", "x"}, nil, "--resources"},
		{[]string{"token", "new", "x", "--resources", "a", "--bogus"}, nil, "flag provided but not defined: -bogus"},
		{[]string{"token", "new", "x", "--resources", "bad*pattern*"}, nil, "resources"},
		{[]string{"lock"}, url, "lock needs a RESOURCE"},
		{[]string{"lock", "r"}, url, "lock needs a command"},
		{[]string{"lock", "r", "--"}, url, "lock needs a command"},
		{[]string{"lock", "--bogus", "r", "--", "true"}, url, "flag provided but not defined: -bogus"},
		{[]string{"lock", "--wait", "soon", "r", "--", "true"}, url, "invalid value"},
		{[]string{"lock", "--kill-after", "-1s", "r", "--", "true"}, url, "must not be negative"},
		{[]string{"lock", "r", "--", "true"}, nil, "no coordinator URL: set LEASE_FENCE_URL or pass --url"},
		{[]string{"lock", "r", "--", "true"}, map[string]string{envURL: "localhost:8787"}, "has no scheme"},
		{[]string{"ls", "--token-file", "/nonexistent/token"}, url, "the token file (--token-file) cannot be read: open /nonexistent/token"},
		{[]string{"ls"}, map[string]string{envURL: "http://127.0.0.1:1", envTokenFile: "/nonexistent/t"}, "the token file (LEASE_FENCE_TOKEN_FILE) cannot be read"},
		{[]string{"ls", "--ca", "/nonexistent/ca.pem"}, url, "the CA file (--ca) cannot be read"},
		{[]string{"ls", "--cert", "c.pem"}, url, "--cert and --key go together"},
		{[]string{"ls", "a", "b"}, url, "at most one PREFIX"},
		{[]string{"ls", "--waiters=maybe"}, url, "invalid boolean value"},
		{[]string{"inspect"}, url, "inspect needs one RESOURCE"},
		{[]string{"watch", "a", "b"}, url, "at most one PREFIX"},
		{[]string{"revoke"}, url, "revoke needs one RESOURCE"},
		{[]string{"revoke", "r", "--fence", "x"}, url, "invalid value"},
		{[]string{"elect"}, url, "elect needs one NAME"},
		{[]string{"elect", "--observe", "--value", "v", "e"}, url, "--observe does not campaign"},
	} {
		code, out, errs := runIn(c.args, c.env)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", c.args, code, exitUsage, errs)
		}
		if out != "" {
			t.Errorf("%q: stdout %q", c.args, out)
		}
		if !strings.Contains(errs, c.says) {
			t.Errorf("%q: stderr %q does not say %q", c.args, errs, c.says)
		}
	}
}

// A token file that is empty or holds two words is refused, naming it.
func TestTokenFileShape(t *testing.T) {
	dir := t.TempDir()
	for _, body := range []string{"", "\n", "one two\n"} {
		p := filepath.Join(dir, "t")
		writeFile(t, p, body)
		code, _, errs := runIn([]string{"ls"}, map[string]string{envURL: "http://127.0.0.1:1", envTokenFile: p})
		if code != exitUsage || !strings.Contains(errs, "must hold one token on one line") || !strings.Contains(errs, p) {
			t.Errorf("token file %q: exit %d, stderr %q", body, code, errs)
		}
	}
}

// Operands and flags mix; "--" and, for lock, the first operand after the
// resource start the command.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		args     []string
		stopAt   int
		ops, cmd string
		waiters  bool
	}{
		{[]string{"jobs/", "--waiters"}, 0, "jobs/", "", true},
		{[]string{"--waiters", "jobs/"}, 0, "jobs/", "", true},
		{[]string{"r", "--", "echo", "-n", "hi"}, 1, "r", "echo -n hi", false},
		{[]string{"r", "--waiters", "--", "echo"}, 1, "r", "echo", true},
		{[]string{"r", "echo", "--waiters"}, 1, "r", "echo --waiters", false},
		{[]string{"e", "--", "x"}, 0, "e", "x", false},
	} {
		s := &stdio{stderr: &bytes.Buffer{}}
		fs := s.newFlags("t", "t")
		w := fs.Bool("waiters", false, "")
		ops, cmd, err := parse(fs, c.args, c.stopAt)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if strings.Join(ops, " ") != c.ops || strings.Join(cmd, " ") != c.cmd || *w != c.waiters {
			t.Errorf("%q: operands %q, command %q, waiters %v; want %q, %q, %v", c.args, ops, cmd, *w, c.ops, c.cmd, c.waiters)
		}
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The exit code of each kind of failure.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{&wire.Error{Status: 409, Code: wire.CodeNotHeld}, exitError},
		{&wire.Error{Status: 400, Code: wire.CodeInvalidValue}, exitError},
		{&wire.Error{Status: 501, Code: wire.CodeNotSupported}, exitError},
		{&wire.Error{Status: 401, Code: wire.CodeUnauthorized}, exitConn},
		{&wire.Error{Status: 403, Code: wire.CodeForbidden}, exitConn},
		{&wire.Error{Status: 503, Code: wire.CodeUnavailable}, exitConn},
		{fmt.Errorf("wrapped: %w", &wire.Error{Status: 503, Code: wire.CodeUnavailable}), exitConn},
		{argerr.New("lease", "resource", "must not be empty"), exitUsage},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), exitConn},
	} {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.code)
		}
	}
}
