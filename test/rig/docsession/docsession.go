// Package docsession reads the shell sessions that docs pages show between
// <!-- NAME:start --> and <!-- NAME:end --> markers, for the tests that run
// them verbatim, and checks that pages show Go examples as they are.
package docsession

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Step is one command of a session ("$ " stripped) and the lines the page
// shows under it.
type Step struct {
	Cmd  string
	Want []string
}

// Read returns the steps of the ```console block marked name in the page at
// path.
func Read(path, name string) ([]Step, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, block, ok := strings.Cut(string(doc), "<!-- "+name+":start -->\n```console\n")
	block, _, ok2 := strings.Cut(block, "```\n<!-- "+name+":end -->")
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s has no %s block", path, name)
	}
	var steps []Step
	for _, l := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		if c, isCmd := strings.CutPrefix(l, "$ "); isCmd {
			steps = append(steps, Step{Cmd: c})
		} else if len(steps) > 0 {
			steps[len(steps)-1].Want = append(steps[len(steps)-1].Want, l)
		}
	}
	return steps, nil
}

var goBlock = regexp.MustCompile(`(?ms)^(\t*)// doc:start ?(\S*)\n(.*?)^\t*// doc:end\n`)

// GoBlocks checks that the page at doc shows, as it is, each block of the Go
// file src between a "// doc:start [NAME]" line and a "// doc:end" line: its
// lines less the start line's indent, at the end of a fenced block. It
// returns the blocks' names ("" for one without), in order.
func GoBlocks(t testing.TB, src, doc string) []string {
	t.Helper()
	code, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range goBlock.FindAllStringSubmatch(string(code), -1) {
		indent, name, body := b[1], b[2], b[3]
		lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, indent)
		}
		if want := strings.Join(lines, "\n") + "\n```\n"; !strings.Contains(string(page), want) {
			t.Errorf("%s does not show block %q of %s as it is:\n%s", doc, name, src, want)
		}
		names = append(names, name)
	}
	return names
}
