package httpfence_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
)

func TestParseHeaderAcceptsTheProtocolsShape(t *testing.T) {
	want := fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 7}
	for _, v := range []string{
		`resource="deploy-slot", holder="agent-a", fence=7`,
		`fence=7, holder="agent-a", resource="deploy-slot"`,
		`resource="deploy-slot",holder="agent-a",fence=7`,
		"  resource=\"deploy-slot\",\tholder=\"agent-a\" ,  fence=7  ",
		`resource=%"deploy-slot", holder=%"agent-a", fence=7`,
		`resource=%"deploy%2dslot", holder="agent-a", fence=007`,
	} {
		got, err := httpfence.ParseHeaderValue(v)
		if err != nil || got != want {
			t.Errorf("ParseHeaderValue(%q) = %+v, %v; want %+v", v, got, err, want)
		}
	}
	for _, c := range []struct {
		v    string
		want fence.Token
	}{
		{`resource="a \"quoted\" \\ name", holder="h", fence=1`, fence.Token{Resource: `a "quoted" \ name`, HolderID: "h", Fence: 1}},
		{`resource="r", holder=%"agent-%c3%bc", fence=999999999999999`, fence.Token{Resource: "r", HolderID: "agent-ü", Fence: httpfence.MaxHeaderFence}},
		{`resource="a,b", holder="(x y)", fence=2`, fence.Token{Resource: "a,b", HolderID: "(x y)", Fence: 2}},
		{`resource=%"a,%22b", holder="h", fence=3`, fence.Token{Resource: `a,"b`, HolderID: "h", Fence: 3}},
		{`resource=%"a\", holder="h", fence=4`, fence.Token{Resource: `a\`, HolderID: "h", Fence: 4}},
	} {
		got, err := httpfence.ParseHeaderValue(c.v)
		if err != nil || got != c.want {
			t.Errorf("ParseHeaderValue(%q) = %+v, %v; want %+v", c.v, got, err, c.want)
		}
	}
}

// hostile lists values a proxy must refuse, with a word its message has.
var hostile = []struct{ v, says string }{
	{``, "empty"},
	{`   `, "empty"},
	{`resource="r", holder="h", fence=7, fence=8`, "repeats a key"},
	{`fence=8, resource="r", holder="h", fence=7`, "repeats a key"},
	{`resource="r", resource="r", holder="h", fence=7`, "repeats a key"},
	{`resource="r", holder="h", fence=(7), fence=7`, "repeats a key"},
	{`resource="r", holder="h", fence=7, x=1`, `unknown key "x"`},
	{`resource="r", holder="h", fence=7, token="t"`, `unknown key "token"`},
	{`resource="r", holder="h", fence=7;x=1`, "no parameters"},
	{`resource="r";a, holder="h", fence=7`, "no parameters"},
	{`resource="r", holder="h", fence=(7)`, "inner list"},
	{`resource="r", holder="h", fence="7"`, "integer"},
	{`resource="r", holder="h", fence=7.0`, "integer"},
	{`resource="r", holder="h", fence`, "integer"},
	{`resource="r", holder="h", fence=?1`, "integer"},
	{`resource=deploy-slot, holder="h", fence=7`, "quoted string"},
	{`resource="r", holder=:YWdlbnQ=:, fence=7`, "quoted string"},
	{`resource="r", holder=7, fence=7`, "quoted string"},
	{`resource="r", holder="h", fence=-1`, "at least 1"},
	{`resource="r", holder="h", fence=-999999999999999`, "at least 1"},
	{`resource="r", holder="h", fence=0`, "at least 1"},
	{`resource="r", holder="h", fence=18446744073709551616`, "at most 15 digits"},
	{`resource="r", holder="h", fence=18446744073709551615`, "at most 15 digits"},
	{`resource="r", holder="h", fence=9007199254740991`, "at most 15 digits"},
	{`resource="r", holder="h", fence=1000000000000000`, "at most 15 digits"},
	{`resource="r", holder="h", fence=1e3`, "not a structured-field"},
	{`resource="r", holder="h", fence=0x7`, "not a structured-field"},
	{`resource="r", holder="h", fence=+7`, "not a structured-field"},
	{`resource="r", holder="h", fence=7,`, "not a structured-field"},
	{`resource="r" holder="h" fence=7`, "not a structured-field"},
	{`resource="r"; holder="h"; fence=7`, "no parameters"},
	{`Resource="r", holder="h", fence=7`, "not a structured-field"},
	{`resource='r', holder="h", fence=7`, "not a structured-field"},
	{`resource="r, holder="h", fence=7`, "not a structured-field"},
	{`resource="r\n", holder="h", fence=7`, "not a structured-field"},
	{"resource=\"r\x00\", holder=\"h\", fence=7", "not a structured-field"},
	{"resource=\"d\xc3\xa9ploy\", holder=\"h\", fence=7", "not a structured-field"},
	{`resource=%"%ff", holder="h", fence=7`, "not a structured-field"},
	{`resource=%"%C3%BC", holder="h", fence=7`, "not a structured-field"},
	{`resource="", holder="h", fence=7`, "resource must not be empty"},
	{`resource="r", holder="", fence=7`, "holder must not be empty"},
	{`holder="h", fence=7`, "lacks resource"},
	{`resource="r", fence=7`, "lacks holder"},
	{`resource="r", holder="h"`, "lacks fence"},
	{`resource="` + strings.Repeat("r", fence.MaxIDBytes+1) + `", holder="h", fence=7`, "at most 1024 bytes"},
	{`resource="r", holder="` + strings.Repeat("h", fence.MaxIDBytes+1) + `", fence=7`, "at most 1024 bytes"},
	{`resource="r", holder="h", fence=7, pad="` + strings.Repeat("x", httpfence.MaxHeaderBytes) + `"`, "longer than"},
}

func TestParseHeaderRefusesHostileValues(t *testing.T) {
	for _, c := range hostile {
		tok, err := httpfence.ParseHeaderValue(c.v)
		var ae *fence.ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("ParseHeaderValue(%.80q) = %+v, %v; want a *fence.ArgumentError", c.v, tok, err)
			continue
		}
		if !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), "httpfence: Lease-Fence header ") {
			t.Errorf("ParseHeaderValue(%.80q): %q does not say %q", c.v, err, c.says)
		}
		if tok != (fence.Token{}) {
			t.Errorf("ParseHeaderValue(%.80q) returned a token %+v with its error", c.v, tok)
		}
	}
}

