// Command peers measures the lock services lease-fence is compared with, on
// loopback, in the same shape as scripts/bench-service: acquire + release
// cycles per second, sequentially and with concurrent clients, each client
// on its own key, each run bounded by -cycles and -duration.
//
//	redis        redis-server (Debian, Redis 7) started on a free port, no
//	             persistence: SET key token NX PX ttl, then INCR as the
//	             fence; release by a compare-and-delete script.
//	redis-aof    the same with appendonly yes, appendfsync always.
//	redis-lua    no persistence, two round trips per cycle like the
//	             coordinator's two HTTP calls: one script does SET NX PX and
//	             INCR (acquire and fence at once), a second compare-and-delete.
//	redis-lua-aof  redis-lua with appendonly yes, appendfsync always.
//	etcd         embedded etcd (go.etcd.io/etcd/server/v3 embed), its
//	             client's concurrency.Mutex: Lock (fence = the revision of
//	             the lock key) then Unlock. etcd fsyncs its log on every write.
//	store-*      storage engines, one synced write per cycle (stores.go;
//	             scripts/bench-stores.sh).
//	etcd-handover  the time from Unlock to the next waiter's Lock returning,
//	             two concurrency.Mutex holders passing one lock back and
//	             forth -n times, each waiter's key in place before the
//	             Unlock (scripts/bench-hold.sh; handover.go).
//
// It lives in its own Go module so the library's go.mod stays small.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/internal/benchkit"
	"github.com/lease-fence/lease-fence/test/rig/redistest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	targets := flag.String("targets", "redis,redis-lua,redis-aof,etcd", "comma-separated targets")
	closed := benchkit.ClosedFlags()
	redisServer := flag.String("redis-server", "", "the redis-server binary (default: $REDIS_SERVER, or redis-server on the PATH)")
	handovers := flag.Int("n", 1000, "with etcd-handover: handovers")
	settle := flag.Duration("settle", 150*time.Millisecond, "with etcd-handover: how long each waiter waits before the release")
	samplesTo := flag.String("samples", "", "with etcd-handover: append every latency (milliseconds, one a line) to this file")
	flag.Parse()
	if *redisServer != "" {
		os.Setenv("REDIS_SERVER", *redisServer) // what redistest starts
	}
	if *targets == "etcd-handover" {
		if err := etcdHandover(*handovers, *settle, *samplesTo); err != nil {
			benchkit.Fatal(err)
		}
		return
	}
	cs := closed.Clients()
	for _, t := range strings.Split(*targets, ",") {
		var (
			mk   func(i int) (cycle func(ctx context.Context, key string) error, closeFn func(), err error)
			stop func()
			err  error
		)
		switch t {
		case "redis", "redis-aof", "redis-lua", "redis-lua-aof":
			mk, stop, err = startRedis(strings.HasSuffix(t, "-aof"), strings.HasPrefix(t, "redis-lua"))
		case "etcd":
			mk, stop, err = startEtcd()
		case "store-pebble", "store-bbolt", "store-bbolt-batch":
			mk, stop, err = startStore(t)
		default:
			err = errors.New("unknown target")
		}
		if err != nil {
			benchkit.Fatal(fmt.Errorf("%s: %w", t, err))
		}
		for _, c := range cs {
			done, el, err := measure(c, closed, mk)
			if err != nil {
				stop()
				benchkit.Fatal(fmt.Errorf("%s: %w", t, err))
			}
			fmt.Printf("%s (%d per cycle)\n", benchkit.Rate(t, c, done, el, roundTrips[t]), roundTrips[t])
		}
		stop()
	}
}

// roundTrips is how many requests a cycle of each target sends: SET, INCR
// and the release script; the two scripts; Lock and Unlock (each several
// etcd RPCs).
var roundTrips = map[string]int{"redis": 3, "redis-aof": 3, "redis-lua": 2, "redis-lua-aof": 2, "etcd": 2,
	"store-pebble": 1, "store-bbolt": 1, "store-bbolt-batch": 1}

var runs atomic.Int64

func measure(clients int, closed *benchkit.Closed,
	mk func(i int) (func(ctx context.Context, key string) error, func(), error)) (int64, time.Duration, error) {
	fns := make([]func(context.Context, string) error, clients)
	for i := range fns {
		fn, closeFn, err := mk(i)
		if err != nil {
			return 0, 0, err
		}
		defer closeFn()
		fns[i] = fn
	}
	id := runs.Add(1)
	// Warm up each client once.
	for i, fn := range fns {
		if err := fn(context.Background(), fmt.Sprintf("warm-%d-%d", id, i)); err != nil {
			return 0, 0, err
		}
	}
	return benchkit.Loop(clients, closed.Cycles, closed.Duration, func(ctx context.Context, i int) error {
		return fns[i](ctx, fmt.Sprintf("bench-%d-%d", id, i))
	})
}

