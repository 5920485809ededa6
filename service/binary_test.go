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
		{Resource: "a", HolderID: "holder", RequestID: "req", Fence: 9, ExpiresAt: 2, SecretHash: h, Value: strings.Repeat("v", 4096),
			Revoked: Revocation{HolderID: "old", Fence: 8, At: 1.5}},
		{Resource: "a", LastFence: 8, Revoked: Revocation{HolderID: "old", Fence: 8, At: 1.5}},
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

// TestBinaryVersion1IsRead: an entry the previous version wrote (layout
// version 1: no value, no revocation) is read as it was.
func TestBinaryVersion1IsRead(t *testing.T) {
	h := sha256.Sum256([]byte("s"))
	for _, e := range []Entry{
		{Resource: "a", Owner: "t", HolderID: "holder", RequestID: "req", Fence: 3, ExpiresAt: 5, SecretHash: h},
		{Resource: "a", Released: []Release{{RequestID: "r", HolderID: "h", Fence: 2, At: 1, SecretHash: h}}, LastFence: 2},
	} {
		data := AppendEntryBinaryV1(nil, &e)
		if data[0] != 1 {
			t.Fatalf("version byte %d", data[0])
		}
		got, err := DecodeEntryBinary("a", data)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("%+v came back as %+v, %v", e, got, err)
		}
		if _, err := DecodeEntryBinary("a", append(data, 0)); err == nil {
			t.Fatalf("version 1 with a byte more was accepted")
		}
	}
	if _, err := DecodeEntryBinary("a", []byte{3, 0, 0, 0, 0}); err == nil || !strings.Contains(err.Error(), "unknown version 3") {
		t.Fatalf("version 3: %v", err)
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
	f.Add([]byte{2, 0, 7, 0, 0})
	f.Add([]byte{1, 0, 7, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEntryBinary("r", data)
		if err != nil {
			return
		}
		again := AppendEntryBinary(nil, &e)
		if data[0] == 1 {
			again = AppendEntryBinaryV1(nil, &e) // the previous version's layout, read as it was written
		}
		if string(again) != string(data) {
			t.Fatalf("%x decoded to %+v, stored as %x", data, e, again)
		}
	})
}
