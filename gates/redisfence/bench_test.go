//go:build !js

package redisfence_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/redisfence"
)

// BenchmarkCommitInterleaved compares, on the test server (AOF with
// appendfsync always), one RPUSH committed through the Store with the same
// RPUSH sent alone, with a Store that writes the commit marker (AtMostOnce:
// what the marker costs), with each commit's context given a deadline
// (context.WithTimeout, as most callers' are; they join group commits as
// context.Background()'s do), with each writer's list a key of its own in
// the resource's slot (the writers' commits declare different keys, so
// they are groups of their own: a script each, what the group commit of
// one token's commits saves), and with the script looking every command up
// with COMMAND INFO and COMMAND GETKEYS, as it did before it knew its core
// commands.
// With 1 writer, with 8 each on a resource of its own, and with 8 writers of
// one holder on one resource (one token: what a gate with shared admission
// runs in parallel). The sides
// alternate in chunks of 20 commits a writer, so the noise of other
// processes falls on all of them; the metrics are each side's time per
// commit, its ratio to the RPUSH alone, and the commits per fence script
// it sent (EVALSHA).
func BenchmarkCommitInterleaved(b *testing.B) {
	s, rdb, ns := newStore(b, redisfence.Options{})
	h := &scriptHook{} // counts the scripts each side sends
	rdb.AddHook(h)
	once, err := redisfence.Open(rdb, redisfence.Options{Prefix: ns, AtMostOnce: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, cf := range []struct {
		name     string
		writers  int
		resource string // "" for a resource per writer
	}{{"writers=1", 1, ""}, {"writers=8", 8, ""}, {"writers=8/one-resource", 8, "bench-one"}} {
		writers := cf.writers
		b.Run(cf.name, func(b *testing.B) {
			type side struct {
				name     string
				old      string // the script's text replaced by new for this side
				new      string
				plain    bool
				deadline bool              // each commit's context has a deadline
				ownKey   bool              // each writer's list is a key of its own
				store    *redisfence.Store // nil: s
				elapsed  time.Duration
				scripts  int32 // the fence scripts it sent
			}
			sides := []*side{
				{name: "fenced"},
				{name: "plain", plain: true},
				{name: "at-most-once", store: once},
				{name: "deadline", deadline: true},
				{name: "script-each", ownKey: true},
				{name: "lookup-every-command", old: "if not string.find(name, ':', 1, true) then", new: "if false then"},
			}
			const chunk = 20
			b.ResetTimer()
			for i := 0; i < b.N; i += chunk * writers {
				for j := range sides {
					sd := sides[(j+i/(chunk*writers))%len(sides)]
					restore := func() {}
					if sd.old != "" {
						restore = redisfence.BreakScript(sd.old, sd.new)
					}
					start, sent := time.Now(), h.sent.Load()
					var wg sync.WaitGroup
					for w := range writers {
						wg.Go(func() {
							r := cf.resource
							if r == "" {
								r = "bench-" + strconv.Itoa(w)
							}
							key := redisfence.Key(r, ns+"list")
							if sd.ownKey {
								key = redisfence.Key(r, ns+"list-"+strconv.Itoa(w))
							}
							tok := fence.Token{Resource: r, HolderID: "h", Fence: 1}
							wr := redisfence.Write{Keys: []string{key}, Commands: [][]string{{"RPUSH", key, "v"}}}
							for range chunk {
								ctx, cancel := bg, context.CancelFunc(func() {})
								if sd.deadline {
									ctx, cancel = context.WithTimeout(bg, time.Minute)
								}
								var err error
								if sd.plain {
									err = rdb.RPush(bg, key, "v").Err()
								} else if sd.store != nil {
									err = sd.store.Commit(ctx, tok, wr)
								} else {
									err = s.Commit(ctx, tok, wr)
								}
								cancel()
								if err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					wg.Wait()
					sd.elapsed += time.Since(start)
					sd.scripts += h.sent.Load() - sent
					restore()
				}
			}
			n := float64((b.N + chunk*writers - 1) / (chunk * writers) * chunk * writers)
			plain := sides[1].elapsed
			for _, sd := range sides {
				b.ReportMetric(float64(sd.elapsed.Nanoseconds())/n, "ns/"+sd.name)
				if !sd.plain {
					b.ReportMetric(float64(sd.elapsed)/float64(plain), sd.name+"/plain")
					b.ReportMetric(n/float64(sd.scripts), "commits/script-"+sd.name)
				}
			}
		})
	}
}
