package main

import (
	"context"
	"fmt"
	"time"

	"github.com/lease-fence/lease-fence/internal/testrig/benchkit"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
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
	session := func() (*clientv3.Client, *concurrency.Session, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, nil, err
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
		if err != nil {
			cli.Close()
			return nil, nil, err
		}
		return cli, s, nil
	}
	ca, sa, err := session()
	if err != nil {
		return err
	}
	defer ca.Close()
	_, sb, err := session()
	if err != nil {
		return err
	}
	const prefix = "/handover/lock"
	held := concurrency.NewMutex(sa, prefix)
	if err := held.Lock(ctx); err != nil {
		return err
	}
	waiting := sb
	var lat []time.Duration
	for range n + 10 {
		m := concurrency.NewMutex(waiting, prefix)
		type result struct {
			at  time.Time
			err error
		}
		got := make(chan result, 1)
		go func() {
			err := m.Lock(ctx)
			got <- result{time.Now(), err}
		}()
		for {
			resp, err := ca.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				return err
			}
			if resp.Count == 2 {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(settle)
		t0 := time.Now()
		if err := held.Unlock(ctx); err != nil {
			return err
		}
		r := <-got
		if r.err != nil {
			return r.err
		}
		lat = append(lat, r.at.Sub(t0))
		if waiting == sb {
			waiting = sa
		} else {
			waiting = sb
		}
		held = m
	}
	_ = held.Unlock(ctx)
	line, err := benchkit.Latencies("etcd-handover", lat[10:], samplesTo)
	fmt.Println(line)
	return err
}
