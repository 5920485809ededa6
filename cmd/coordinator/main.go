//go:build !js && !wasip1

// Command coordinator serves the lease coordinator over HTTP on loopback:
// POST /v1/acquire, /v1/renew, /v1/release and /v1/inspect with JSON bodies
// (package service/wire), answered by the state machine of package
// service. An acquisition or an inspection may wait (waitMillis, at most
// -max-wait): a held resource is handed to its waiters in arrival order as
// soon as it is released or expires. State
// is durable by default: a Pebble database in the -state directory
// (package service/pebblestore); every grant and renewal is synced before
// it is answered (a release is written at once and synced with the next
// write), so a restarted coordinator issues fences above every fence it
// ever issued and remembers the current holders. The state must exist:
// create it once with -init. -memory runs without persistence, and says so.
// After a restore from a backup, -min-fence N makes every new fence at
// least N (docs/service.md, "Backups").
//
// With -store postgres://..., the state is in PostgreSQL instead (package
// service/pgstore), and any number of coordinators over one database serve
// the same leases; -fence-table names sqlfence tables in that database
// whose floor every grant raises in its own transaction.
//
// Usage:
//
//	go run ./cmd/coordinator -init [-state lease-fence-state]   # once
//	go run ./cmd/coordinator [-addr 127.0.0.1:8787] [-ttl 30s] [-state lease-fence-state] [-min-fence N]
//	go run ./cmd/coordinator -memory
//	go run ./cmd/coordinator -init -store 'postgres://HOST/DB'   # once, for all replicas
//	go run ./cmd/coordinator -store 'postgres://HOST1,HOST2/DB?target_session_attrs=read-write' [-fence-table lease_fence]
//
// The first line it prints is "listening on http://HOST:PORT", which is how
// a caller that passed port 0 learns the port. See docs/service.md for the
// limits and their defaults.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/pebblestore"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(1)
	}
}

// Defaults of the limits (docs/service.md lists them).
const (
	defaultStatePath    = "lease-fence-state"
	defaultMaxConns     = 1000
	defaultIdleTimeout  = 60 * time.Second
	defaultHeaderTime   = 5 * time.Second
	defaultReadTimeout  = 10 * time.Second
	defaultWriteTimeout = 10 * time.Second
	defaultHeaderBytes  = 8 << 10
	// fdReserve is how many file descriptors are kept for everything but
	// client connections (the listener, the database, stdio, the runtime).
	fdReserve = 64
)

