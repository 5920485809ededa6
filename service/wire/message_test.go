package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

const (
	goodAcquire = `{"requestId":"r1","resource":"deploy","holderId":"a","sentAt":{"millis":12.5,"domain":"agent-a"},"kind":"acquire","secret":"0123456789abcdef"}`
	goodRenew   = `{"requestId":"r2","resource":"deploy","holderId":"a","sentAt":{"millis":20,"domain":"agent-a"},"kind":"renew","fence":3,"secret":"s3cret-s3cret-s3cret"}`
	goodRelease = `{"requestId":"r3","resource":"deploy","holderId":"a","fence":3,"secret":"s3cret-s3cret-s3cret"}`
	goodInspect = `{"resource":"deploy","afterFence":0,"waitMillis":1500}`
)

func TestDecodeGood(t *testing.T) {
	m, err := DecodeMessage(OpAcquire, []byte(goodAcquire))
	if err != nil {
		t.Fatal(err)
	}
	want := lease.Request{Kind: lease.KindAcquire, RequestID: "r1", Resource: "deploy", HolderID: "a", SentAt: clock.At("agent-a", 12.5)}
	if m.Request != want || m.Secret != "0123456789abcdef" || m.Op != OpAcquire {
		t.Fatalf("acquire decoded as %+v", m)
	}
	m, err = DecodeMessage(OpRenew, []byte(goodRenew))
	if err != nil {
		t.Fatal(err)
	}
	if m.Request.Kind != lease.KindRenew || m.Request.Fence != 3 || m.Secret != "s3cret-s3cret-s3cret" || m.Request.SentAt.Millis != 20 {
		t.Fatalf("renew decoded as %+v", m)
	}
	m, err = DecodeMessage(OpRelease, []byte(goodRelease))
	if err != nil {
		t.Fatal(err)
	}
	if m.Request.Fence != 3 || m.Secret != "s3cret-s3cret-s3cret" || m.Request.Kind != "" || m.Request.RequestID != "r3" {
		t.Fatalf("release decoded as %+v", m)
	}
	// An acquisition may carry the zero fence a serialized lease.Request has.
	if _, err := DecodeMessage(OpAcquire, []byte(strings.Replace(goodAcquire, `"kind"`, `"fence":0,"kind"`, 1))); err != nil {
		t.Fatal(err)
	}
	// An acquisition may wait.
	m, err = DecodeMessage(OpAcquire, []byte(strings.Replace(goodAcquire, `"kind"`, `"waitMillis":30000,"kind"`, 1)))
	if err != nil || m.Wait != 30*time.Second || m.HasAfter {
		t.Fatalf("waiting acquire decoded as %+v (%v)", m, err)
	}
	m, err = DecodeMessage(OpInspect, []byte(goodInspect))
	if err != nil || m.Request != (lease.Request{Resource: "deploy"}) || !m.HasAfter || m.After != 0 || m.Wait != 1500*time.Millisecond || m.Secret != "" {
		t.Fatalf("inspect decoded as %+v (%v)", m, err)
	}
	m, err = DecodeMessage(OpInspect, []byte(`{"resource":"deploy"}`))
	if err != nil || m.HasAfter || m.Wait != 0 {
		t.Fatalf("plain inspect decoded as %+v (%v)", m, err)
	}
}

