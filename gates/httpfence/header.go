package httpfence

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dunglas/httpsfv"

	"github.com/lease-fence/lease-fence/core/fence"
)

// The headers of the protocol.
const (
	// Header carries the token a write is made under, as a structured-field
	// dictionary (RFC 8941, RFC 9651):
	//
	//	Lease-Fence: resource="deploy-slot", holder="agent-a", fence=7
	Header = "Lease-Fence"
	// FloorHeader is set on every answer to a write the proxy admitted, and
	// on its refusals: the resource's floor after the check.
	FloorHeader = "Lease-Fence-Floor"
	// ErrorHeader is set on the answers the proxy makes itself instead of
	// forwarding (a refusal, a malformed header, an upstream failure), to
	// the code of its JSON error; it is removed from upstream answers. It
	// tells a 409 from the proxy apart from a 409 from the upstream.
	ErrorHeader = "Lease-Fence-Error"
)

// MaxHeaderBytes is the longest Lease-Fence value accepted: room for a
// resource and a holder of fence.MaxIDBytes each, every byte percent-encoded
// in a display string, with the keys and the fence.
const MaxHeaderBytes = 8 << 10

// MaxHeaderFence is the highest fence the header can carry: an RFC 8941
// integer has at most 15 digits. It is below fence.MaxFence (2^53-1), so a
// token between the two cannot be sent through the proxy (FormatHeader
// refuses it); a coordinator reaches it after 10^15 grants.
const MaxHeaderFence uint64 = 999_999_999_999_999

// ErrNoHeader is returned by ParseHeader when the request has no Lease-Fence
// header. The proxy answers a write without one with 428.
var ErrNoHeader = errors.New("httpfence: the request has no " + Header + " header")

func headerError(reason string) error {
	return &fence.ArgumentError{Pkg: "httpfence", Arg: Header + " header", Reason: reason}
}

// FormatHeader returns the Lease-Fence value for tok. Resource and holder
// are written as RFC 8941 strings when they are printable ASCII, and as
// RFC 9651 display strings (percent-encoded UTF-8) otherwise. It refuses an
// invalid token (fence.Token.Validate), an id that is not UTF-8, and a fence
// above MaxHeaderFence, with a *fence.ArgumentError.
func FormatHeader(tok fence.Token) (string, error) {
	if err := tok.Validate(); err != nil {
		return "", err
	}
	if tok.Fence > MaxHeaderFence {
		return "", &fence.ArgumentError{Pkg: "httpfence", Arg: "token.fence", Reason: "must be at most " + strconv.FormatUint(MaxHeaderFence, 10) + " to be sent in a header (RFC 8941 integers have 15 digits)"}
	}
	b := make([]byte, 0, 40+len(tok.Resource)+len(tok.HolderID))
	b = append(b, "resource="...)
	var ok bool
	if b, ok = appendID(b, tok.Resource); !ok {
		return "", &fence.ArgumentError{Pkg: "httpfence", Arg: "token.resource", Reason: "must be UTF-8"}
	}
	b = append(b, ", holder="...)
	if b, ok = appendID(b, tok.HolderID); !ok {
		return "", &fence.ArgumentError{Pkg: "httpfence", Arg: "token.holderId", Reason: "must be UTF-8"}
	}
	b = append(b, ", fence="...)
	b = strconv.AppendUint(b, tok.Fence, 10)
	return string(b), nil
}

// appendID appends s as an sf-string if it is printable ASCII, else as a
// display string; it reports false if s is not UTF-8. (httpsfv.Marshal
// writes the same bytes; writing them here saves its allocations on every
// request the Transport sends.)
func appendID(b []byte, s string) ([]byte, bool) {
	printable := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			printable = false
			break
		}
	}
	if printable {
		b = append(b, '"')
		for i := 0; i < len(s); i++ {
			if s[i] == '"' || s[i] == '\\' {
				b = append(b, '\\')
			}
			b = append(b, s[i])
		}
		return append(b, '"'), true
	}
	if !utf8.ValidString(s) {
		return b, false
	}
	const hex = "0123456789abcdef"
	b = append(b, '%', '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' || c == '"' {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return append(b, '"'), true
}

// ParseHeader reads the token of a request from its Lease-Fence header:
// ErrNoHeader when there is none, a *fence.ArgumentError when it is
// malformed. The value is parsed as an RFC 9651 dictionary by
// github.com/dunglas/httpsfv, then held to this protocol's shape: exactly
// the keys resource, holder and fence, each once and without parameters;
// resource and holder strings (or display strings), fence an integer; and a
// valid token (fence.Token.Validate: non-empty ids of at most
// fence.MaxIDBytes, a fence of at least 1). The header may appear once: two
// lines are refused rather than combined.
func ParseHeader(h http.Header) (fence.Token, error) {
	vals := h.Values(Header)
	switch {
	case len(vals) == 0:
		return fence.Token{}, ErrNoHeader
	case len(vals) > 1:
		return fence.Token{}, headerError("appears " + strconv.Itoa(len(vals)) + " times; send it once")
	}
	return ParseHeaderValue(vals[0])
}

// ParseHeaderValue parses one Lease-Fence value; see ParseHeader. On an
// error the token is the zero Token.
func ParseHeaderValue(v string) (fence.Token, error) {
	tok, err := parseValue(v)
	if err != nil {
		return fence.Token{}, err
	}
	return tok, nil
}

func parseValue(v string) (fence.Token, error) {
	if tok, ok := parseCanonical(v); ok {
		return tok, nil
	}
	return parseDictionary(v)
}

// parseCanonical reads v if it is, byte for byte, what FormatHeader writes
// for a valid token whose ids are printable ASCII without '"' or '\':
//
//	resource="deploy-slot", holder="agent-a", fence=7
//
// Such a value is an RFC 8941 dictionary that parseDictionary reads as the
// same token (FuzzParseHeader compares the two); reading it here saves the
// general parser's allocations on every write the proxy receives. Any
// other value, valid or not, is left to parseDictionary (ok false).
func parseCanonical(v string) (tok fence.Token, ok bool) {
	rest, ok := strings.CutPrefix(v, `resource="`)
	if !ok || len(v) > MaxHeaderBytes {
		return tok, false
	}
	if tok.Resource, rest, ok = cutPlainString(rest); !ok {
		return tok, false
	}
	if rest, ok = strings.CutPrefix(rest, `, holder="`); !ok {
		return tok, false
	}
	if tok.HolderID, rest, ok = cutPlainString(rest); !ok {
		return tok, false
	}
	if rest, ok = strings.CutPrefix(rest, `, fence=`); !ok || len(rest) == 0 || len(rest) > 15 || rest[0] == '0' {
		return tok, false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return tok, false
		}
		tok.Fence = tok.Fence*10 + uint64(rest[i]-'0')
	}
	if tok.Validate() != nil {
		return fence.Token{}, false
	}
	return tok, true
}