// run serves until ctx ends. It writes the listening line to stdout and
// logs to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fl.SetOutput(stderr)
	addr := fl.String("addr", "127.0.0.1:8787", "address to listen on (port 0 picks a free one)")
	ttl := fl.Duration("ttl", 30*time.Second, "lease length")
	state := fl.String("state", defaultStatePath, "the state directory (a Pebble database); it must exist unless -init is given")
	initDB := fl.Bool("init", false, "create the state directory (refused if it exists), then serve")
	minFree := fl.Uint64("min-free-bytes", 64<<20, "refuse changes (503) while the state's disk has less free space than this, before it runs out")
	minFence := fl.Uint64("min-fence", 0, "make every new fence at least this (after restoring the state from a backup: above every fence issued since the backup)")
	memory := fl.Bool("memory", false, "keep state in memory only: a restart forgets every lease and starts fences over")
	domain := fl.String("domain", "coordinator", "name of the coordinator's clock domain")
	quiet := fl.Bool("quiet", false, "do not log each call")
	maxLeases := fl.Int("max-leases", service.DefaultMaxLeases, "most live leases; an acquisition beyond is refused with 503 too_many_leases")
	maxID := fl.Int("max-id-bytes", wire.DefaultMaxIDBytes, "longest resource, holder id and request id, in bytes (at most 1024)")
	maxBody := fl.Int("max-body-bytes", wire.MaxBodyBytes, "largest request body, in bytes")
	maxHeader := fl.Int("max-header-bytes", defaultHeaderBytes, "largest request header, in bytes")
	maxConns := fl.Int("max-conns", defaultMaxConns, "most open client connections (lowered to fit the file-descriptor limit); at the limit the oldest idle one is closed")
	idle := fl.Duration("idle-timeout", defaultIdleTimeout, "how long a kept-alive connection may sit idle")
	headerTimeout := fl.Duration("read-header-timeout", defaultHeaderTime, "time allowed to read a request's header")
	readTimeout := fl.Duration("read-timeout", defaultReadTimeout, "time allowed to read a whole request")
	writeTimeout := fl.Duration("write-timeout", defaultWriteTimeout, "time allowed to answer a request")
	releaseMemory := fl.Int("release-memory", service.DefaultReleaseMemory, "most finished releases remembered (each for one TTL) to answer their retries ok")
	fenceMemory := fl.Int("fence-memory", service.DefaultFenceMemory, "most free resources whose last fence is remembered (inspect's lastFence); beyond, the lowest are forgotten")
	maxWait := fl.Duration("max-wait", wire.DefaultMaxWait, "longest waitMillis a call may ask for (a waiting acquire or observe)")
	maxWaiters := fl.Int("max-waiters", service.DefaultMaxWaiters, "most calls waiting at once, plus places kept for a retry; beyond, 503 too_many_waiters")
	debugAddr := fl.String("debug-addr", "", "if set, serve GET /debug/memory (a garbage collection, then live heap and RSS as JSON) and GET /debug/waiting (the waiting calls) on this loopback address")
	pgURL := fl.String("store", "", "keep the state in PostgreSQL instead of -state: a postgres:// connection string (several hosts and target_session_attrs=read-write to follow a failover); any number of coordinators may share it")
	fenceTable := fl.String("fence-table", "", "with -store: the prefix of sqlfence tables in the same database (such as lease_fence); every grant raises the resource's floor there in its own transaction")
	storeTimeout := fl.Duration("store-timeout", pgstore.DefaultTimeout, "with -store: the longest a call may take in the database; beyond it the call is answered 503 unavailable")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return errors.New("unexpected arguments: " + fmt.Sprint(fl.Args()))
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *memory && (*initDB || set["state"] || *minFence != 0 || set["store"]) {
		return errors.New("-memory keeps no state: it cannot be combined with -state, -store, -init or -min-fence")
	}
	if set["store"] {
		switch {
		case !strings.HasPrefix(*pgURL, "postgres://") && !strings.HasPrefix(*pgURL, "postgresql://"):
			return errors.New("-store takes a PostgreSQL connection string (postgres://...); the embedded store is -state")
		case set["state"] || set["min-free-bytes"]:
			return errors.New("-store keeps the state in PostgreSQL: it cannot be combined with -state or -min-free-bytes")
		case *storeTimeout <= 0:
			return errors.New("-store-timeout must be positive")
		}
	} else if set["fence-table"] || set["store-timeout"] {
		return errors.New("-fence-table and -store-timeout need -store")
	}
	if *minFence > lease.MaxFence {
		return errors.New("-min-fence must be at most " + strconv.FormatUint(lease.MaxFence, 10))
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"max-leases", *maxLeases}, {"max-id-bytes", *maxID}, {"max-body-bytes", *maxBody}, {"max-header-bytes", *maxHeader}, {"max-conns", *maxConns},
		{"release-memory", *releaseMemory}, {"fence-memory", *fenceMemory}, {"max-waiters", *maxWaiters}} {
		if v.n <= 0 {
			return errors.New("-" + v.name + " must be positive")
		}
	}
	if *maxID > wire.MaxStringBytes {
		return errors.New("-max-id-bytes must be at most " + strconv.Itoa(wire.MaxStringBytes))
	}
	for _, d := range []time.Duration{*idle, *headerTimeout, *readTimeout, *writeTimeout, *maxWait} {
		if d <= 0 {
			return errors.New("timeouts must be positive")
		}
	}
	setGCPercent(os.Getenv("GOGC"))
	clk, err := service.WallClock(*domain)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var store service.Store
	var records func() int
	if set["store"] {
		open := pgstore.Open
		if *initDB {
			open = pgstore.Create
		}
		ps, err := open(ctx, *pgURL, pgstore.Options{Domain: *domain, TTL: *ttl, MaxLeases: *maxLeases, ReleaseMemory: *releaseMemory, FenceMemory: *fenceMemory,
			FenceTable: *fenceTable, Timeout: *storeTimeout, MinFence: *minFence, Logger: log})
		if err != nil {
			return err
		}
		defer ps.Close()
		store = ps
		records = func() int { n, _ := ps.Leases(ctx); return n }
		msg := "state in PostgreSQL: every change committed before it is answered; the clock is the database server's"
		if *fenceTable != "" {
			msg += "; every grant raises its resource's floor in " + *fenceTable + "_floor in the same transaction"
		}
		log.Info(msg)
	} else {
		l, closeStore, err := openLocal(ctx, log, *memory, *initDB, *state, *minFree, service.LocalConfig{Clock: clk, TTL: *ttl,
			MaxLeases: *maxLeases, ReleaseMemory: *releaseMemory, FenceMemory: *fenceMemory, MinFence: *minFence, FenceReserve: fenceReserve})
		if err != nil {
			return err
		}
		defer closeStore()
		store, records = l, l.Leases
	}
	svc, err := service.New(service.Config{TTL: *ttl, Store: store, MaxWait: *maxWait, MaxWaiters: *maxWaiters})
	if err != nil {
		return err
	}
	if n, ok := fdLimit(); ok && *maxConns > int(n)-fdReserve {
		lowered := max(int(n)-fdReserve, 1)
		log.Warn("max-conns lowered to fit the file-descriptor limit", "from", *maxConns, "to", lowered, "nofile", n)
		*maxConns = lowered
	}
	// A call that waits gets the write timeout on top of its wait.
	opts := wire.HandlerOptions{MaxIDBytes: *maxID, MaxBodyBytes: *maxBody, MaxWait: *maxWait, WaitSlack: *writeTimeout}
	if !*quiet {
		opts.Logger = log
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	conns := newConnLimit(*maxConns)
	srv := &http.Server{
		Handler:           wire.NewHandler(svc, opts),
		ReadHeaderTimeout: *headerTimeout,
		ReadTimeout:       *readTimeout,
		WriteTimeout:      *writeTimeout,
		IdleTimeout:       *idle,
		MaxHeaderBytes:    *maxHeader,
		ConnState:         conns.track,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Waiting calls are answered at once when the server shuts down, so
	// that they do not hold the shutdown up.
	srv.RegisterOnShutdown(svc.StopWaiting)
	if *debugAddr != "" {
		dln, err := listenDebug(*debugAddr)
		if err != nil {
			ln.Close()
			return err
		}
		dsrv := &http.Server{Handler: debugHandler(records, svc), ReadHeaderTimeout: *headerTimeout}
		go func() { _ = dsrv.Serve(dln) }()
		defer dsrv.Close()
		fmt.Fprintf(stderr, "debug on http://%s/debug/memory\n", dln.Addr())
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(netutil.LimitListener(ln, *maxConns)) }()
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go sweep(sweepCtx, svc, *ttl/2, log)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// sweep deletes the records of expired leases every interval (at least
// 10ms), so memory and disk stay proportional to the live leases.
func sweep(ctx context.Context, svc *service.Service, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			n, err := svc.Sweep(ctx)
			if err != nil {
				if ctx.Err() == nil {
					log.Error("sweeping expired leases failed", "err", err)
				}
				break
			}
			if n == 0 {
				break
			}
		}
	}
}

