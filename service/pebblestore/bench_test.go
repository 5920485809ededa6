//go:build !js && !wasip1

package pebblestore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/wire"
)

// BenchmarkGrants: synced grants of new resources, one after the other,
// through a Local with the coordinator's fence reserve (1024), so the mark
// is raised once every 512 grants: "saved" raises it with SaveMark (a
// synced write and a flush to a table), "written" with a synced write only
// (the Store seen as a plain Persister). Their ratio is what flushing each
// raise costs.
func BenchmarkGrants(b *testing.B) {
	for _, mode := range []string{"saved", "written"} {
		b.Run(mode, func(b *testing.B) {
			s, _ := created(b, Options{})
			defer s.Close()
			var p service.Persister = s
			if mode == "written" {
				p = plain{s}
			}
			clk, _ := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
			l, err := service.NewLocal(service.LocalConfig{Clock: clk, TTL: time.Hour, Persist: p, FenceReserve: 1024})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Load(context.Background()); err != nil {
				b.Fatal(err)
			}
			svc, err := service.New(service.Config{TTL: time.Hour, Store: l})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				id := strconv.Itoa(i)
				r, err := svc.Call(context.Background(), acquireMsg(id))
				if err != nil || !r.OK {
					b.Fatal(r, err)
				}
			}
		})
	}
}

// plain is a Store seen as a Persister without SaveMark.
type plain struct{ s *Store }

func (p plain) Load(ctx context.Context) (service.Stored, error) { return p.s.Load(ctx) }
func (p plain) Write(ctx context.Context, b service.Batch, sync bool) error {
	return p.s.Write(ctx, b, sync)
}

func acquireMsg(id string) wire.Message {
	return wire.Message{Op: wire.OpAcquire, Secret: "secret-of-h-0123456789", Request: lease.Request{Kind: lease.KindAcquire,
		RequestID: "q" + id, Resource: "r" + id, HolderID: "h", SentAt: clock.At("agent-h", 1)}}
}
