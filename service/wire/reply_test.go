package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

var (
	replyStrs = []string{"", "r1", "deploy-17", "a\"b\\c", "<&>", "\u2028\u2029", "é日本", "\x00\x1f\x7f", "\xff", "\xed\xa0\x80",
		"tab\there", "expired", "0123456789abcdef0123456789abcdef"}
	replyFloats = []float64{0, math.Copysign(0, -1), 1, 12.5, -3.25, 1e-6, 9.99e-7, 1e20, 1e21, 123456.789, 1.7e12 + 0.123, 5e-324,
		0.1 + 0.2, 30000, math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1)}
)

// genReply makes a Reply: mostly a cycle's answer (a grant, a denial, a
// refusal, a release done), now and then with a member of another answer,
// its strings and numbers from the lists above (escapes, HTML's characters,
// invalid UTF-8, -0, numbers written with an exponent, NaN).
func genReply(rng *rand.Rand) Reply {
	str := func() string {
		s := replyStrs[rng.IntN(len(replyStrs))]
		if rng.IntN(3) == 0 {
			s += replyStrs[rng.IntN(len(replyStrs))]
		}
		return s
	}
	float := func() float64 { return replyFloats[rng.IntN(len(replyFloats))] * float64(rng.IntN(3)+1) }
	r := Reply{OK: rng.IntN(2) == 0}
	switch rng.IntN(4) {
	case 0:
		r.Grant = &Grant{RequestID: str(), Resource: str(), HolderID: str(), Fence: rng.Uint64() >> rng.IntN(65), TTLMillis: float(),
			CoordinatorExpiresAt: Instant{Millis: float(), Domain: str()}}
	case 1:
		r.HeldBy, r.RetryAfterMillis = str(), float()
	case 2:
		r.Reason = str()
	}
	if rng.IntN(8) == 0 {
		switch rng.IntN(8) {
		case 0:
			held := rng.IntN(2) == 0
			r.Held = &held
		case 1:
			r.HolderID = str()
		case 2:
			r.Fence = rng.Uint64() >> rng.IntN(65)
		case 3:
			r.RemainingMillis = float()
		case 4:
			last := rng.Uint64() >> rng.IntN(65)
			r.LastFence = &last
		case 5:
			r.Value = str()
		case 6:
			r.Revoked = &Revoked{HolderID: str(), Fence: rng.Uint64()}
		case 7:
			r.RemovedWaiter = str()
		}
	}
	return r
}

// plainReply reports whether AppendReply must take r: a cycle's answer
// whose strings are valid UTF-8 and whose numbers need no exponent.
func plainReply(r Reply) bool {
	rest := r
	rest.OK, rest.Grant, rest.HeldBy, rest.RetryAfterMillis, rest.Reason = false, nil, "", 0, ""
	if rest != (Reply{}) {
		return false
	}
	strs, floats := []string{r.HeldBy, r.Reason}, []float64{r.RetryAfterMillis}
	if g := r.Grant; g != nil {
		strs = append(strs, g.RequestID, g.Resource, g.HolderID, g.CoordinatorExpiresAt.Domain)
		floats = append(floats, g.TTLMillis, g.CoordinatorExpiresAt.Millis)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, f := range floats {
		if _, ok := appendFloat(nil, f); !ok {
			return false
		}
	}
	return true
}

// TestReplyAppend: AppendReply writes the bytes json.Marshal writes, over
// 100,000 replies from a seeded generator, takes every cycle's answer it
// should, and leaves the rest to json.Marshal with b unchanged.
func TestReplyAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	taken := 0
	for range 100_000 {
		r := genReply(rng)
		want, werr := jsonv2.Marshal(&r)
		got, ok := AppendReply([]byte("x"), &r)
		if ok != plainReply(r) {
			t.Fatalf("%+v (grant %+v): AppendReply took it: %v, should have: %v", r, r.Grant, ok, !ok)
		}
		if !ok {
			if string(got) != "x" {
				t.Fatalf("%+v: AppendReply refused it but changed b to %q", r, got)
			}
			continue
		}
		taken++
		if werr != nil || string(got) != "x"+string(want) {
			t.Fatalf("%+v (grant %+v): AppendReply wrote %s, json.Marshal %s (%v)", r, r.Grant, got[1:], want, werr)
		}
	}
	if taken < 20_000 {
		t.Fatalf("AppendReply took only %d of 100,000 replies", taken)
	}
}

