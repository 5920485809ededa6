package wire

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// TestRenewalsRoundTrip: a batch encodes each renewal as /v1/renew's body
// and decodes back to the same messages.
func TestRenewalsRoundTrip(t *testing.T) {
	var ms []Message
	for i, r := range []string{"a", "b", "c"} {
		ms = append(ms, Message{Op: OpRenew, Secret: "secret-of-" + r + "-0123456789", Request: lease.Request{Kind: lease.KindRenew,
			RequestID: "q" + r, Resource: r, HolderID: "h", Fence: uint64(i + 1), SentAt: clock.At("agent", float64(10*i))}})
	}
	body, err := EncodeRenewals(ms)
	if err != nil {
		t.Fatal(err)
	}
	got, errs, e := DecodeRenewals(body)
	if e != nil || len(got) != 3 {
		t.Fatalf("decoded %d: %v", len(got), e)
	}
	for i := range ms {
		if errs[i] != nil || got[i].Request != ms[i].Request || got[i].Secret != ms[i].Secret || got[i].Op != OpRenew {
			t.Fatalf("renewal %d decoded as %+v (%v)", i, got[i], errs[i])
		}
	}
	if _, err := EncodeRenewals(nil); err == nil {
		t.Fatal("an empty batch encoded")
	}
	if _, err := EncodeRenewals([]Message{{Op: OpRelease}}); err == nil {
		t.Fatal("a release encoded in a batch")
	}
	if _, err := EncodeRenewals(make([]Message, MaxRenewals+1)); err == nil {
		t.Fatal("a batch over MaxRenewals encoded")
	}
}

// TestRenewalsRefusals: a body that is not a batch is refused as a whole;
// a renewal in it that /v1/renew would refuse is refused alone, with the
// same code.
func TestRenewalsRefusals(t *testing.T) {
	for _, tc := range []struct{ body, code string }{
		{`nope`, CodeMalformedJSON},
		{`null`, CodeWrongType},
		{`[]`, CodeWrongType},
		{`{}`, CodeMissingField},
		{`{"renewals":[]}`, CodeInvalidValue},
		{`{"renewals":{}}`, CodeWrongType},
		{`{"renewals":[` + goodRenew + `],"extra":1}`, CodeUnknownField},
		{`{"renewals":[` + goodRenew + `],"renewals":[` + goodRenew + `]}`, CodeDuplicateField},
		{`{"renewals":[` + strings.Repeat(goodRenew+`,`, MaxRenewals) + goodRenew + `]}`, CodeInvalidValue},
	} {
		if _, _, e := DecodeRenewals([]byte(tc.body)); e == nil || e.Code != tc.code {
			t.Errorf("%.60s: %v, want %s", tc.body, e, tc.code)
		}
	}
	body := `{"renewals":[` + goodRenew + `,` + goodRelease + `,` + strings.Replace(goodRenew, `"fence":3`, `"fence":0`, 1) + `,7]}`
	ms, errs, e := DecodeRenewals([]byte(body))
	if e != nil || len(ms) != 4 {
		t.Fatalf("%v, %d", e, len(ms))
	}
	if errs[0] != nil || ms[0].Request.Fence != 3 {
		t.Fatalf("the good renewal: %+v %v", ms[0], errs[0])
	}
	for i, code := range []string{"", CodeMissingField, CodeInvalidValue, CodeWrongType} {
		if i > 0 && (errs[i] == nil || errs[i].Code != code) {
			t.Errorf("renewal %d: %v, want %s", i, errs[i], code)
		}
	}
}

// TestResultShapes: a result is a Reply, or an error with its code.
func TestResultShapes(t *testing.T) {
	out, err := json.Marshal(RenewalsReply{OK: true, Results: []Result{
		ResultOf(Reply{OK: false, Reason: "expired"}, nil),
		ResultOf(Reply{}, NewError(CodeWrongSecret, "no")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ok":true,"results":[{"ok":false,"reason":"expired"},{"ok":false,"error":{"code":"wrong_secret","message":"no","status":403}}]}`
	if string(out) != want {
		t.Fatalf("%s\nwant %s", out, want)
	}
	var back RenewalsReply
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if back.Results[0].Err() != nil || back.Results[0].Reason != "expired" {
		t.Fatalf("%+v", back.Results[0])
	}
	if e := back.Results[1].Err(); e == nil || e.Code != CodeWrongSecret || e.Status != 403 {
		t.Fatalf("%+v", e)
	}
}
