package wire

import (
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocErrorsTable: the table of docs/service.md's "### Errors" lists every
// error code with the status the coordinator answers it with, and no other.
func TestDocErrorsTable(t *testing.T) {
	page, err := os.ReadFile("../../docs/service.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n### Errors\n")
	if !ok {
		t.Fatal(`docs/service.md has no "### Errors" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	row := regexp.MustCompile("(?m)^\\| ([0-9]{3}) \\| `([a-z_]+)` \\|")
	doc := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		st, _ := strconv.Atoi(m[1])
		if _, dup := doc[m[2]]; dup {
			t.Errorf("%s is listed twice", m[2])
		}
		doc[m[2]] = st
	}
	if !maps.Equal(doc, codeStatus) {
		for code, st := range codeStatus {
			if doc[code] != st {
				t.Errorf("%s: the page says %d, the coordinator answers %d", code, doc[code], st)
			}
		}
		for code := range doc {
			if _, ok := codeStatus[code]; !ok {
				t.Errorf("%s: on the page, but no such code", code)
			}
		}
	}
}
