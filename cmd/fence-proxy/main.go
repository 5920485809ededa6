//go:build !js && !wasip1

// Command fence-proxy is the fence gate in front of an HTTP API: a reverse
// proxy (package gates/httpfence) that forwards reads as they are and admits
// a write (any method but GET, HEAD, OPTIONS) only if its Lease-Fence header
// carries a fence not below the highest one admitted for its resource. The
// floor is raised durably, in an SQLite state file (gates/sqlfence's tables),
// before the write is forwarded; a stale write is refused with 409, logged in
// the same file, and never reaches the upstream. Writes to one resource with
// the fence of its floor are forwarded together; a higher fence waits until
// they have all been answered (-exclusive: one write at a time).
//
// Usage:
//
//	fence-proxy -init -upstream http://127.0.0.1:9000 [-state fence-proxy.db]   # the first time
//	fence-proxy -upstream http://127.0.0.1:9000 [-listen 127.0.0.1:8081] [-state fence-proxy.db]
//
// The state file must exist unless -init is given (which refuses one that
// does): a proxy that started over without its floors would admit the writes
// they refuse. A file that is not fence-proxy's, is damaged, or is in use by
// another fence-proxy is refused. The first line it prints is
// "listening on http://HOST:PORT". See docs/fencing.md.
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
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "fence-proxy:", err)
		os.Exit(1)
	}
}

// Defaults of the flags that are not httpfence's.
const (
	defaultStatePath   = "fence-proxy.db"
	defaultMaxConns    = 1000
	defaultHeaderBytes = 64 << 10
	defaultHeaderTime  = 5 * time.Second
	defaultReadTime    = 30 * time.Second
	defaultIdleTime    = 60 * time.Second
)

