// Package sqltext reads a file of named SQL statements, the one source of
// the SQL that Go (and, through generated files, JavaScript) sends.
package sqltext

import "strings"

// Parse splits src at its "-- name: NAME" lines: each statement runs to
// the next one, without its leading comment lines and without the comment
// and blank lines at its end.
func Parse(src string) map[string]string {
	out := map[string]string{}
	name := ""
	var body []string
	skip := func(line string) bool { return strings.TrimSpace(line) == "" || strings.HasPrefix(line, "--") }
	flush := func() {
		for len(body) > 0 && skip(body[0]) {
			body = body[1:]
		}
		for len(body) > 0 && skip(body[len(body)-1]) {
			body = body[:len(body)-1]
		}
		if name != "" {
			out[name] = strings.Join(body, "\n")
		}
	}
	for _, line := range strings.Split(src, "\n") {
		if n, ok := strings.CutPrefix(line, "-- name: "); ok {
			flush()
			name, body = strings.TrimSpace(n), nil
			continue
		}
		body = append(body, line)
	}
	flush()
	return out
}
