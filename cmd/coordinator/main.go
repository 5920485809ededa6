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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/auth"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/pebblestore"
	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
)

func main() {
	// SIGINT or SIGTERM drains (-drain-timeout); a second one exits at
	// once. SIGHUP reads the tokens file and the TLS files again.
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	ctx, stop := context.WithCancel(context.Background())
	hup := make(chan struct{}, 1)
	go func() {
		for s := range sig {
			switch {
			case s == syscall.SIGHUP:
				select {
				case hup <- struct{}{}:
				default: // a reload is pending already
				}
			case ctx.Err() == nil:
				stop()
			default:
				fmt.Fprintln(os.Stderr, "coordinator: a second "+s.String()+" while draining: exiting at once")
				os.Exit(1)
			}
		}
	}()
	if err := serve(ctx, os.Args[1:], os.Stdout, os.Stderr, hup); err != nil {
		// One line, whatever the error joins.
		fmt.Fprintln(os.Stderr, "coordinator:", strings.ReplaceAll(err.Error(), "\n", ": "))
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

// serve serves until ctx ends, then drains, reading the tokens file and
// the TLS files again at each receive from hup. It writes the listening
// line to stdout and logs to stderr.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, hup <-chan struct{}) error {
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
	watchBuffer := fl.Int("watch-buffer", service.DefaultWatchBuffer, "most events queued for one watcher (POST /v1/watch); a watcher that falls further behind gets an overflow event and is closed")
	watchHistory := fl.Int("watch-history", service.DefaultWatchHistory, "most recent events kept for watchers that resume after a disconnect")
	maxWatchers := fl.Int("max-watchers", service.DefaultMaxWatchers, "most watchers at once; beyond, 503 too_many_watchers")
	maxWatchersPerToken := fl.Int("max-watchers-per-token", service.DefaultMaxWatchersPerToken, "with -auth, most watchers of one token at once; beyond, 429 too_many_token_watchers")
	authFile := fl.String("auth", "", "the tokens file (JSON: name, tokenSha256, resources, holders, maxLeases, maxWaiters, metrics, expires): every call then needs Authorization: Bearer <token>, within the token's scopes and limits; read again at SIGHUP")
	insecure := fl.Bool("insecure-listen", false, "allow -addr and -metrics-addr on an address other than loopback without -auth (anyone who reaches them can take any lease, read the metrics)")
	tlsCert := fl.String("tls-cert", "", "serve HTTPS with this PEM certificate (chain); with -tls-key; read again at SIGHUP")
	tlsKey := fl.String("tls-key", "", "the PEM private key of -tls-cert")
	tlsClientCA := fl.String("tls-client-ca", "", "require a client certificate signed by a CA in this PEM file (mutual TLS); read again at SIGHUP")
	metricsAddr := fl.String("metrics-addr", "", "serve GET /metrics (Prometheus), /healthz and /readyz on this address of its own (it stays open while the server drains): on loopback without tokens; elsewhere as the API (with -auth, /metrics for a token with \"metrics\": true; TLS with -tls-cert), refused without -auth unless -insecure-listen; unset: on the API listener")
	var corsOrigins listFlag
	fl.Var(&corsOrigins, "cors-origin", "let pages of this origin (scheme://host[:port], or *) call the API from a browser; repeat, or separate with commas")
	drainTimeout := fl.Duration("drain-timeout", 10*time.Second, "at SIGTERM or SIGINT, how long to finish the calls in flight before closing what is left")
	debugAddr := fl.String("debug-addr", "", "if set, serve GET /debug/memory (a garbage collection, then live heap and RSS as JSON) and GET /debug/waiting (the waiting calls) on this loopback address")
	ui := fl.Bool("ui", false, "serve the console, a live picture of the leases, at /ui/ (its files are in the binary; it calls this API with the page's token)")
	var uiGates listFlag
	fl.Var(&uiGates, "ui-gates", "with -ui: the base URLs of fence-proxies whose refusals the console draws (comma-separated or repeated); the coordinator reads their /.lease-fence/rejections/stream")
	uiGateHistory := fl.Int("ui-gate-history", defaultGateHistory, "with -ui-gates: most refusals kept per gate for pages that reconnect")
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
	gates, err := parseGates(uiGates)
	if err != nil {
		return err
	}
	if !*ui && (len(gates) > 0 || set["ui-gate-history"]) {
		return errors.New("-ui-gates and -ui-gate-history need -ui")
	}
	if *minFence > lease.MaxFence {
		return errors.New("-min-fence must be at most " + strconv.FormatUint(lease.MaxFence, 10))
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"max-leases", *maxLeases}, {"max-id-bytes", *maxID}, {"max-body-bytes", *maxBody}, {"max-header-bytes", *maxHeader}, {"max-conns", *maxConns},
		{"release-memory", *releaseMemory}, {"fence-memory", *fenceMemory}, {"max-waiters", *maxWaiters},
		{"watch-buffer", *watchBuffer}, {"ui-gate-history", *uiGateHistory}, {"watch-history", *watchHistory}, {"max-watchers", *maxWatchers}, {"max-watchers-per-token", *maxWatchersPerToken}} {
		if v.n <= 0 {
			return errors.New("-" + v.name + " must be positive")
		}
	}
	if *maxID > wire.MaxStringBytes {
		return errors.New("-max-id-bytes must be at most " + strconv.Itoa(wire.MaxStringBytes))
	}
	for _, d := range []time.Duration{*idle, *headerTimeout, *readTimeout, *writeTimeout, *maxWait, *drainTimeout} {
		if d <= 0 {
			return errors.New("timeouts must be positive")
		}
	}
	if (*tlsCert == "") != (*tlsKey == "") || (*tlsClientCA != "" && *tlsCert == "") {
		return errors.New("-tls-cert and -tls-key go together, and -tls-client-ca needs them")
	}
	if err := httpapi.CheckOrigins(corsOrigins); err != nil {
		return errors.New("-cors-origin: " + err.Error())
	}
	var tokens *auth.Set
	if *authFile != "" {
		var err error
		if tokens, err = auth.Load(*authFile); err != nil {
			return err
		}
	}
	var tlsf *tlsFiles
	if *tlsCert != "" {
		tlsf = &tlsFiles{cert: *tlsCert, key: *tlsKey, clientCA: *tlsClientCA}
		if err := tlsf.load(); err != nil {
			return err
		}
	}
	setGCPercent(os.Getenv("GOGC"))
	clk, err := service.WallClock(*domain)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := checkListen(*addr, tokens != nil, *insecure, tlsf != nil, log); err != nil {
		return err
	}
	// On an address other than loopback, the metrics listener is served as
	// the API listener is: its /metrics behind the tokens, over TLS.
	metricsGuarded, metricsTLS := false, false
	if *metricsAddr != "" {
		loopback, err := checkMetricsListen(*metricsAddr, tokens != nil, *insecure, tlsf != nil, log)
		if err != nil {
			return err
		}
		metricsGuarded, metricsTLS = !loopback && tokens != nil, !loopback && tlsf != nil
	}
	limits := service.Limits{MaxLeases: *maxLeases, ReleaseMemory: *releaseMemory, FenceMemory: *fenceMemory}
	syncs := newSyncHistogram()
	var store service.Store
	var records func() int
	var stats storeStats
	closeStore := func() error { return nil }
	defer func() { closeStore() }()
	watched := &watchedStore{log: log}
	if set["store"] {
		open := pgstore.Open
		if *initDB {
			open = pgstore.Create
		}
		ps, err := open(ctx, *pgURL, pgstore.Options{Domain: *domain, TTL: *ttl, Limits: limits,
			FenceTable: *fenceTable, Timeout: *storeTimeout, MinFence: *minFence, Logger: log})
		if err != nil {
			return err
		}
		closeStore = func() error { ps.Close(); closeStore = func() error { return nil }; return nil }
		store = ps
		records = func() int { n, _ := ps.Leases(ctx); return n }
		stats.leases = records
		stats.issued = func() uint64 { n, _ := ps.Issued(ctx); return n }
		watched.syncs = syncs // a change's commit, timed around the decision
		msg := "state in PostgreSQL: every change committed before it is answered; the clock is the database server's"
		if *fenceTable != "" {
			msg += "; every grant raises its resource's floor in " + *fenceTable + "_floor in the same transaction"
		}
		log.Info(msg)
	} else {
		l, closeLocal, err := openLocal(ctx, log, *memory, *initDB, *state, *minFree, syncs, service.LocalConfig{Clock: clk, TTL: *ttl,
			Limits: limits, MinFence: *minFence, FenceReserve: fenceReserve})
		if err != nil {
			return err
		}
		closeStore = func() error { err := closeLocal(); closeStore = func() error { return nil }; return err }
		store, records = l, l.Leases
		stats = storeStats{leases: l.Leases, issued: l.Issued, expired: l.Expired}
		watched.reported = func(err error) bool { return errors.Is(err, pebblestore.ErrDiskFull) }
	}
	watched.Store = store
	svc, err := service.New(service.Config{TTL: *ttl, Store: watched, MaxWait: *maxWait, MaxWaiters: *maxWaiters,
		WatchBuffer: *watchBuffer, WatchHistory: *watchHistory, MaxWatchers: *maxWatchers, MaxWatchersPerToken: *maxWatchersPerToken})
	if err != nil {
		return err
	}
	met := newMetrics(svc, stats, syncs)
	if n, ok := fdLimit(); ok && *maxConns > int(n)-fdReserve {
		lowered := max(int(n)-fdReserve, 1)
		log.Warn("max-conns lowered to fit the file-descriptor limit", "from", *maxConns, "to", lowered, "nofile", n)
		*maxConns = lowered
	}
	// A call that waits gets the write timeout on top of its wait.
	opts := httpapi.HandlerOptions{MaxIDBytes: *maxID, MaxBodyBytes: *maxBody, MaxWait: *maxWait, WaitSlack: *writeTimeout,
		Answered: met.answered}
	if !*quiet {
		opts.Logger = log
	}
	fr := &front{svc: svc, cors: corsOrigins, metrics: met, ownListener: *metricsAddr != "", log: log}
	if tokens != nil {
		gopts := auth.Options{Answered: met.answered}
		if !*quiet {
			gopts.Logger = log
		}
		fr.guard = auth.NewGuard(tokens, gopts)
		opts.Authorize, opts.Scope = fr.guard.Authorize, fr.guard.Scope
		log.Info("tokens from "+*authFile+": every call needs Authorization: Bearer <token>", "tokens", len(tokens.Tokens()))
		warnExpired(log, tokens, time.Now())
	}
	conns := newConnLimit(*maxConns)
	if tokens == nil {
		// Calls on a session are authorized by nothing but the connection's
		// first request: a coordinator with tokens checks each call's own.
		opts.Sessions = httpapi.NewSessions(httpapi.SessionOptions{Idle: *idle, Write: *writeTimeout, Timed: met.timedCall,
			ConnState: conns.track})
		fr.sessions = opts.Sessions
	}
	fr.api = httpapi.NewHandler(svc, opts)
	var relay *gateRelay
	if len(gates) > 0 {
		relay = newGateRelay(gates, *uiGateHistory, &http.Client{}, log)
		defer relay.stop()
	}
	if *ui {
		if fr.ui, err = newConsole(relay, fr.guard); err != nil {
			return err
		}
		log.Info("console at /ui/", "gates", len(gates))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}

	srv := &http.Server{
		Handler:           fr.handler(),
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
	if relay != nil {
		srv.RegisterOnShutdown(relay.cancel) // the pages' refusal streams end
	}
	var side []*http.Server // the debug and metrics servers, closed last
	defer func() {
		for _, s := range side {
			s.Close()
		}
	}()
	if *debugAddr != "" {
		dln, err := listenDebug(*debugAddr)
		if err != nil {
			ln.Close()
			return err
		}
		dsrv := &http.Server{Handler: debugHandler(records, svc), ReadHeaderTimeout: *headerTimeout}
		go func() { _ = dsrv.Serve(dln) }()
		side = append(side, dsrv)
		fmt.Fprintf(stderr, "debug on http://%s/debug/memory\n", dln.Addr())
	}
	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			ln.Close()
			return errors.New("-metrics-addr: " + err.Error())
		}
		msrv := &http.Server{Handler: opsHandler(met, fr, metricsGuarded), ReadHeaderTimeout: *headerTimeout, ErrorLog: srv.ErrorLog}
		mscheme := "http"
		if metricsTLS {
			mscheme, msrv.TLSConfig = "https", tlsf.config()
			go func() { _ = msrv.ServeTLS(mln, "", "") }()
		} else {
			go func() { _ = msrv.Serve(mln) }()
		}
		side = append(side, msrv)
		msg := "metrics on " + mscheme + "://" + mln.Addr().String() + "/metrics"
		if metricsGuarded {
			msg += " (for a token with \"metrics\": true)"
		}
		log.Info(msg)
	}
	scheme := "http"
	errc := make(chan error, 1)
	if tlsf != nil {
		scheme = "https"
		srv.TLSConfig = tlsf.config()
		go func() { errc <- srv.ServeTLS(netutil.LimitListener(ln, *maxConns), "", "") }()
	} else {
		go func() { errc <- srv.Serve(netutil.LimitListener(ln, *maxConns)) }()
	}
	fmt.Fprintf(stdout, "listening on %s://%s\n", scheme, ln.Addr())
	sweepCtx, cancelSweep := context.WithCancel(ctx)
	swept := make(chan struct{})
	stopSweep := func() { cancelSweep(); <-swept }
	defer stopSweep()
	go func() { defer close(swept); sweep(sweepCtx, svc, *ttl/2, log) }()
	for {
		select {
		case err := <-errc:
			return err
		case <-hup:
			reload(log, *authFile, fr.guard, tlsf)
			continue
		case <-ctx.Done():
		}
		break
	}
	return drain(srv, errc, fr, stopSweep, func() error { return closeStore() }, *drainTimeout, log)
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
func openLocal(ctx context.Context, log *slog.Logger, memory, create bool, dir string, minFree uint64, syncs prometheus.Histogram,
	cfg service.LocalConfig) (*service.Local, func() error, error) {
	closeStore := func() error { return nil }
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
		closeStore = ps.Close
		cfg.Persist = timedPersister{Persister: ps, syncs: syncs}
		log.Info("state in " + dir + " (Pebble): every grant and renewal synced before it is answered, releases with the next synced write or within 2 ms")
	}
	store, err := service.NewLocal(cfg)
	if err == nil {
		err = store.Load(ctx)
	}
	if err != nil && !memory && errors.Is(err, service.ErrUnavailable) {
		// The state was read and checked; the raised fence mark, written
		// before anything is served, could not be.
		err = errors.New("the state " + dir + " cannot be written, and the fence mark is raised (written) before the coordinator serves: " +
			strings.ReplaceAll(strings.TrimPrefix(err.Error(), service.ErrUnavailable.Error()+"\n"), "\n", ": ") +
			"; start again once it can be written (free some space, or lower -min-free-bytes)")
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