// TestScanReplyAgrees: every answer scanReply takes, json.Unmarshal takes
// too, with the same Reply; and DecodeReply agrees with json.Unmarshal on
// every answer, taken or not. Over the answers of TestReplyAppend's
// generator as json.Marshal writes them, the fuzz corpus, and 200,000
// answers near the plain form (escapes, control characters, invalid UTF-8,
// numbers out of float64's range or not whole for a fence, other JSON
// types, whitespace, duplicates, unknown and miscased members, bytes after
// the object). scanReply must take every cycle's answer json.Marshal
// writes without escapes.
func TestScanReplyAgrees(t *testing.T) {
	var bodies []string
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecodeReply/*")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		bodies = append(bodies, s)
	}
	if len(bodies) < 10 {
		t.Fatalf("only %d answers in the fuzz corpus", len(bodies))
	}
	rng := rand.New(rand.NewPCG(29, 4))
	must := 0
	for range 50_000 {
		r := genReply(rng)
		data, err := jsonv2.Marshal(&r)
		if err != nil {
			continue
		}
		var got Reply
		if plainReply(r) && !strings.Contains(string(data), `\`) {
			must++
			if !scanReply(data, &got) {
				t.Fatalf("scanReply did not take %s", data)
			}
		}
		bodies = append(bodies, string(data))
	}
	if must < 10_000 {
		t.Fatalf("only %d answers in the plain form", must)
	}
	for range 200_000 {
		bodies = append(bodies, genReplyBody(rng))
	}
	taken := 0
	for _, data := range bodies {
		if replyAgrees(t, []byte(data)) {
			taken++
		}
	}
	if taken < 50_000 {
		t.Fatalf("scanReply took only %d of %d answers: the generator is too far from the plain form", taken, len(bodies))
	}
}

// replyAgrees fails t unless DecodeReply and, if it takes data, scanReply
// decode data as json.Unmarshal does; it reports whether scanReply took it.
func replyAgrees(t *testing.T, data []byte) bool {
	t.Helper()
	var slow Reply
	serr := jsonv2.Unmarshal(data, &slow)
	var fast Reply
	taken := scanReply(data, &fast)
	if taken && (serr != nil || !reflect.DeepEqual(fast, slow)) {
		t.Fatalf("%q: scanReply gave %+v (grant %+v), json.Unmarshal %+v (grant %+v, %v)", data, fast, fast.Grant, slow, slow.Grant, serr)
	}
	got := Reply{HeldBy: "left over", Grant: &Grant{Fence: 9}}
	derr := DecodeReply(data, &got)
	if (derr == nil) != (serr == nil) || serr == nil && !reflect.DeepEqual(got, slow) {
		t.Fatalf("%q: DecodeReply gave %+v (%v), json.Unmarshal %+v (%v)", data, got, derr, slow, serr)
	}
	return taken
}

func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte(OKBody))
	f.Fuzz(func(t *testing.T, data []byte) { replyAgrees(t, data) })
}

var (
	genReplyNames = []string{"ok", "grant", "heldBy", "retryAfterMillis", "reason", "held", "holderId", "fence", "lastFence", "value",
		"OK", "Grant", "other", ""}
	genGrantNames = []string{"requestId", "resource", "holderId", "fence", "ttlMillis", "coordinatorExpiresAt", "RequestId", "millis", "x"}
	genReplyNums  = append([]string{`1e400`, `-1e400`, `1e-400`, `18446744073709551615`, `1.0`, `1e2`, `0.5`, `12345678901234567890123`},
		genNumbers...)
)

// genReplyBody makes an answer of 0 to 6 members near the plain form.
func genReplyBody(rng *rand.Rand) string {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	value := func(name string) string {
		switch r := rng.IntN(20); {
		case r == 0:
			return pick(genOthers)
		case r == 1:
			return pick(genReplyNums)
		case r == 2:
			return pick(genStrings)
		}
		switch name {
		case "ok", "held":
			return pick([]string{"true", "false", "tru", "falsey"})
		case "fence", "ttlMillis", "millis", "retryAfterMillis", "lastFence":
			return pick(genReplyNums)
		case "grant":
			return genObject(rng, genGrantNames, 7, func(name string) string {
				switch name {
				case "fence", "ttlMillis", "millis":
					return pick(genReplyNums)
				case "coordinatorExpiresAt":
					return genObject(rng, []string{"millis", "domain", "Millis", "x"}, 3, func(name string) string {
						if name == "domain" && rng.IntN(4) > 0 {
							return pick(genStrings)
						}
						return pick(genReplyNums)
					})
				}
				return pick(genStrings)
			})
		}
		return pick(genStrings)
	}
	b := genObject(rng, genReplyNames, 6, value)
	switch rng.IntN(40) {
	case 0:
		return b + " "
	case 1:
		return b + "{}"
	case 2:
		return b[:len(b)-1]
	case 3:
		return " " + b
	}
	return b
}

// genObject makes an object of fewer than max members named from names
// with values from value, now and then with a space.
func genObject(rng *rand.Rand, names []string, max int, value func(name string) string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range rng.IntN(max) {
		if i > 0 {
			b.WriteByte(',')
		}
		name := names[rng.IntN(len(names))]
		b.WriteString(strconv.Quote(name))
		b.WriteByte(':')
		b.WriteString(value(name))
		if rng.IntN(60) == 0 {
			b.WriteByte(' ')
		}
	}
	b.WriteByte('}')
	return b.String()
}

// TestReplyEdges: the answers a cycle gets, and the edges the generators
// may miss, each decoded as json.Unmarshal decodes it.
func TestReplyEdges(t *testing.T) {
	grant := `{"ok":true,"grant":{"requestId":"r1","resource":"deploy","holderId":"a","fence":7,"ttlMillis":10000,` +
		`"coordinatorExpiresAt":{"millis":1700000000123.5,"domain":"coordinator"}}}`
	for _, tc := range []struct {
		data  string
		taken bool
	}{
		{grant, true},
		{OKBody, true},
		{`{"ok":false,"reason":"expired"}`, true},
		{`{"ok":false,"heldBy":"b","retryAfterMillis":120}`, true},
		{`{}`, true},
		{`{"ok":true,"grant":{}}`, true},
		{`{"ok":true,"grant":{"fence":18446744073709551615}}`, true},
		{`{"ok":true,"grant":{"fence":18446744073709551616}}`, false},
		{`{"ok":true,"grant":{"fence":1.0}}`, false},
		{`{"ok":true,"grant":{"fence":-0}}`, false},
		{`{"ok":true,"grant":{"fence":07}}`, false},
		{`{"ok":true,"grant":{"ttlMillis":1e400}}`, false},
		{`{"ok":true,"grant":{"ttlMillis":-0}}`, true},
		{`{"ok":true,"grant":{"ttlMillis":1e-400}}`, true},
		{`{"ok":true,"grant":{"ttlMillis":1.7976931348623157e308}}`, true},
		{`{"ok":true,"grant":null}`, false},
		{`{"ok":true,"reason":"a\u00e9"}`, false},
		{"{\"ok\":true,\"reason\":\"\xff\"}", false},
		{"{\"ok\":true,\"reason\":\"\xed\xa0\x80\"}", false},
		{`{"ok":true,"reason":"x","reason":"y"}`, false},
		{`{"ok":true,"grant":{"fence":1,"fence":2}}`, false},
		{`{"ok":true,"newMember":{"a":[1,2]}}`, false}, // unknown: ignored by json.Unmarshal
		{`{"ok":true,"grant":{"fence":3,"since":5}}`, false},
		{`{"OK":true}`, false},
		{`{"ok":true,"held":true,"holderId":"b","fence":7,"remainingMillis":1234}`, false},
		{`{"ok":true} `, false},
		{`{"ok":true}{}`, false},
		{`{"ok":tru}`, false},
		{`null`, false},
	} {
		if taken := replyAgrees(t, []byte(tc.data)); taken != tc.taken {
			t.Errorf("%s: scanReply took it: %v, want %v", tc.data, taken, tc.taken)
		}
	}
	var r Reply
	if err := DecodeReply([]byte(`{"ok":true,"newMember":1,"grant":{"fence":3,"since":5}}`), &r); err != nil || !r.OK || r.Grant == nil || r.Grant.Fence != 3 {
		t.Fatalf("unknown members: %+v (%v)", r, err)
	}
}

// BenchmarkReply measures a grant's answer written and read by hand and
// through the JSON library (as the coordinator writes it: MarshalWrite to
// a buffer with invalid UTF-8 allowed), over 1,024 grants with distinct
// ids (so that the library's cache of decoded strings is no help, as with
// real answers). Compare the pairs of each run.
func BenchmarkReply(b *testing.B) {
	replies := make([]Reply, 1024)
	bodies := make([][]byte, len(replies))
	for i := range replies {
		id := strconv.FormatUint(rand.Uint64(), 16) + strconv.FormatUint(rand.Uint64(), 16)
		replies[i] = Reply{OK: true, Grant: &Grant{RequestID: id, Resource: "resource-" + strconv.Itoa(i), HolderID: "holder-3",
			Fence: uint64(123456 + i), TTLMillis: 10000, CoordinatorExpiresAt: Instant{Millis: 1733612345678.25 + float64(i), Domain: "coordinator-5f3a"}}}
		var err error
		if bodies[i], err = jsonv2.Marshal(&replies[i]); err != nil {
			b.Fatal(err)
		}
	}
	var buf bytes.Buffer
	b.Run("encode=hand", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf.Reset()
			out, ok := AppendReply(buf.AvailableBuffer(), &replies[i%len(replies)])
			if !ok {
				b.Fatal("not taken")
			}
			buf.Write(out)
			i++
		}
	})
	b.Run("encode=json", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf.Reset()
			if err := jsonv2.MarshalWrite(&buf, &replies[i%len(replies)], jsontext.AllowInvalidUTF8(true)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("decode=hand", func(b *testing.B) {
		b.ReportAllocs()
		var got Reply
		i := 0
		for b.Loop() {
			if err := DecodeReply(bodies[i%len(bodies)], &got); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("decode=json", func(b *testing.B) {
		b.ReportAllocs()
		var got Reply
		i := 0
		for b.Loop() {
			got = Reply{}
			if err := jsonv2.Unmarshal(bodies[i%len(bodies)], &got); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
