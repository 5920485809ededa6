//go:build !js

package redisfence_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lease-fence/lease-fence/gates/gatetest"
	"github.com/lease-fence/lease-fence/gates/redisfence"
	"github.com/lease-fence/lease-fence/test/rig/redistest"
	"github.com/lease-fence/lease-fence/test/rig/rigproc"
)

// srv is the redis-server every test in this package shares; each test
// gets its own key prefix on it.
var srv *redistest.Server

var nsSeq atomic.Int32

func TestMain(m *testing.M) {
	if gatetest.Worker() {
		// A writer process of the conformance suite attaches to the
		// parent's server.
		os.Exit(m.Run())
	}
	rigproc.Main(m, &srv, redistest.Start)
}

// client returns a go-redis client for addr, closed at the end of the test.
func client(t testing.TB, addr string, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: addr, Protocol: 2}
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// newStore returns a Store under a prefix of its own, and its client.
func newStore(t testing.TB, opts redisfence.Options) (*redisfence.Store, *redis.Client, string) {
	t.Helper()
	ns := fmt.Sprintf("t%d-", nsSeq.Add(1))
	if opts.Prefix == "" {
		opts.Prefix = ns
	}
	rdb := client(t, srv.Addr())
	s, err := redisfence.Open(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, rdb, ns
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var bg = context.Background()
