//go:build !js && !wasip1

package pgstore

import (
	"slices"
	"testing"

	"github.com/lease-fence/lease-fence/service"
)

// TestShiftsOf: of a decision made at a reading and again a millisecond
// later, the instants that moved by that millisecond are the reading's;
// any other difference (a release's other fields, an instant that moved
// otherwise) is refused, and neither entry is changed.
func TestShiftsOf(t *testing.T) {
	rel := func(id string, at float64) service.Release {
		return service.Release{RequestID: id, HolderID: "h", Fence: 3, At: at, SecretHash: [32]byte{1}}
	}
	entry := func(expires float64, rels ...service.Release) service.Entry {
		return service.Entry{Resource: "r", HolderID: "h", Fence: 4, ExpiresAt: expires, Released: rels}
	}
	for _, c := range []struct {
		name    string
		a, b    service.Entry
		ok      bool
		expires bool
		moved   []bool
	}{
		{"the expiry and the new release move", entry(60, rel("x", 5), rel("y", 10)), entry(61, rel("x", 5), rel("y", 11)), true, true, []bool{false, true}},
		{"nothing moves", entry(60, rel("x", 5)), entry(60, rel("x", 5)), true, false, []bool{false}},
		{"a release's id differs", entry(60, rel("x", 5)), entry(61, rel("z", 6)), false, false, nil},
		{"a release's time moves by 2", entry(60, rel("x", 5)), entry(61, rel("x", 7)), false, false, nil},
		{"the holder differs", entry(60), service.Entry{Resource: "r", HolderID: "g", Fence: 4, ExpiresAt: 61}, false, false, nil},
		{"a release fewer", entry(60, rel("x", 5)), entry(61), false, false, nil},
	} {
		bRels := append([]service.Release(nil), c.b.Released...)
		sh, ok := shiftsOf(c.a, c.b)
		if ok != c.ok || ok && (sh.expires != c.expires || !slices.Equal(sh.released, c.moved)) {
			t.Errorf("%s: shiftsOf = %+v, %v; want ok %v, expiry moved %v, releases moved %v", c.name, sh, ok, c.ok, c.expires, c.moved)
		}
		if !sameEntry(service.Entry{Released: c.b.Released}, service.Entry{Released: bRels}) {
			t.Errorf("%s: shiftsOf changed its second entry's releases", c.name)
		}
	}
}