// badBodies are bodies every call refuses, with the code it must refuse them
// with. They also seed the fuzz target.
var badBodies = []struct {
	name string
	op   Op
	body string
	code string
}{
	{"empty", OpAcquire, ``, CodeMalformedJSON},
	{"not json", OpAcquire, `hello`, CodeMalformedJSON},
	{"truncated", OpAcquire, goodAcquire[:40], CodeMalformedJSON},
	{"trailing object", OpAcquire, goodAcquire + `{}`, CodeMalformedJSON},
	{"trailing garbage", OpAcquire, goodAcquire + `x`, CodeMalformedJSON},
	{"trailing comma", OpRelease, strings.Replace(goodRelease, `}`, `,}`, 1), CodeMalformedJSON},
	{"invalid utf8", OpAcquire, strings.Replace(goodAcquire, "deploy", "dep\xffloy", 1), CodeMalformedJSON},
	{"lone surrogate", OpAcquire, strings.Replace(goodAcquire, "deploy", `dep\ud800loy`, 1), CodeMalformedJSON},
	{"lone low surrogate", OpRelease, strings.Replace(goodRelease, `"a"`, `"\udc00"`, 1), CodeMalformedJSON},
	{"reversed surrogates", OpRenew, strings.Replace(goodRenew, `"r2"`, `"\ude00\ud83d"`, 1), CodeMalformedJSON},
	{"surrogate in a name", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"\ud800":1,"kind"`, 1), CodeMalformedJSON},
	{"invalid utf8 in sentAt", OpAcquire, strings.Replace(goodAcquire, "agent-a", "agent\xc3", 1), CodeMalformedJSON},
	{"control character", OpAcquire, strings.Replace(goodAcquire, "deploy", "dep\x01loy", 1), CodeMalformedJSON},
	{"null sentAt", OpAcquire, strings.Replace(goodAcquire, `{"millis":12.5,"domain":"agent-a"}`, `null`, 1), CodeWrongType},
	{"null millis", OpAcquire, strings.Replace(goodAcquire, `"millis":12.5`, `"millis":null`, 1), CodeWrongType},
	{"null fence", OpRenew, strings.Replace(goodRenew, `"fence":3`, `"fence":null`, 1), CodeWrongType},
	{"null secret", OpRelease, strings.Replace(goodRelease, `"s3cret-s3cret-s3cret"`, `null`, 1), CodeWrongType},
	{"array fence", OpRelease, strings.Replace(goodRelease, `"fence":3`, `"fence":[3]`, 1), CodeWrongType},
	{"object resource", OpAcquire, strings.Replace(goodAcquire, `"resource":"deploy"`, `"resource":{}`, 1), CodeWrongType},
	{"duplicate in sentAt", OpAcquire, strings.Replace(goodAcquire, `"millis":12.5`, `"millis":12.5,"millis":13`, 1), CodeDuplicateField},
	{"escaped duplicate", OpAcquire, strings.Replace(goodAcquire, `"resource":"deploy"`, `"resource":"deploy","\u0072esource":"other"`, 1), CodeDuplicateField},
	{"exponent fence", OpRelease, strings.Replace(goodRelease, `"fence":3`, `"fence":3e0`, 1), CodeInvalidValue},
	{"number body", OpRelease, `12`, CodeWrongType},
	{"array body", OpAcquire, `[1,2]`, CodeWrongType},
	{"string body", OpAcquire, `"acquire"`, CodeWrongType},
	{"null body", OpAcquire, `null`, CodeWrongType},
	{"number resource", OpAcquire, strings.Replace(goodAcquire, `"resource":"deploy"`, `"resource":7`, 1), CodeWrongType},
	{"null holder", OpAcquire, strings.Replace(goodAcquire, `"holderId":"a"`, `"holderId":null`, 1), CodeWrongType},
	{"string sentAt", OpAcquire, strings.Replace(goodAcquire, `{"millis":12.5,"domain":"agent-a"}`, `"12.5"`, 1), CodeWrongType},
	{"string millis", OpAcquire, strings.Replace(goodAcquire, `"millis":12.5`, `"millis":"12.5"`, 1), CodeWrongType},
	{"string fence", OpRenew, strings.Replace(goodRenew, `"fence":3`, `"fence":"3"`, 1), CodeWrongType},
	{"bool fence", OpRelease, strings.Replace(goodRelease, `"fence":3`, `"fence":true`, 1), CodeWrongType},
	{"missing requestId", OpAcquire, strings.Replace(goodAcquire, `"requestId":"r1",`, ``, 1), CodeMissingField},
	{"missing sentAt", OpAcquire, strings.Replace(goodAcquire, `"sentAt":{"millis":12.5,"domain":"agent-a"},`, ``, 1), CodeMissingField},
	{"missing domain", OpAcquire, strings.Replace(goodAcquire, `,"domain":"agent-a"`, ``, 1), CodeMissingField},
	{"missing kind", OpAcquire, strings.Replace(goodAcquire, `,"kind":"acquire"`, ``, 1), CodeMissingField},
	{"missing secret", OpRenew, strings.Replace(goodRenew, `,"secret":"s3cret-s3cret-s3cret"`, ``, 1), CodeMissingField},
	{"missing fence", OpRelease, strings.Replace(goodRelease, `"fence":3,`, ``, 1), CodeMissingField},
	{"unknown field", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"ttl":5,"kind"`, 1), CodeUnknownField},
	{"wrong case", OpAcquire, strings.Replace(goodAcquire, `"holderId"`, `"holderid"`, 1), CodeUnknownField},
	{"missing secret on acquire", OpAcquire, strings.Replace(goodAcquire, `,"secret":"0123456789abcdef"`, ``, 1), CodeMissingField},
	{"short secret", OpAcquire, strings.Replace(goodAcquire, `"0123456789abcdef"`, `"0123456789abcde"`, 1), CodeInvalidValue},
	{"long secret", OpRenew, strings.Replace(goodRenew, `"s3cret-s3cret-s3cret"`, `"`+strings.Repeat("s", MaxSecretBytes+1)+`"`, 1), CodeInvalidValue},
	{"number secret", OpRelease, strings.Replace(goodRelease, `"s3cret-s3cret-s3cret"`, `1234567890123456789`, 1), CodeWrongType},
	{"duplicate secret", OpRelease, strings.Replace(goodRelease, `"fence"`, `"secret":"s3cret-s3cret-s3cret","fence"`, 1), CodeDuplicateField},
	{"unknown field in release", OpRelease, strings.Replace(goodRelease, `"fence"`, `"grant":{},"fence"`, 1), CodeUnknownField},
	{"kind on release", OpRelease, strings.Replace(goodRelease, `"fence"`, `"kind":"release","fence"`, 1), CodeUnknownField},
	{"unknown in sentAt", OpAcquire, strings.Replace(goodAcquire, `"millis":12.5`, `"millis":12.5,"tz":1`, 1), CodeUnknownField},
	{"duplicate field", OpAcquire, strings.Replace(goodAcquire, `"resource":"deploy"`, `"resource":"deploy","resource":"other"`, 1), CodeDuplicateField},
	{"empty resource", OpAcquire, strings.Replace(goodAcquire, `"resource":"deploy"`, `"resource":""`, 1), CodeInvalidValue},
	{"kind mismatch", OpAcquire, strings.Replace(goodAcquire, `"kind":"acquire"`, `"kind":"renew"`, 1), CodeInvalidValue},
	{"fence zero", OpRenew, strings.Replace(goodRenew, `"fence":3`, `"fence":0`, 1), CodeInvalidValue},
	{"fence negative", OpRelease, strings.Replace(goodRelease, `"fence":3`, `"fence":-3`, 1), CodeInvalidValue},
	{"fence fraction", OpRelease, strings.Replace(goodRelease, `"fence":3`, `"fence":3.5`, 1), CodeInvalidValue},
	{"fence too big", OpRelease, strings.Replace(goodRelease, `"fence":3`, `"fence":9007199254740992`, 1), CodeInvalidValue},
	{"fence on acquire", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"fence":2,"kind"`, 1), CodeInvalidValue},
	{"huge millis", OpAcquire, strings.Replace(goodAcquire, `12.5`, `1e999`, 1), CodeInvalidValue},
	{"long resource", OpAcquire, strings.Replace(goodAcquire, `"deploy"`, `"`+strings.Repeat("x", MaxStringBytes+1)+`"`, 1), CodeInvalidValue},
	{"negative wait", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"waitMillis":-1,"kind"`, 1), CodeInvalidValue},
	{"fractional wait", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"waitMillis":1.5,"kind"`, 1), CodeInvalidValue},
	{"exponent wait", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"waitMillis":1e3,"kind"`, 1), CodeInvalidValue},
	{"huge wait", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"waitMillis":2147483649,"kind"`, 1), CodeInvalidValue},
	{"string wait", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"waitMillis":"10","kind"`, 1), CodeWrongType},
	{"null wait", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"waitMillis":null,"kind"`, 1), CodeWrongType},
	{"wait on renew", OpRenew, strings.Replace(goodRenew, `"kind"`, `"waitMillis":10,"kind"`, 1), CodeUnknownField},
	{"wait on release", OpRelease, strings.Replace(goodRelease, `"fence"`, `"waitMillis":10,"fence"`, 1), CodeUnknownField},
	{"afterFence on acquire", OpAcquire, strings.Replace(goodAcquire, `"kind"`, `"afterFence":1,"kind"`, 1), CodeUnknownField},
	{"inspect without resource", OpInspect, `{"afterFence":1}`, CodeMissingField},
	{"inspect with a secret", OpInspect, `{"resource":"r","secret":"0123456789abcdef"}`, CodeUnknownField},
	{"inspect with a holder", OpInspect, `{"resource":"r","holderId":"a"}`, CodeUnknownField},
	{"inspect wait without afterFence", OpInspect, `{"resource":"r","waitMillis":5}`, CodeInvalidValue},
	{"inspect negative afterFence", OpInspect, `{"resource":"r","afterFence":-1}`, CodeInvalidValue},
	{"inspect afterFence too big", OpInspect, `{"resource":"r","afterFence":9007199254740992}`, CodeInvalidValue},
	{"inspect null afterFence", OpInspect, `{"resource":"r","afterFence":null}`, CodeWrongType},
	{"inspect duplicate wait", OpInspect, `{"resource":"r","afterFence":1,"waitMillis":5,"waitMillis":6}`, CodeDuplicateField},
	{"inspect empty resource", OpInspect, `{"resource":""}`, CodeInvalidValue},
}

func TestDecodeBad(t *testing.T) {
	for _, tc := range badBodies {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMessage(tc.op, []byte(tc.body))
			if err == nil {
				t.Fatalf("accepted %q as %+v", tc.body, m)
			}
			if err.Code != tc.code || err.Status != codeStatus[tc.code] || err.Message == "" {
				t.Fatalf("refused %q with %v, want code %s", tc.body, err, tc.code)
			}
		})
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, m := range []Message{
		{Op: OpAcquire, Request: lease.Request{Kind: lease.KindAcquire, RequestID: "x\"y", Resource: "r/ü", HolderID: "h", SentAt: clock.At("d", -0.125)}, Secret: "<script>&-secret-\u2028"},
		{Op: OpRenew, Request: lease.Request{Kind: lease.KindRenew, RequestID: "i", Resource: "r", HolderID: "h", SentAt: clock.At("d", 1e12+0.5), Fence: lease.MaxFence}, Secret: "ssssssssssssssss"},
		{Op: OpRelease, Request: lease.Request{RequestID: "i", Resource: "r", HolderID: "h", Fence: 9}, Secret: "ssssssssssssssss"},
		{Op: OpAcquire, Request: lease.Request{Kind: lease.KindAcquire, RequestID: "w", Resource: "r", HolderID: "h", SentAt: clock.At("d", 1)}, Secret: "ssssssssssssssss", Wait: time.Minute},
		{Op: OpInspect, Request: lease.Request{Resource: "r"}},
		{Op: OpInspect, Request: lease.Request{Resource: "r"}, HasAfter: true},
		{Op: OpInspect, Request: lease.Request{Resource: "r"}, HasAfter: true, After: lease.MaxFence, Wait: MaxWaitMillis * time.Millisecond},
	} {
		body, err := EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		got, derr := DecodeMessage(m.Op, body)
		if derr != nil {
			t.Fatalf("%s: %v", body, derr)
		}
		if got != m {
			t.Fatalf("round trip of %+v gave %+v", m, got)
		}
	}
	for _, m := range []Message{
		{Op: "steal"},
		{Op: OpRenew, Request: lease.Request{Kind: lease.KindRenew, RequestID: "i", Resource: "r", HolderID: "h", SentAt: clock.At("d", 1), Fence: 1}, Secret: "ssssssssssssssss", Wait: time.Second},
		{Op: OpAcquire, Request: lease.Request{Kind: lease.KindAcquire, RequestID: "w", Resource: "r", HolderID: "h", SentAt: clock.At("d", 1)}, Secret: "ssssssssssssssss", Wait: time.Microsecond},
		{Op: OpInspect, Request: lease.Request{Resource: "r"}, Wait: -time.Millisecond},
	} {
		if _, err := EncodeMessage(m); err == nil {
			t.Fatalf("encoded %+v", m)
		}
	}
}

var fuzzOps = []Op{OpAcquire, OpRenew, OpRelease, OpInspect, OpRevoke, OpProclaim}

// FuzzDecodeMessage checks that no body makes the decoder panic, that every
// refusal carries a known code with its status, and that everything it
// accepts survives encoding and decoding unchanged.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(uint8(0), []byte(goodAcquire))
	f.Add(uint8(1), []byte(goodRenew))
	f.Add(uint8(2), []byte(goodRelease))
	f.Add(uint8(3), []byte(goodInspect))
	f.Add(uint8(3), []byte(`{"resource":"r","afterFence":3,"afterValue":"v","waitMillis":10}`))
	f.Add(uint8(4), []byte(`{"resource":"r","holderId":"h","fence":3}`))
	f.Add(uint8(5), []byte(`{"requestId":"q","resource":"r","holderId":"h","fence":3,"secret":"0123456789abcdef","value":"v"}`))
	for i, tc := range badBodies {
		op := uint8(0)
		for j, o := range fuzzOps {
			if o == tc.op {
				op = uint8(j)
			}
		}
		if i%3 == 0 { // a sample; the committed corpus holds the rest
			f.Add(op, []byte(tc.body))
		}
	}
	f.Fuzz(func(t *testing.T, opIndex uint8, body []byte) {
		op := fuzzOps[int(opIndex)%len(fuzzOps)]
		m, err := DecodeMessage(op, body)
		if err != nil {
			if st, ok := codeStatus[err.Code]; !ok || st != err.Status || st != 400 {
				t.Fatalf("refusal %v has an unexpected code or status", err)
			}
			return
		}
		if op == OpInspect || op == OpRevoke {
			if m.Op != op || m.Request.Resource == "" || m.Request.RequestID != "" || m.Secret != "" || (m.Wait > 0 && !m.HasAfter) ||
				(m.HasAfterValue && !m.HasAfter) || !utf8.Valid(body) || !json.Valid(body) || len(m.AfterValue) > MaxValueBytes {
				t.Fatalf("accepted an incomplete or invalid inspection or revoke %+v", m)
			}
		} else if m.Op != op || m.Request.RequestID == "" || m.Request.Resource == "" || m.Request.HolderID == "" ||
			len(m.Secret) < MinSecretBytes || len(m.Secret) > MaxSecretBytes || !utf8.Valid(body) || !json.Valid(body) ||
			m.HasAfter || (m.Wait > 0 && op != OpAcquire) || len(m.Value) > MaxValueBytes {
			t.Fatalf("accepted an incomplete or invalid message %+v", m)
		}
		// What was accepted is what encoding/json reads from the body.
		var std map[string]any
		if err := json.Unmarshal(body, &std); err != nil || std["resource"] != m.Request.Resource ||
			(op != OpInspect && op != OpRevoke && (std["requestId"] != m.Request.RequestID || std["holderId"] != m.Request.HolderID || std["secret"] != m.Secret)) ||
			(op == OpRevoke && (std["holderId"] != nil || m.Request.HolderID != "") && std["holderId"] != m.Request.HolderID) {
			t.Fatalf("accepted %q as %+v, encoding/json reads %v (%v)", body, m, std, err)
		}
		if w, ok := std["waitMillis"].(float64); (ok && time.Duration(w)*time.Millisecond != m.Wait) || (!ok && m.Wait != 0) {
			t.Fatalf("accepted %q as wait %v", body, m.Wait)
		}
		if a, ok := std["afterFence"].(float64); ok != m.HasAfter || (ok && uint64(a) != m.After) {
			t.Fatalf("accepted %q as afterFence %v/%d", body, m.HasAfter, m.After)
		}
		if v, ok := std["value"].(string); (ok && v != m.Value) || (!ok && m.Value != "") || (op == OpProclaim && !ok) {
			t.Fatalf("accepted %q as value %q", body, m.Value)
		}
		if v, ok := std["afterValue"].(string); ok != m.HasAfterValue || v != m.AfterValue {
			t.Fatalf("accepted %q as afterValue %v/%q", body, m.HasAfterValue, m.AfterValue)
		}
		again, err2 := EncodeMessage(m)
		if err2 != nil {
			t.Fatal(err2)
		}
		m2, err := DecodeMessage(op, again)
		if err != nil || m2 != m {
			t.Fatalf("round trip changed %+v into %+v (%v)", m, m2, err)
		}
	})
}

// TestOKBody: OKBody is what the JSON encoder makes of Reply{OK: true}, so
// the coordinator that writes it and the client that reads it without the
// encoder agree with those that use it.
func TestOKBody(t *testing.T) {
	for _, v := range []any{Reply{OK: true}, &Reply{OK: true}} {
		got, err := jsonv2.Marshal(v, jsontext.AllowInvalidUTF8(true))
		if err != nil || string(got) != OKBody {
			t.Fatalf("Reply{OK: true} encodes as %s (%v), OKBody is %s", got, err, OKBody)
		}
	}
	var r Reply
	if err := jsonv2.Unmarshal([]byte(OKBody), &r); err != nil || r != (Reply{OK: true}) {
		t.Fatalf("OKBody decodes as %+v (%v)", r, err)
	}
}

// TestSecretRule: a secret of any wrong length, the empty one and one
// longer than MaxStringBytes included, is refused with the secret's own
// rule, on every call that takes one.
func TestSecretRule(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		body string
	}{{OpAcquire, goodAcquire}, {OpRenew, goodRenew}, {OpRelease, goodRelease}} {
		old := `"secret":"` + map[Op]string{OpAcquire: "0123456789abcdef"}[tc.op]
		if tc.op != OpAcquire {
			old = `"secret":"s3cret-s3cret-s3cret`
		}
		for _, secret := range []string{"", "x", strings.Repeat("s", MaxSecretBytes+1), strings.Repeat("s", MaxStringBytes+1)} {
			body := strings.Replace(tc.body, old, `"secret":"`+secret, 1)
			_, err := DecodeMessage(tc.op, []byte(body))
			want := `field "secret" must be 16 to 256 bytes, got ` + strconv.Itoa(len(secret))
			if err == nil || err.Code != CodeInvalidValue || err.Message != want {
				t.Fatalf("%s with a secret of %d bytes: %v, want %s", tc.op, len(secret), err, want)
			}
		}
	}
}
