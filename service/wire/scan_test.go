package wire

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// TestScanBodyAgrees: every body scanBody takes, json.Unmarshal takes too,
// with the same result; over the good and bad bodies of these tests, the
// fuzz corpus, and 200,000 bodies made from a seeded generator of members
// and values near the plain form (escapes, control characters, invalid
// UTF-8, numbers JSON refuses, other JSON types, whitespace, duplicates,
// unknown and miscased names, bytes after the object).
func TestScanBodyAgrees(t *testing.T) {
	bodies := []string{goodAcquire, goodRenew, goodRelease, goodInspect, `{}`, `null`, ``}
	for _, tc := range badBodies {
		bodies = append(bodies, tc.body)
	}
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecodeMessage/*")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		if len(lines) > 2 && strings.HasPrefix(lines[2], "[]byte(") {
			if s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[2], "[]byte("), ")")); err == nil {
				bodies = append(bodies, s)
			}
		}
	}
	rng := rand.New(rand.NewPCG(29, 1))
	for range 200_000 {
		bodies = append(bodies, genBody(rng))
	}
	taken := 0
	for _, data := range bodies {
		var fast body
		if !scanBody([]byte(data), &fast) {
			continue
		}
		taken++
		var slow *body
		if err := jsonv2.Unmarshal([]byte(data), &slow, jsonv2.RejectUnknownMembers(true)); err != nil || slow == nil {
			t.Fatalf("scanBody took %q, json.Unmarshal refused it: %v", data, err)
		}
		if fast != *slow {
			t.Fatalf("%q: scanBody gave %+v, json.Unmarshal %+v", data, fast, *slow)
		}
	}
	if taken < 10_000 {
		t.Fatalf("scanBody took only %d of %d bodies: the generator is too far from the plain form", taken, len(bodies))
	}
}

var (
	genNames = []string{"requestId", "resource", "holderId", "sentAt", "kind", "fence", "secret", "waitMillis", "afterFence",
		"value", "afterValue", "Resource", "other", "millis", "domain", "fence\u0000", ""}
	genStrings = []string{`"r1"`, `"deploy"`, `"0123456789abcdef"`, `""`, `"é日本"`, `"a\"b"`, `"a\\nb"`, `"\u0041"`, "\"a\tb\"",
		"\"\xff\"", "\"\xed\xa0\x80\"", `"acquire"`, `"unterminated`, `"\u2028"`, "\"\x7f\""}
	genNumbers = []string{`0`, `3`, `12.5`, `-1`, `-0`, `01`, `1.`, `.5`, `1e5`, `1E+5`, `1e-3`, `-`, `18446744073709551616`, `1.5e`, `9007199254740993`}
	genOthers  = []string{`null`, `true`, `false`, `[]`, `{}`, `[1]`}
	genSentAts = []string{`{"millis":12.5,"domain":"agent-a"}`, `{"domain":"d","millis":1}`, `{"millis":1}`, `{}`, `{"millis":1,"domain":"d","x":1}`,
		`{"millis":"1","domain":"d"}`, `{"millis":1,"millis":2,"domain":"d"}`, `{"millis":1, "domain":"d"}`, `{"millis":1,"domain":"d"`, `null`}
)

// genBody makes a body of 0 to 8 members near the plain form.
func genBody(rng *rand.Rand) string {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	var b strings.Builder
	b.WriteByte('{')
	for i := range rng.IntN(9) {
		if i > 0 {
			b.WriteByte(',')
		}
		name := pick(genNames)
		b.WriteString(strconv.Quote(name))
		b.WriteByte(':')
		switch r := rng.IntN(20); {
		case r == 0:
			b.WriteString(pick(genOthers))
		case r == 1:
			b.WriteString(pick(genNumbers))
		case r == 2:
			b.WriteString(pick(genStrings))
		case name == "sentAt":
			b.WriteString(pick(genSentAts))
		case name == "fence" || name == "waitMillis" || name == "afterFence":
			b.WriteString(pick(genNumbers))
		default:
			b.WriteString(pick(genStrings))
		}
		if rng.IntN(40) == 0 {
			b.WriteByte(' ')
		}
	}
	b.WriteByte('}')
	switch rng.IntN(40) {
	case 0:
		b.WriteString(" ")
	case 1:
		b.WriteString("{}")
	case 2:
		return b.String()[:b.Len()-1]
	}
	return b.String()
}

// TestCallBodyAppend: callBody.append writes the bytes json.Marshal
// writes, over 100,000 bodies from a seeded generator (strings with
// escapes, control characters, HTML's characters, non-ASCII and invalid
// UTF-8; numbers of every size), and leaves to json.Marshal those it does
// not take.
func TestCallBodyAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 2))
	strs := []string{"", "r1", "deploy-17", "a\"b\\c", "<&>", "\u2028\u2029", "é日本", "\x00\x1f\x7f", "\xff", "\xed\xa0\x80", "tab\there"}
	floats := []float64{0, math.Copysign(0, -1), 1, 12.5, -3.25, 1e-6, 9.99e-7, 1e20, 1e21, 123456.789, 1.7e12 + 0.123, 5e-324, 0.1 + 0.2}
	str := func() string {
		s := strs[rng.IntN(len(strs))]
		if rng.IntN(3) == 0 {
			s += strs[rng.IntN(len(strs))]
		}
		return s
	}
	taken := 0
	for range 100_000 {
		c := callBody{RequestID: str(), Resource: str(), HolderID: str(), Secret: str()}
		if rng.IntN(2) == 0 {
			c.SentAt = &Instant{Millis: floats[rng.IntN(len(floats))] * float64(rng.IntN(3)+1), Domain: str()}
			c.Kind = str()
		}
		if rng.IntN(2) == 0 {
			c.Fence = rng.Uint64() >> rng.IntN(64)
		}
		if rng.IntN(4) == 0 {
			c.WaitMillis = rng.Int64N(MaxWaitMillis + 1)
		}
		if rng.IntN(4) == 0 {
			v := str()
			c.Value = &v
		}
		want, werr := jsonv2.Marshal(c)
		got, ok := c.append(nil)
		if !ok {
			continue
		}
		taken++
		if werr != nil || string(got) != string(want) {
			t.Fatalf("%+v: append wrote %s, json.Marshal %s (%v)", c, got, want, werr)
		}
	}
	if taken < 10_000 {
		t.Fatalf("append took only %d of 100,000 bodies", taken)
	}
}

// BenchmarkEncodeMessage measures the encoding of one acquisition's body.
func BenchmarkEncodeMessage(b *testing.B) {
	m := Message{Op: OpAcquire, Secret: "0123456789abcdef0123456789abcdef", Request: lease.Request{RequestID: "0123456789abcdef0123456789abcdef",
		Resource: "resource-17", HolderID: "holder-3", Kind: lease.KindAcquire, SentAt: clock.At("holder-3", 123456.789)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeMessage(m); err != nil {
			b.Fatal(err)
		}
	}
}
