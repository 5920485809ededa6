package main

import (
	"context"
	"fmt"
	"time"

	"github.com/lease-fence/lease-fence/internal/benchkit"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// etcdHandover passes one concurrency.Mutex between two sessions n times
// (after 10 to warm up) and prints the latency of each handover, from the
// start of the holder's Unlock to the waiter's Lock returning: before each
// Unlock the waiter's key is in place (two keys under the lock's prefix),
// so the waiter is queued, as it is for the coordinator's handover, and
// has then waited settle: etcd hands a watch that starts at a past revision
// to a loop that catches such watchers up every 100 ms, so a release right
// after the waiter started would measure that loop, not the handover of a
// waiter that waits.
func etcdHandover(n int, settle time.Duration, samplesTo string) error {
	cu, stop, err := startEtcdServer()
	if err != nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	ca, sa, err := etcdSession(cu)
	if err != nil {
		return err
	}
	defer ca.Close()
	_, sb, err := etcdSession(cu)
	if err != nil {
		return err
	}
	const prefix = "/handover/lock"
	held := concurrency.NewMutex(sa, prefix)
	if err := held.Lock(ctx); err != nil {
		return err
	}
	sessions, k := []*concurrency.Session{sa, sb}, 0
	lat, err := benchkit.Handovers(n, settle, func() error { return held.Unlock(ctx) }, func() (func() error, error) {
		k++ // sb, sa, sb, ...
		m := concurrency.NewMutex(sessions[k%2], prefix)
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		return func() error { return m.Unlock(ctx) }, nil
	}, func() error {
		for {
			resp, err := ca.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil || resp.Count == 2 {
				return err
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	if err != nil {
		return err
	}
	line, err := benchkit.Latencies("etcd-handover", lat, samplesTo)
	fmt.Println(line)
	return err
}
