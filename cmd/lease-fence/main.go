// Command lease-fence is the command-line tool of lease-fence.
//
//	lease-fence token new NAME --resources P [--resources P...] [--holders P...] [--admin] [--max-leases N]
//
// prints a new random token (first line) and its tokens.json entry (second
// line), checked by the coordinator's own tokens-file parser. Usage errors
// exit 2.
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lease-fence/lease-fence/service/auth"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const usage = `usage: lease-fence token new NAME --resources P [--resources P...] [--holders P...] [--admin] [--max-leases N]
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type patterns []string

func (p *patterns) String() string     { return strings.Join(*p, ",") }
func (p *patterns) Set(s string) error { *p = append(*p, s); return nil }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "token" || args[1] != "new" {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	fs := flag.NewFlagSet("token new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var resources, holders patterns
	fs.Var(&resources, "resources", "a resource pattern the token may name (repeatable)")
	fs.Var(&holders, "holders", "a holder id pattern the token may use (repeatable; default NAME*)")
	admin := fs.Bool("admin", false, "the token may revoke leases of its resources")
	maxLeases := fs.Int("max-leases", 0, "the token's lease limit (0: the server's)")
	rest := args[2:]
	var name string
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return exitUsage
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() != 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if name == "" || len(resources) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	line, token, err := newToken(name, resources, holders, *admin, *maxLeases)
	if err != nil {
		fmt.Fprintln(stderr, "lease-fence:", err)
		return exitUsage
	}
	fmt.Fprintln(stdout, token)
	fmt.Fprintln(stdout, line)
	return exitOK
}

// newToken makes a random token and its tokens.json entry, refused as
// the coordinator would refuse it.
func newToken(name string, resources, holders []string, admin bool, maxLeases int) (entry, token string, err error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", err
	}
	token = hex.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(token))
	e := map[string]any{"name": name, "tokenSha256": hex.EncodeToString(sum[:]), "resources": resources}
	if len(holders) > 0 {
		e["holders"] = holders
	}
	if admin {
		e["admin"] = true
	}
	if maxLeases != 0 {
		e["maxLeases"] = maxLeases
	}
	b, err := json.Marshal(e)
	if err != nil {
		return "", "", err
	}
	if _, err := auth.Parse([]byte("[" + string(b) + "]")); err != nil {
		return "", "", err
	}
	return string(b), token, nil
}
