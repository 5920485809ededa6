// Package auth decides who may call the coordinator: bearer tokens listed
// in a tokens file, each with the resources and holder ids it may name
// (its scopes) and the leases and waiting calls it may hold at once (its
// limits).
//
// A tokens file is a JSON array of entries:
//
//	[{"name": "indexer", "tokenSha256": "<64 hex digits>",
//	  "resources": ["jobs/*", "deploy-slot"], "holders": ["indexer-*"],
//	  "maxLeases": 100, "maxWaiters": 20, "expires": "2027-06-30T00:00:00Z"}]
//
// The file holds only the SHA-256 of each token, never the token. A
// pattern is an exact name or a prefix ending in "*" ("*" alone matches
// everything). holders defaults to ["<name>*"], so a client cannot name
// another client's holder ids; maxLeases and maxWaiters default to the
// server's own limits; "metrics": true lets the token read /metrics;
// "expires" (RFC 3339, with a zone) is the instant from which the token is
// refused, as if it were not listed (absent: never); "admin": true lets the
// token revoke (POST /v1/revoke) the leases and waiters of the resources
// its "resources" patterns match, whatever their holder ids (its
// "holders" patterns do not apply to a revoke; without "admin", a revoke is
// 403 forbidden). The
// file is read strictly: an unknown or repeated member, a null, a wrong
// type, bad hex, a bad pattern, and two entries with the same name or the
// same token are refused with a message that names the entry (never the
// token or its hash).
//
// Guard is what a server uses: Middleware answers 401 to a request without
// a known token (or with one that expired) before its body is read, Authorize (a
// httpapi.HandlerOptions.Authorize) answers 403 to a call outside the token's
// scopes and tells the Service the caller and its limits, and Reload swaps
// the tokens file without touching the leases.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/lease-fence/lease-fence/service/wire"
)

// Token is one entry of a tokens file.
type Token struct {
	// Name names the token in logs, metrics and stored leases (their
	// owner): 1 to 64 bytes of letters, digits and ._:@-.
	Name string
	// Hash is the SHA-256 of the token.
	Hash [32]byte
	// Resources are the patterns of the resources the token may name.
	Resources []string
	// Holders are the patterns of the holder ids it may acquire, renew
	// and release for.
	Holders []string
	// MaxLeases and MaxWaiters are its limits; zero means the server's.
	MaxLeases, MaxWaiters int
	// Metrics lets the token read /metrics on the API listener.
	Metrics bool
	// Admin lets the token revoke leases and waiters of the resources its
	// Resources match (wire.OpRevoke).
	Admin bool
	// Expires is the instant from which the token is refused; zero means
	// never.
	Expires time.Time
}

// Expired reports whether t is refused at now: now is at or after
// t.Expires.
func (t *Token) Expired(now time.Time) bool {
	return !t.Expires.IsZero() && !now.Before(t.Expires)
}

// Set is a parsed tokens file. It is immutable.
type Set struct {
	tokens []Token
	byHash map[[32]byte]int // the index in tokens of each hash
}

// Limits of a tokens file.
const (
	MaxFileBytes = 1 << 20
	MaxNameBytes = 64
	// MaxTokenBytes bounds the token a request presents.
	MaxTokenBytes = 1024
)

// members are the members an entry may have.
var members = []string{"name", "tokenSha256", "resources", "holders", "maxLeases", "maxWaiters", "metrics", "expires", "admin"}

// Load reads and parses the tokens file at path.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: the tokens file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("auth: reading the tokens file %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("auth: the tokens file %s is larger than %d bytes", path, MaxFileBytes)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("auth: the tokens file %s: %w", path, err)
	}
	return s, nil
}

