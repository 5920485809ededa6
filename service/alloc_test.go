package service

import (
	"crypto/sha256"
	"reflect"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/service/wire"
)

// TestSecretHash: the hash from the stack copy is SHA-256 of the secret on
// both sides of wire.MaxSecretBytes (a longer one, from a Go caller of
// Call, is hashed whole, not cut).
func TestSecretHash(t *testing.T) {
	for _, n := range []int{0, 1, wire.MinSecretBytes, wire.MaxSecretBytes - 1, wire.MaxSecretBytes, wire.MaxSecretBytes + 1, 4 * wire.MaxSecretBytes} {
		s := strings.Repeat("s", n-min(n, 1)) + "x"[:min(n, 1)]
		if got, want := secretHash(s), sha256.Sum256([]byte(s)); got != want {
			t.Errorf("secretHash of %d bytes = %x, want %x", n, got, want)
		}
	}
}

// TestRecent: the releases within ttl, the newest keep of them, with room
// for the one a release appends; nil when none is left.
func TestRecent(t *testing.T) {
	rels := []Release{{RequestID: "a", At: 10}, {RequestID: "b", At: 50}, {RequestID: "c", At: 60}, {RequestID: "d", At: 70}}
	for _, c := range []struct {
		keep int
		now  float64
		want []string
	}{
		{4, 100, []string{"b", "c", "d"}}, // a is older than ttl
		{2, 100, []string{"c", "d"}},      // the newest two
		{4, 60, []string{"a", "b", "c", "d"}},
		{4, 1000, nil},
	} {
		got := recent(rels, c.now, 50, c.keep)
		var ids []string
		for _, r := range got {
			ids = append(ids, r.RequestID)
		}
		if !reflect.DeepEqual(ids, c.want) || (c.want == nil) != (got == nil) {
			t.Errorf("recent(keep %d, now %v) = %v (nil %v), want %v", c.keep, c.now, ids, got == nil, c.want)
		}
		if got != nil && cap(got) == len(got) {
			t.Errorf("recent(keep %d, now %v): no room for one more (len = cap = %d)", c.keep, c.now, len(got))
		}
	}
	if got := recent(nil, 100, 50, 4); got != nil {
		t.Errorf("recent(nil) = %v, want nil", got)
	}
}