// run serves until ctx ends, then shuts down gracefully. onAdmit, if not
// nil, becomes httpfence.Options.OnAdmit (tests stop the proxy there).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, onAdmit func(context.Context, fence.Token)) error {
	fl := flag.NewFlagSet("fence-proxy", flag.ContinueOnError)
	fl.SetOutput(stderr)
	listen := fl.String("listen", "127.0.0.1:8081", "address to listen on (port 0 picks a free one)")
	upstream := fl.String("upstream", "", "the API to stand in front of, e.g. http://127.0.0.1:9000 (required)")
	statePath := fl.String("state", defaultStatePath, "the state file (SQLite: the floors and the refusals); must exist unless -init")
	initState := fl.Bool("init", false, "create the state file (refused if it exists), then serve")
	quiet := fl.Bool("quiet", false, "log refusals and failures only, not each forwarded write")
	upstreamTimeout := fl.Duration("upstream-timeout", httpfence.DefaultUpstreamTimeout, "time allowed for one request to the upstream, answer body included")
	queueTimeout := fl.Duration("queue-timeout", 0, "time a write may wait for its resource's turn (0: the upstream timeout)")
	maxQueue := fl.Int("max-queue", httpfence.DefaultMaxQueue, "writes that may wait for their turn on a resource; more are answered 503")
	exclusive := fl.Bool("exclusive", false, "forward the writes to a resource one at a time, equal fences too (default: writes with the same fence are forwarded together)")
	maxBody := fl.Int64("max-body-bytes", httpfence.DefaultMaxBodyBytes, "largest write body, in bytes (413 above)")
	maxBuffer := fl.Int64("max-buffer-bytes", httpfence.DefaultMaxBufferBytes, "write bodies held in memory at once, in bytes (503 busy above)")
	maxHeader := fl.Int("max-header-bytes", defaultHeaderBytes, "largest request header, in bytes (431 above)")
	maxConns := fl.Int("max-conns", defaultMaxConns, "most open client connections")
	headerTimeout := fl.Duration("read-header-timeout", defaultHeaderTime, "time allowed to read a request's header")
	readTimeout := fl.Duration("read-timeout", defaultReadTime, "time allowed to read a whole request, body included")
	idleTimeout := fl.Duration("idle-timeout", defaultIdleTime, "how long a kept-alive client connection may sit idle")
	shutdownTimeout := fl.Duration("shutdown-timeout", 0, "on SIGTERM or SIGINT, time given to the requests in progress (0: the upstream timeout plus 5s)")
	rejHistory := fl.Int("rejection-history", httpfence.DefaultRejectionHistory, "refusals kept in memory for GET /.lease-fence/rejections/stream to resume from")
	maxStreams := fl.Int("max-streams", httpfence.DefaultMaxStreams, "refusal streams served at once; more are answered 503")
	streamBuffer := fl.Int("stream-buffer", httpfence.DefaultStreamBuffer, "refusals that may wait for one stream's reader; a reader further behind gets an overflow event and is closed")
	debugAddr := fl.String("debug-addr", "", "if set, serve the Go runtime's profiles (GET /debug/pprof/) on this loopback address")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fl.Args())
	}
	up, err := url.Parse(*upstream)
	switch {
	case *upstream == "":
		return errors.New("-upstream is required, e.g. -upstream http://127.0.0.1:9000")
	case err != nil:
		return fmt.Errorf("-upstream: %w", err)
	case up.Scheme != "http" && up.Scheme != "https", up.Host == "":
		return fmt.Errorf("-upstream must be an http:// or https:// URL with a host, not %q", *upstream)
	}
	for _, v := range []struct {
		name string
		n    int64
	}{{"max-queue", int64(*maxQueue)}, {"max-body-bytes", *maxBody}, {"max-buffer-bytes", *maxBuffer}, {"max-header-bytes", int64(*maxHeader)}, {"max-conns", int64(*maxConns)},
		{"rejection-history", int64(*rejHistory)}, {"max-streams", int64(*maxStreams)}, {"stream-buffer", int64(*streamBuffer)}} {
		if v.n <= 0 {
			return errors.New("-" + v.name + " must be positive")
		}
	}
	for _, d := range []time.Duration{*upstreamTimeout, *headerTimeout, *readTimeout, *idleTimeout} {
		if d <= 0 {
			return errors.New("timeouts must be positive")
		}
	}
	if *queueTimeout < 0 || *shutdownTimeout < 0 {
		return errors.New("timeouts must not be negative")
	}
	if *shutdownTimeout == 0 {
		*shutdownTimeout = *upstreamTimeout + 5*time.Second
	}
	if *debugAddr != "" {
		if err := checkDebugAddr(*debugAddr); err != nil {
			return err
		}
	}

	log := slog.New(slog.NewTextHandler(stderr, nil))
	var st *state
	if *initState {
		st, err = createState(ctx, *statePath)
	} else {
		st, err = openState(ctx, *statePath)
	}
	if err != nil {
		return err
	}
	defer st.Close()

	plog := log
	if *quiet {
		plog = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	proxy, err := httpfence.New(httpfence.Options{
		Upstream:         up,
		Store:            st.store,
		UpstreamTimeout:  *upstreamTimeout,
		QueueTimeout:     *queueTimeout,
		MaxBodyBytes:     *maxBody,
		MaxBufferBytes:   *maxBuffer,
		MaxQueue:         *maxQueue,
		Exclusive:        *exclusive,
		Logger:           plog,
		OnAdmit:          onAdmit,
		RejectionHistory: *rejHistory,
		MaxStreams:       *maxStreams,
		StreamBuffer:     *streamBuffer,
	})
	if err != nil {
		return err
	}
	defer proxy.CloseIdleConnections()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if *debugAddr != "" {
		dln, err := net.Listen("tcp", *debugAddr)
		if err != nil {
			ln.Close()
			return err
		}
		dsrv := &http.Server{Handler: debugHandler(), ReadHeaderTimeout: *headerTimeout}
		go func() { _ = dsrv.Serve(dln) }()
		defer dsrv.Close()
	}
	srv := &http.Server{
		Handler:           proxy,
		ReadHeaderTimeout: *headerTimeout,
		ReadTimeout:       *readTimeout,
		IdleTimeout:       *idleTimeout,
		MaxHeaderBytes:    *maxHeader,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for the requests in progress; the refusal streams
	// would never end by themselves.
	srv.RegisterOnShutdown(proxy.Drain)
	log.Info("fence-proxy", "upstream", up.String(), "state", *statePath)
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(netutil.LimitListener(ln, *maxConns)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Stop accepting; let the requests in progress (queued writes
	// included) finish, within the shutdown timeout.
	shut, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutting down: %w (requests still in progress were cut off)", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
