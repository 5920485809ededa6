//go:build unix

package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lease-fence/lease-fence/service/auth"
)

type patterns []string

func (p *patterns) String() string     { return strings.Join(*p, ",") }
func (p *patterns) Set(s string) error { *p = append(*p, s); return nil }

const tokenLine = "token new NAME --resources P [--resources P...] [--holders P...] [--admin] [--max-leases N]"

// tokenNew prints a new random token (first line) and its tokens.json
// entry (second line), checked by the coordinator's own tokens-file
// parser.
func (s *stdio) tokenNew(args []string) int {
	fs := s.newFlags("token new", tokenLine)
	var resources, holders patterns
	fs.Var(&resources, "resources", "a resource pattern the token may name (repeatable)")
	fs.Var(&holders, "holders", "a holder id pattern the token may use (repeatable; default NAME*)")
	admin := fs.Bool("admin", false, "the token may revoke leases of its resources")
	maxLeases := fs.Int("max-leases", 0, "the token's lease limit (0: the server's)")
	ops, cmd, err := parse(fs, args, 0)
	if err != nil {
		return parseFailed(err)
	}
	if len(ops) != 1 || len(cmd) > 0 || len(resources) == 0 {
		return s.fail(fs, &usageError{"token new needs one NAME and at least one --resources pattern"})
	}
	line, token, err := newToken(ops[0], resources, holders, *admin, *maxLeases)
	if err != nil {
		return s.fail(fs, &usageError{err.Error()})
	}
	fmt.Fprintln(s.stdout, token)
	fmt.Fprintln(s.stdout, line)
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
	e := map[string]any{"name": name, "tokenSha256": auth.TokenSHA256(token), "resources": resources}
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
	set, err := auth.Parse([]byte("[" + string(b) + "]"))
	if err != nil {
		return "", "", err
	}
	if _, ok := set.Authenticate(token); !ok {
		return "", "", errors.New("the coordinator would not accept the token its entry was made for")
	}
	return string(b), token, nil
}