// Parse parses a tokens file (see the package doc), strictly.
func Parse(data []byte) (*Set, error) {
	var raw []map[string]jsontext.Value
	if err := json.Unmarshal(data, &raw, json.RejectUnknownMembers(true)); err != nil {
		return nil, errors.New("not a JSON array of objects: " + err.Error())
	}
	if len(raw) == 0 {
		return nil, errors.New("it lists no tokens: nobody could call the coordinator")
	}
	s := &Set{byHash: map[[32]byte]int{}}
	names := map[string]int{}
	hashes := s.byHash
	for i, m := range raw {
		t, err := parseEntry(m)
		at := "entry " + strconv.Itoa(i+1)
		if t.Name != "" {
			at += " (" + strconv.Quote(t.Name) + ")"
		}
		if err != nil {
			return nil, errors.New(at + ": " + err.Error())
		}
		if j, dup := names[t.Name]; dup {
			return nil, fmt.Errorf("%s: the name is also entry %d's", at, j+1)
		}
		if j, dup := hashes[t.Hash]; dup {
			return nil, fmt.Errorf("%s: the same tokenSha256 as entry %d (%q): a token must name one entry", at, j+1, s.tokens[j].Name)
		}
		names[t.Name], hashes[t.Hash] = i, i
		s.tokens = append(s.tokens, t)
	}
	return s, nil
}

func parseEntry(m map[string]jsontext.Value) (Token, error) {
	var t Token
	for k, v := range m {
		if !slices.Contains(members, k) {
			return t, fmt.Errorf("unknown member %q (an entry has %s)", k, strings.Join(members, ", "))
		}
		if v.Kind() == 'n' {
			return t, fmt.Errorf("member %q is null", k)
		}
	}
	for _, req := range []string{"name", "tokenSha256", "resources"} {
		if _, ok := m[req]; !ok {
			return t, fmt.Errorf("member %q is missing", req)
		}
	}
	if err := json.Unmarshal(m["name"], &t.Name); err != nil {
		return t, errors.New(`member "name" must be a string`)
	}
	if !validName(t.Name) {
		n := t.Name
		t.Name = ""
		return t, fmt.Errorf("name %s must be 1 to %d bytes of letters, digits and ._:@-", wire.QuoteShort(n), MaxNameBytes)
	}
	var hx string
	if err := json.Unmarshal(m["tokenSha256"], &hx); err != nil {
		return t, errors.New(`member "tokenSha256" must be a string`)
	}
	// The value is not repeated in the message: it is a token's hash.
	if b, err := hex.DecodeString(hx); err != nil || len(b) != 32 {
		return t, errors.New(`member "tokenSha256" must be 64 hexadecimal digits (the SHA-256 of the token, as sha256sum prints it)`)
	} else {
		copy(t.Hash[:], b)
	}
	var err error
	if t.Resources, err = patterns(m["resources"], "resources"); err != nil {
		return t, err
	}
	if v, ok := m["holders"]; ok {
		if t.Holders, err = patterns(v, "holders"); err != nil {
			return t, err
		}
	} else {
		t.Holders = []string{t.Name + "*"}
	}
	for _, f := range []struct {
		name string
		to   *int
	}{{"maxLeases", &t.MaxLeases}, {"maxWaiters", &t.MaxWaiters}} {
		v, ok := m[f.name]
		if !ok {
			continue
		}
		var n int64
		if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > 1<<31 {
			return t, fmt.Errorf("member %q must be a whole number from 1 to %d", f.name, 1<<31)
		}
		*f.to = int(n)
	}
	for _, f := range []struct {
		name string
		to   *bool
	}{{"metrics", &t.Metrics}, {"admin", &t.Admin}} {
		if v, ok := m[f.name]; ok {
			if err := json.Unmarshal(v, f.to); err != nil {
				return t, fmt.Errorf("member %q must be true or false", f.name)
			}
		}
	}
	if v, ok := m["expires"]; ok {
		var at string
		if err := json.Unmarshal(v, &at); err != nil {
			return t, errors.New(`member "expires" must be a string (RFC 3339, such as "2027-06-30T00:00:00Z")`)
		}
		// time.RFC3339 requires the zone (Z or ±hh:mm): an instant, not a
		// wall-clock time of some unnamed place.
		if t.Expires, err = time.Parse(time.RFC3339, at); err != nil {
			return t, fmt.Errorf(`member "expires" is %s, not an RFC 3339 instant with its zone (such as "2027-06-30T00:00:00Z")`, wire.QuoteShort(at))
		}
	}
	return t, nil
}