// fenceReserve is how far ahead of the fences issued the stored fence mark
// is raised (service.LocalConfig.FenceReserve): a restart resumes above the
// mark, so up to this many fence numbers are skipped at each restart.
const fenceReserve = 1024

// defaultGCPercent is the garbage collector's target unless GOGC is set.
// The coordinator's live heap is small, so with Go's default (100) the
// heap stays near its 4 MB minimum and every few thousand calls trigger a
// collection; 400 collects a quarter as often.
const defaultGCPercent = 400

// setGCPercent applies defaultGCPercent unless the GOGC environment
// variable (gogc) already chose, which the runtime has then applied.
func setGCPercent(gogc string) {
	if gogc == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// openLocal opens the embedded store, in memory or on Pebble in dir
// (created first with create), and returns what closes it.
func openLocal(ctx context.Context, log *slog.Logger, memory, create bool, dir string, minFree uint64, cfg service.LocalConfig) (*service.Local, func(), error) {
	closeStore := func() {}
	if memory {
		log.Warn("state in memory only (-memory): NOT durable; a restart forgets every lease and issues fences from 1 again")
	} else {
		open := pebblestore.Open
		if create {
			open = pebblestore.Create
		}
		ps, err := open(dir, pebblestore.Options{Logger: log, MinFreeBytes: minFree})
		if err != nil {
			return nil, nil, err
		}
		closeStore = func() { ps.Close() }
		cfg.Persist = ps
		log.Info("state in " + dir + " (Pebble): every grant and renewal synced before it is answered, releases with the next write")
	}
	store, err := service.NewLocal(cfg)
	if err == nil {
		err = store.Load(ctx)
	}
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	if cfg.MinFence > 0 {
		log.Info("every new fence is at least -min-fence", "minFence", cfg.MinFence, "next", store.Issued()+1)
	}
	return store, closeStore, nil
}
