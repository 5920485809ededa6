package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every mutation still applies to the current source: `make test` fails as
// soon as a change to core/ moves a pattern, instead of `make mutate`
// discovering it later.
func TestEveryMutationApplies(t *testing.T) {
	if err := os.Chdir(filepath.Join("..", "..")); err != nil {
		t.Fatal(err)
	}
	if _, err := check(mutations); err != nil {
		t.Fatal(err)
	}
	if len(mutations) < 20 {
		t.Fatalf("%d mutations; the suite is checked against at least 20", len(mutations))
	}
	names := map[string]bool{}
	for _, m := range mutations {
		if names[m.Name] {
			t.Errorf("two mutations named %s", m.Name)
		}
		names[m.Name] = true
		if m.Why == "" {
			t.Errorf("%s: no description", m.Name)
		}
		if _, ok := suites[m.Suite]; m.Suite != "" && !ok {
			t.Errorf("%s: no suite %q", m.Name, m.Suite)
		}
	}
}

// A pattern that is missing or occurs twice stops the run before anything is
// changed, naming the mutation.
func TestCheckRefusesMissingAndAmbiguousPatterns(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "x.go")
	if err := os.WriteFile(f, []byte("a := 1\nb := 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range []mutation{
		{Name: "missing", File: f, Old: "c := 1", New: "c := 2"},
		{Name: "twice", File: f, Old: " := 1", New: " := 2"},
		{Name: "same", File: f, Old: "a := 1", New: "a := 1"},
	} {
		_, err := check([]mutation{m})
		if err == nil || !strings.Contains(err.Error(), m.Name) {
			t.Errorf("%s: check = %v", m.Name, err)
		}
	}
	if b, _ := os.ReadFile(f); string(b) != "a := 1\nb := 1\n" {
		t.Fatalf("check changed the file: %q", b)
	}
}
