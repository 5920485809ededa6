package wire

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
)

// replySeeds are answers as the handler writes them and answers it never
// writes but a reader must still take as encoding/json does.
var replySeeds = []string{
	`{"ok":true,"grant":{"requestId":"r1","resource":"deploy","holderId":"a","fence":7,"ttlMillis":30000,"coordinatorExpiresAt":{"millis":1796045771114.25,"domain":"coordinator"},"secret":"oWT1NFWQ_-"}}`,
	`{"ok":false,"heldBy":"agent-b","retryAfterMillis":1200}`,
	`{"ok":false,"reason":"expired"}`,
	`{"ok":true}`,
	` { "ok" : true , "reason" : "x\"\u00fc\ud83d\ude00" } `,
	`{"ok":true,"OK":false}`,                                           // names match case-insensitively in encoding/json
	`{"ok":true,"grant":{"Fence":3,"fence":2}}`,                        // the same inside the grant
	`{"ok":true,"grant":{"fence":1,"secret":"a"},"grant":{"fence":2}}`, // a repeated object is merged
	`{"ok":true,"grant":{"coordinatorExpiresAt":{"millis":1},"coordinatorExpiresAt":{"domain":"d"}}}`,
	`{"ok":true,"grant":null}`,
	`{"ok":null}`,
	`{"ok":true,"extra":[1,2,{"a":null}]}`,
	`{"ok":true,"grant":{"fence":1.0}}`,
	`{"ok":true,"grant":{"fence":-1}}`,
	`{"ok":true,"grant":{"fence":18446744073709551616}}`,
	`{"ok":false,"retryAfterMillis":1e400}`,
	`{"ok":false,"retryAfterMillis":-0}`,
	"{\"ok\":false,\"heldBy\":\"\xff\xfe\"}",
	`{"ok":"true"}`,
	`{"ok":true}{}`,
	`[{"ok":true}]`,
	`"ok"`,
	``,
	`{"ok":true,"heldBy":"a","heldBy":"b"}`,
}

// FuzzParseReply checks that the hand reader of answers gives exactly what
// encoding/json gives, or fails where it fails.
func FuzzParseReply(f *testing.F) {
	for _, s := range replySeeds {
		f.Add([]byte(s))
	}
	for _, r := range []Reply{
		{OK: true, Grant: &Grant{RequestID: "r\"1", Resource: "res/ü\n<x>", HolderID: "h", Fence: lease.MaxFence, TTLMillis: 0.5,
			CoordinatorExpiresAt: Instant{Millis: -1e-7, Domain: "c"}, Secret: "s"}},
		{HeldBy: "x", RetryAfterMillis: 1e22},
	} {
		f.Add(appendReply(nil, r))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseReply(data)
		var want Reply
		werr := json.Unmarshal(data, &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: parseReply error %v, encoding/json error %v", data, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: parseReply %+v (grant %+v), encoding/json %+v (grant %+v)", data, got, got.Grant, want, want.Grant)
		}
	})
}

// TestParseReplyTakesTheFastPath guards the point of parseReply: the
// handler's own answers are read without encoding/json.
func TestParseReplyTakesTheFastPath(t *testing.T) {
	for _, s := range replySeeds[:4] {
		if _, ok := fastReply([]byte(s)); !ok {
			t.Errorf("%s: not read by hand", s)
		}
	}
	for _, i := range []int{5, 6, 7, 9, 10, 11} { // differ in ways the hand reader leaves to encoding/json
		s := replySeeds[i]
		if _, ok := fastReply([]byte(s)); ok {
			t.Errorf("%s: read by hand, but encoding/json reads it differently", s)
		}
	}
}

// TestEncodeMessageMatchesEncodingJSON: the hand encoder writes the bytes
// json.Marshal writes for the request structs it replaced.
func TestEncodeMessageMatchesEncodingJSON(t *testing.T) {
	type acquire struct {
		RequestID string  `json:"requestId"`
		Resource  string  `json:"resource"`
		HolderID  string  `json:"holderId"`
		SentAt    Instant `json:"sentAt"`
		Kind      string  `json:"kind"`
	}
	type renew struct {
		RequestID string  `json:"requestId"`
		Resource  string  `json:"resource"`
		HolderID  string  `json:"holderId"`
		SentAt    Instant `json:"sentAt"`
		Kind      string  `json:"kind"`
		Fence     uint64  `json:"fence"`
		Secret    string  `json:"secret"`
	}
	type release struct {
		RequestID string `json:"requestId"`
		Resource  string `json:"resource"`
		HolderID  string `json:"holderId"`
		Fence     uint64 `json:"fence"`
		Secret    string `json:"secret"`
	}
	for _, tc := range []struct {
		id, res, holder, secret, domain string
		millis                          float64
		fence                           uint64
	}{
		{"9f0c", "deploy-slot", "agent-a", "oWT1NFWQ", "agent-a", 1234.5, 7},
		{"a<b>&c", "r/ü\u2028", "h\"\\\n\x7f", "s\x01", "d\t", -1e-7, lease.MaxFence},
		{"i", "r", "h", "s", "d", 1e21, 1},
		{"i", "r", "h", "s", "d", 0, 1},
	} {
		at := clock.At(tc.domain, tc.millis)
		wantA, _ := json.Marshal(acquire{tc.id, tc.res, tc.holder, FromInstant(at), "acquire"})
		wantR, _ := json.Marshal(renew{tc.id, tc.res, tc.holder, FromInstant(at), "renew", tc.fence, tc.secret})
		wantL, _ := json.Marshal(release{tc.id, tc.res, tc.holder, tc.fence, tc.secret})
		for _, c := range []struct {
			m    Message
			want []byte
		}{
			{Message{Op: OpAcquire, Request: lease.Request{Kind: lease.KindAcquire, RequestID: tc.id, Resource: tc.res, HolderID: tc.holder, SentAt: at}}, wantA},
			{Message{Op: OpRenew, Secret: tc.secret, Request: lease.Request{Kind: lease.KindRenew, RequestID: tc.id, Resource: tc.res, HolderID: tc.holder, SentAt: at, Fence: tc.fence}}, wantR},
			{Message{Op: OpRelease, Secret: tc.secret, Request: lease.Request{RequestID: tc.id, Resource: tc.res, HolderID: tc.holder, Fence: tc.fence}}, wantL},
		} {
			got, err := EncodeMessage(c.m)
			if err != nil || string(got) != string(c.want) {
				t.Errorf("%s:\n got %s (%v)\nwant %s", c.m.Op, got, err, c.want)
			}
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		m := Message{Op: OpAcquire, Request: lease.Request{Kind: lease.KindAcquire, RequestID: "i", Resource: "r", HolderID: "h", SentAt: clock.At("d", bad)}}
		if b, err := EncodeMessage(m); err == nil {
			t.Errorf("encoded millis %v as %s", bad, b)
		}
	}
}