func TestParseHeaderWantsExactlyOneLine(t *testing.T) {
	if _, err := httpfence.ParseHeader(http.Header{}); !errors.Is(err, httpfence.ErrNoHeader) {
		t.Errorf("no header: %v, want ErrNoHeader", err)
	}
	h := http.Header{}
	h.Add("Lease-Fence", `resource="r", holder="h", fence=7`)
	h.Add("Lease-Fence", `resource="r", holder="h", fence=7`)
	if _, err := httpfence.ParseHeader(h); err == nil || !strings.Contains(err.Error(), "appears 2 times") {
		t.Errorf("two lines: %v, want a refusal", err)
	}
	h = http.Header{"Lease-Fence": {`resource="r", holder="h", fence=7`}}
	if tok, err := httpfence.ParseHeader(h); err != nil || tok.Fence != 7 {
		t.Errorf("one line: %+v, %v", tok, err)
	}
}

func TestFormatHeader(t *testing.T) {
	for _, c := range []struct {
		tok  fence.Token
		want string
	}{
		{fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 7}, `resource="deploy-slot", holder="agent-a", fence=7`},
		{fence.Token{Resource: `a"b\c`, HolderID: "h", Fence: 1}, `resource="a\"b\\c", holder="h", fence=1`},
		{fence.Token{Resource: "r", HolderID: "agent-ü", Fence: httpfence.MaxHeaderFence}, `resource="r", holder=%"agent-%c3%bc", fence=999999999999999`},
		{fence.Token{Resource: "tab\there%", HolderID: "h", Fence: 2}, `resource=%"tab%09here%25", holder="h", fence=2`},
	} {
		got, err := httpfence.FormatHeader(c.tok)
		if err != nil || got != c.want {
			t.Errorf("FormatHeader(%+v) = %q, %v; want %q", c.tok, got, err, c.want)
		}
		back, err := httpfence.ParseHeaderValue(got)
		if err != nil || back != c.tok {
			t.Errorf("ParseHeaderValue(FormatHeader(%+v)) = %+v, %v", c.tok, back, err)
		}
	}
	for _, tok := range []fence.Token{
		{Resource: "r", HolderID: "h", Fence: httpfence.MaxHeaderFence + 1},
		{Resource: "r", HolderID: "h", Fence: fence.MaxFence},
		{Resource: "r", HolderID: "h"},
		{Resource: "", HolderID: "h", Fence: 1},
		{Resource: "r", HolderID: "", Fence: 1},
		{Resource: "r\xff", HolderID: "h", Fence: 1},
		{Resource: "r", HolderID: "h\xc3", Fence: 1},
		{Resource: strings.Repeat("r", fence.MaxIDBytes+1), HolderID: "h", Fence: 1},
	} {
		var ae *fence.ArgumentError
		if v, err := httpfence.FormatHeader(tok); !errors.As(err, &ae) {
			t.Errorf("FormatHeader(%.60q) = %q, %v; want a *fence.ArgumentError", tok, v, err)
		}
	}
	// The longest ids, every byte escaped, still fit in MaxHeaderBytes.
	long := strings.Repeat("\x01", fence.MaxIDBytes)
	v, err := httpfence.FormatHeader(fence.Token{Resource: long, HolderID: long, Fence: httpfence.MaxHeaderFence})
	if err != nil || len(v) > httpfence.MaxHeaderBytes {
		t.Fatalf("longest token: %d bytes, %v", len(v), err)
	}
	if _, err := httpfence.ParseHeaderValue(v); err != nil {
		t.Fatalf("longest token does not parse back: %v", err)
	}
}