// startRedis runs redis-server (redistest's: on a free loopback port, its
// data in a temporary directory) and returns a maker of per-client cycle
// functions.
func startRedis(aof, lua bool) (func(int) (func(context.Context, string) error, func(), error), func(), error) {
	appendonly := "no" // redistest's own: appendonly yes, appendfsync always
	if aof {
		appendonly = "yes"
	}
	srv, err := redistest.StartWith("--appendonly", appendonly)
	if err != nil {
		return nil, nil, err
	}
	stop := func() { _ = srv.Stop() }
	addr := srv.Addr()
	// acquire returns the new fence, or 0 if the lock is held.
	const acquire = `if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return redis.call("incr", KEYS[2]) else return 0 end`
	const release = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`
	mk := func(i int) (func(context.Context, string) error, func(), error) {
		c, err := dialRedis(addr)
		if err != nil {
			return nil, nil, err
		}
		n := 0
		return func(_ context.Context, key string) error {
			n++
			token := "holder-" + strconv.Itoa(i) + "-" + strconv.Itoa(n)
			var fence, v any
			var err error
			if lua {
				fence, err = c.do("EVAL", acquire, "2", "lock:"+key, "fence:"+key, token, "30000")
			} else if v, err = c.do("SET", "lock:"+key, token, "NX", "PX", "30000"); err == nil && v != "OK" {
				err = fmt.Errorf("SET NX refused: %v", v)
			} else if err == nil {
				fence, err = c.do("INCR", "fence:"+key)
			}
			if err != nil {
				return err
			}
			if f, ok := fence.(int64); !ok || f < 1 {
				return fmt.Errorf("acquire gave %v", fence)
			}
			if v, err = c.do("EVAL", release, "1", "lock:"+key, token); err == nil && v != int64(1) {
				err = fmt.Errorf("release gave %v", v)
			}
			return err
		}, c.close, nil
	}
	return mk, stop, nil
}

// redisConn is a minimal RESP client: enough for SET, INCR, EVAL and PING.
type redisConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func dialRedis(addr string) (*redisConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &redisConn{conn: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

func (c *redisConn) close() { c.conn.Close() }

func (c *redisConn) do(args ...string) (any, error) {
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *redisConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New("redis: " + line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	}
	return nil, errors.New("unexpected reply " + strconv.Quote(line))
}

// startEtcd runs an embedded single-member etcd on free loopback ports.
func startEtcd() (func(int) (func(context.Context, string) error, func(), error), func(), error) {
	cu, stop, err := startEtcdServer()
	if err != nil {
		return nil, nil, err
	}
	mk := func(int) (func(context.Context, string) error, func(), error) {
		cli, sess, err := etcdSession(cu)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, key string) error {
				m := concurrency.NewMutex(sess, "/lock/"+key)
				if err := m.Lock(ctx); err != nil {
					return err
				}
				if m.Header().Revision < 1 {
					return errors.New("no revision for the fence")
				}
				return m.Unlock(ctx)
			}, func() {
				sess.Close()
				cli.Close()
			}, nil
	}
	return mk, stop, nil
}

// etcdSession is a client of the etcd at cu with a session of its own.
func etcdSession(cu *url.URL) (*clientv3.Client, *concurrency.Session, error) {
	// No client log: a run that ends at -duration cancels Locks in
	// flight, which the client would log as failed retries.
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

// startEtcdServer starts an embedded etcd on free loopback ports, its data
// in a temporary directory, and returns its client URL.
func startEtcdServer() (*url.URL, func(), error) {
	dir, err := os.MkdirTemp("", "peers-etcd-")
	if err != nil {
		return nil, nil, err
	}
	ca, err := benchkit.FreeAddr()
	if err != nil {
		return nil, nil, err
	}
	pa, err := benchkit.FreeAddr()
	if err != nil {
		return nil, nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "fatal" // shutdown logs errors about closed listeners
	cu, _ := url.Parse("http://" + ca)
	pu, _ := url.Parse("http://" + pa)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, nil, errors.New("etcd not ready after 30s")
	}
	stop := func() {
		e.Close()
		os.RemoveAll(dir)
	}
	return cu, stop, nil
}