// cutPlainString splits s at the first '"', if the bytes before it are all
// printable ASCII other than '\' (an sf-string's characters that need no
// escape).
func cutPlainString(s string) (str, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[:i], s[i+1:], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", "", false
		}
	}
	return "", "", false
}

// parseDictionary is parseValue for any value: httpsfv's dictionary, held
// to the protocol's shape.
func parseDictionary(v string) (fence.Token, error) {
	var tok fence.Token
	if len(v) > MaxHeaderBytes {
		return tok, headerError("is longer than " + strconv.Itoa(MaxHeaderBytes) + " bytes")
	}
	d, err := httpsfv.UnmarshalDictionary([]string{v})
	if errors.Is(err, httpsfv.ErrNumberOutOfRange) {
		return tok, headerError("has a number out of range: RFC 8941 integers have at most 15 digits, so a fence is at most " + strconv.FormatUint(MaxHeaderFence, 10))
	}
	if err != nil {
		return tok, headerError("is not a structured-field dictionary (RFC 8941): " + err.Error())
	}
	names := d.Names()
	if len(names) == 0 {
		return tok, headerError("is empty")
	}
	if n := topLevelMembers(v); n != len(names) {
		// The RFC lets a later member overwrite an earlier one of the same
		// name; here that is a client bug, or an attempt to smuggle a
		// second fence past something that reads the first.
		return tok, headerError("repeats a key")
	}
	var haveResource, haveHolder, haveFence bool
	for _, name := range names {
		m, _ := d.Get(name)
		item, ok := m.(httpsfv.Item)
		if !ok {
			return tok, headerError(name + " must be a single value, not an inner list")
		}
		if len(item.Params.Names()) > 0 {
			return tok, headerError(name + " must have no parameters")
		}
		switch name {
		case "resource", "holder":
			var s string
			switch x := item.Value.(type) {
			case string:
				s = x
			case httpsfv.DisplayString:
				s = string(x)
			default:
				return tok, headerError(name + ` must be a quoted string, e.g. ` + name + `="x"`)
			}
			if name == "resource" {
				tok.Resource, haveResource = s, true
			} else {
				tok.HolderID, haveHolder = s, true
			}
		case "fence":
			n, ok := item.Value.(int64)
			if !ok {
				return tok, headerError("fence must be an integer, e.g. fence=7")
			}
			if n < 1 {
				return tok, headerError("fence must be at least 1")
			}
			tok.Fence, haveFence = uint64(n), true
		default:
			return tok, headerError("has an unknown key " + strconv.Quote(name) + " (the keys are resource, holder and fence)")
		}
	}
	switch {
	case !haveResource:
		return tok, headerError("lacks resource")
	case !haveHolder:
		return tok, headerError("lacks holder")
	case !haveFence:
		return tok, headerError("lacks fence")
	}
	if err := tok.Validate(); err != nil {
		var ae *fence.ArgumentError
		if errors.As(err, &ae) {
			key := map[string]string{"token.resource": "resource", "token.holderId": "holder", "token.fence": "fence"}[ae.Arg]
			return fence.Token{}, headerError(key + " " + ae.Reason)
		}
		return fence.Token{}, err
	}
	return tok, nil
}

// topLevelMembers counts the members of v, a value httpsfv has accepted as
// a dictionary, by counting the commas outside strings and inner lists.
// This is not a parser: on a valid dictionary a comma separates members
// unless it is inside a string ("..." with \" and \\ escapes), a display
// string (%"..." without escapes) or an inner list ((...), whose members
// are separated by spaces); nothing else can contain one. FuzzParseHeader
// checks the count against parsing each counted piece on its own.
func topLevelMembers(v string) int {
	n, depth := 1, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			display := i > 0 && v[i-1] == '%'
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' && !display {
					i++
				}
			}
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		}
	}
	return n
}
