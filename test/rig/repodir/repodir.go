// Package repodir finds the module's root from a test's working directory,
// for tests that write under out/ (porcupine's drawings of a history that
// is not linearizable, say).
package repodir

import (
	"os"
	"path/filepath"
	"testing"
)

// Out is out/ at the module root, joined with elem (gitignored).
func Out(t testing.TB, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(append([]string{dir, "out"}, elem...)...)
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
