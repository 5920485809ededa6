package redisfence

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// BreakScript swaps the Store's script for one with old replaced by new
// (every Store in the test binary), and returns a function that puts the
// real one back. The conformance test uses it for the deliberate break.
func BreakScript(old, new string) (restore func()) {
	if !strings.Contains(script, old) {
		panic("redisfence: BreakScript: the script has no " + old)
	}
	real := fenceScript
	fenceScript = redis.NewScript(strings.Replace(script, old, new, 1))
	return func() { fenceScript = real }
}

// OnJoin makes s call f each time a commit joins a batch that waits for
// its group's script in flight, before the batch can be sent (with the
// Store's lock held: f must not call the Store).
func OnJoin(s *Store, f func()) { s.joined = f }
