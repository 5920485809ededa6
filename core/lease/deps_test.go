//go:build !js

package lease_test

import (
	"go/build"
	"testing"
)

// The core packages are compiled into a size-limited wasm module: neither
// they nor anything they import, directly or not, may pull in fmt or
// encoding/json (about 340 KB gzipped between them).
func TestCoreAvoidsFmtAndJSON(t *testing.T) {
	banned := map[string]bool{"fmt": true, "encoding/json": true}
	seen := map[string]bool{}
	var walk func(path, dir string, chain []string)
	walk = func(path, dir string, chain []string) {
		if seen[path] || path == "C" || path == "unsafe" {
			return
		}
		seen[path] = true
		if banned[path] {
			t.Errorf("%v imports %s", chain, path)
			return
		}
		pkg, err := build.Import(path, dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			walk(imp, pkg.Dir, append(chain[:len(chain):len(chain)], path))
		}
	}
	for _, p := range []string{"clock", "fence", "lease", "naive"} {
		walk("github.com/lease-fence/lease-fence/core/"+p, ".", nil)
	}
	if !seen["strconv"] || !seen["github.com/lease-fence/lease-fence/core/clock"] {
		t.Fatal("the walk did not reach the packages it should have")
	}
}
