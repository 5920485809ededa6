package service

import (
	"crypto/sha256"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestBinaryRoundTrip: what AppendEntryBinary writes, DecodeEntryBinary
// reads back as it was, and every shorter prefix of it is refused; the same
// for the releases alone.
func TestBinaryRoundTrip(t *testing.T) {
	h := sha256.Sum256([]byte("s"))
	rel := Release{RequestID: "rq-é", HolderID: "h", Fence: 1 << 40, At: -0.5, SecretHash: h}
	for _, e := range []Entry{
		{Resource: "a", HolderID: "holder", RequestID: "req", Fence: 1, ExpiresAt: 1.7e12 + 0.25, SecretHash: h},
		{Resource: "a", Owner: "token-1", HolderID: "holder", RequestID: "req", Fence: 1, ExpiresAt: 1.7e12 + 0.25, SecretHash: h},
		{Resource: "a", HolderID: strings.Repeat("x", 1024), RequestID: "r", Fence: math.MaxInt64, ExpiresAt: math.MaxFloat64, SecretHash: h,
			Released: []Release{rel, rel, rel, rel}},
		{Resource: "a", LastFence: 300},
		{Resource: "a", Released: []Release{rel}, LastFence: 7},
	} {
		data := AppendEntryBinary(nil, &e)
		got, err := DecodeEntryBinary("a", data)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("%+v came back as %+v, %v", e, got, err)
		}
		for n := range len(data) {
			if _, err := DecodeEntryBinary("a", data[:n]); err == nil {
				t.Fatalf("%d of %d bytes of %+v were accepted", n, len(data), e)
			}
		}
		rels := AppendReleasesBinary(nil, e.Released)
		if got, err := DecodeReleasesBinary("a", rels); err != nil || !reflect.DeepEqual(got, e.Released) {
			t.Fatalf("the releases %+v came back as %+v, %v", e.Released, got, err)
		}
	}
	if _, err := DecodeReleasesBinary("a", []byte{1}); err == nil || !strings.Contains(err.Error(), "the releases of \"a\" are damaged: a number is cut short") {
		t.Fatalf("releases cut short: %v", err)
	}
}

// FuzzDecodeEntryBinary: any bytes are either refused or an entry that is
// stored as exactly those bytes (one encoding per entry).
func FuzzDecodeEntryBinary(f *testing.F) {
	h := sha256.Sum256([]byte("s"))
	for _, e := range []Entry{
		{Owner: "t", HolderID: "h", RequestID: "q", Fence: 5, ExpiresAt: 1000, SecretHash: h},
		{Released: []Release{{RequestID: "r", HolderID: "h", Fence: 4, At: 10, SecretHash: h}}, LastFence: 4},
	} {
		f.Add(AppendEntryBinary(nil, &e))
	}
	f.Add([]byte{1, 0, 7, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEntryBinary("r", data)
		if err != nil {
			return
		}
		if again := AppendEntryBinary(nil, &e); string(again) != string(data) {
			t.Fatalf("%x decoded to %+v, stored as %x", data, e, again)
		}
	})
}