// The header's writer agrees with httpsfv's serializer, byte for byte.
func TestFormatHeaderMatchesHTTPSFV(t *testing.T) {
	for _, id := range []string{"a", `q"uo\te`, "sp ace", "ü", "tab\t", "%", "~!#$&'()*+,-./:;<=>?@[]^_`{|}"} {
		tok := fence.Token{Resource: id, HolderID: "h-" + id, Fence: 42}
		got, err := httpfence.FormatHeader(tok)
		if err != nil {
			t.Fatal(err)
		}
		if want := sfvMarshal(t, tok); got != want {
			t.Errorf("FormatHeader(%q) = %q, httpsfv writes %q", id, got, want)
		}
	}
}

func sfvMarshal(t testing.TB, tok fence.Token) string {
	t.Helper()
	d := httpsfv.NewDictionary()
	for _, kv := range [][2]string{{"resource", tok.Resource}, {"holder", tok.HolderID}} {
		var v any = kv[1]
		for i := 0; i < len(kv[1]); i++ {
			if kv[1][i] < 0x20 || kv[1][i] > 0x7e {
				v = httpsfv.DisplayString(kv[1])
				break
			}
		}
		d.Add(kv[0], httpsfv.NewItem(v))
	}
	d.Add("fence", httpsfv.NewItem(int64(tok.Fence)))
	s, err := httpsfv.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzParseHeader checks the parser against the RFC's rules as httpsfv
// implements them: it never panics; what it accepts is a dictionary httpsfv
// accepts, with no repeated key (counted independently: a comma separates
// members exactly when the text on each side of it is a dictionary on its
// own), and it formats back to the same token; and a token formatted by
// FormatHeader always parses back.
// TestParseHeaderReadsItsOwnValuesWithoutAllocating: the values
// FormatHeader writes for ids of printable ASCII are read without
// httpsfv's parse, which allocates (its results are compared on every
// value by FuzzParseHeader); one that needs an escape goes to httpsfv.
func TestParseHeaderReadsItsOwnValuesWithoutAllocating(t *testing.T) {
	for _, c := range []struct {
		tok    fence.Token
		allocs bool
	}{
		{fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 7}, false},
		{fence.Token{Resource: "orders/42 (eu)", HolderID: "worker:3", Fence: httpfence.MaxHeaderFence}, false},
		{fence.Token{Resource: `say "hi"`, HolderID: "agent-a", Fence: 7}, true},
		{fence.Token{Resource: "grüße", HolderID: "agent-a", Fence: 7}, true},
	} {
		v, err := httpfence.FormatHeader(c.tok)
		if err != nil {
			t.Fatal(err)
		}
		var got fence.Token
		allocs := testing.AllocsPerRun(20, func() { got, err = httpfence.ParseHeaderValue(v) })
		if err != nil || got != c.tok {
			t.Fatalf("%q: %+v, %v; want %+v", v, got, err, c.tok)
		}
		if (allocs > 0) != c.allocs {
			t.Errorf("%q: %v allocations a parse", v, allocs)
		}
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, c := range hostile {
		if len(c.v) < 300 {
			f.Add(c.v, "r", "h", uint64(1))
		}
	}
	f.Add(`resource="deploy-slot", holder="agent-a", fence=7`, "deploy-slot", "agent-a", uint64(7))
	f.Add(`resource="a,b", holder="(x, y)", fence=2, q=("a,b" 1)`, "a,b", `"q"`, uint64(2))
	f.Add(`resource=%"a,\", holder=%"%c3%bc", fence=3`, "ü", "%", uint64(3))
	for _, v := range []string{
		`resource="a", holder="b", fence=1`,
		`resource="a", holder="b", fence=0`,
		`resource="a", holder="b", fence=007`,
		`resource="a", holder="b", fence=999999999999999`,
		`resource="a", holder="b", fence=1000000000000000`,
		`resource="", holder="b", fence=1`,
		`resource="a\"b", holder="b", fence=1`,
		`resource="a", holder="b", fence=1 `,
		`resource="a", holder="b", fence=1, fence=2`,
		`resource="a", holder="b", fence=1;x`,
		`resource="a", holder="b	c", fence=1`,
	} {
		f.Add(v, "r", "h", uint64(1))
	}
	f.Fuzz(func(t *testing.T, v, resource, holder string, n uint64) {
		tok, err := httpfence.ParseHeaderValue(v)
		// The reading of FormatHeader's own values agrees with httpsfv's
		// parse, on every value.
		if dtok, derr := httpfence.ParseDictionary(v); (err == nil) != (derr == nil) || (err == nil && dtok != tok) || (err != nil && err.Error() != derr.Error()) {
			t.Fatalf("%q: ParseHeaderValue %+v, %v; httpsfv's parse %+v, %v", v, tok, err, dtok, derr)
		}
		d, derr := httpsfv.UnmarshalDictionary([]string{v})
		if err == nil {
			if derr != nil {
				t.Fatalf("accepted %q, which httpsfv refuses: %v", v, derr)
			}
			if got, want := len(d.Names()), membersByOracle(v); got != want {
				t.Fatalf("accepted %q, which has %d members but %d distinct keys", v, want, got)
			}
			s, ferr := httpfence.FormatHeader(tok)
			if ferr != nil {
				t.Fatalf("accepted %q as %+v, which does not format: %v", v, tok, ferr)
			}
			if back, err := httpfence.ParseHeaderValue(s); err != nil || back != tok {
				t.Fatalf("%q -> %+v -> %q -> %+v, %v", v, tok, s, back, err)
			}
		} else if derr == nil && len(v) <= httpfence.MaxHeaderBytes && len(d.Names()) > 0 && len(d.Names()) != membersByOracle(v) &&
			!strings.Contains(err.Error(), "repeats a key") {
			t.Fatalf("%q repeats a key, refused for another reason: %v", v, err)
		}
		tok = fence.Token{Resource: resource, HolderID: holder, Fence: n}
		s, err := httpfence.FormatHeader(tok)
		if err != nil {
			return
		}
		if back, err := httpfence.ParseHeaderValue(s); err != nil || back != tok {
			t.Fatalf("FormatHeader(%+v) = %q, which parses as %+v, %v", tok, s, back, err)
		}
		if want := sfvMarshal(t, tok); s != want {
			t.Fatalf("FormatHeader(%+v) = %q, httpsfv writes %q", tok, s, want)
		}
	})
}

// membersByOracle counts the members of v, a dictionary httpsfv accepts, by
// asking httpsfv where they end: a comma separates two members exactly when
// the text before it and the text after it are each a dictionary.
func membersByOracle(v string) int {
	n := 1
	for i := 0; i < len(v); i++ {
		if v[i] != ',' {
			continue
		}
		_, errBefore := httpsfv.UnmarshalDictionary([]string{v[:i]})
		_, errAfter := httpsfv.UnmarshalDictionary([]string{strings.TrimLeft(v[i+1:], " \t")})
		if errBefore == nil && errAfter == nil {
			n++
		}
	}
	return n
}
