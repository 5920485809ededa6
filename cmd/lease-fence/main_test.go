package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

func TestTokenNew(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"token", "new", "indexer", "--resources", "jobs/*", "--admin"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", out.String())
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

func TestUsageExit2(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"token", "new"}, {"token", "new", "x"}, {"token", "new", "x", "--resources", "a", "--bogus"}, {"token", "new", "x", "--resources", "bad*pattern*"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
		if out.Len() != 0 {
			t.Errorf("%q: stdout %q", args, out.String())
		}
	}
}