// patterns reads a non-empty array of patterns.
func patterns(v jsontext.Value, member string) ([]string, error) {
	var ps []string
	if err := json.Unmarshal(v, &ps); err != nil {
		return nil, fmt.Errorf("member %q must be an array of strings", member)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("member %q lists no pattern (use [\"*\"] for all)", member)
	}
	for _, p := range ps {
		switch {
		case p == "":
			return nil, fmt.Errorf("member %q has an empty pattern", member)
		case len(p) > wire.MaxStringBytes:
			return nil, fmt.Errorf("member %q has a pattern longer than %d bytes", member, wire.MaxStringBytes)
		case strings.Contains(p[:len(p)-1], "*"):
			return nil, fmt.Errorf("member %q has the pattern %s: a \"*\" may only end a pattern (a prefix)", member, wire.QuoteShort(p))
		}
	}
	return ps, nil
}

func validName(n string) bool {
	if n == "" || len(n) > MaxNameBytes {
		return false
	}
	for _, c := range []byte(n) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:@-", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// Tokens returns the entries, in the file's order.
func (s *Set) Tokens() []Token { return s.tokens }

// Authenticate returns the entry of token, or false. The token itself is
// never compared: it is hashed (SHA-256), and the hash is looked up among
// the entries' hashes, then compared with the entry's in constant time
// (crypto/subtle). The time a lookup takes can depend on the hash of the
// token presented, never on the token's bytes beyond it: at most, timing
// could tell a guesser how much of a guess's hash matches a stored hash,
// and a hash does not give its token (that is a preimage of SHA-256). So
// the cost is the same for a file of 1 entry or 10,000 (comparing with
// every entry in turn cost about 40 ns an entry: 5 µs a call at 100
// tokens, BenchmarkAuthenticate).
func (s *Set) Authenticate(token string) (*Token, bool) {
	h := sha256.Sum256([]byte(token))
	i, ok := s.byHash[h]
	if !ok || subtle.ConstantTimeCompare(h[:], s.tokens[i].Hash[:]) != 1 {
		return nil, false
	}
	return &s.tokens[i], true
}

// TokenSHA256 is the tokenSha256 member of token's entry in a tokens
// file: the SHA-256 of its bytes in hex, as sha256sum prints it, which
// Authenticate looks the token up by.
func TokenSHA256(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Match reports whether name matches pattern: an exact name, or a prefix
// ending in "*".
func Match(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if Match(p, name) {
			return true
		}
	}
	return false
}

// Sees reports whether t may see resource in a list or a watch: it
// matches one of t's resource patterns.
func (t *Token) Sees(resource string) bool { return matchAny(t.Resources, resource) }

// Allows returns nil if t may make call m (its resource, and for every
// call but an inspection and a revoke its holder id, within t's scopes; a
// revoke needs Admin), or the 403 refusal that says which is not.
func (t *Token) Allows(m *wire.Message) *wire.Error {
	if !matchAny(t.Resources, m.Request.Resource) {
		return wire.NewError(wire.CodeForbidden, "the token "+strconv.Quote(t.Name)+" may not name the resource "+wire.QuoteShort(m.Request.Resource))
	}
	if m.Op == wire.OpRevoke {
		if !t.Admin {
			return wire.NewError(wire.CodeForbidden, "the token "+strconv.Quote(t.Name)+" may not revoke: it is not an admin token (\"admin\": true in tokens.json)")
		}
		return nil
	}
	if m.Op != wire.OpInspect && !matchAny(t.Holders, m.Request.HolderID) {
		return wire.NewError(wire.CodeForbidden, "the token "+strconv.Quote(t.Name)+" may not act for the holder "+wire.QuoteShort(m.Request.HolderID))
	}
	return nil
}
