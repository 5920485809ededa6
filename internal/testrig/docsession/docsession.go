// Package docsession reads the shell sessions that docs pages show between
// <!-- NAME:start --> and <!-- NAME:end --> markers, for the tests that run
// them verbatim.
package docsession

import (
	"fmt"
	"os"
	"strings"
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
