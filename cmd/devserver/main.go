// Command devserver serves the playground on 127.0.0.1: the page from one
// folder at / and the lease-fence JavaScript module from another under
// /lease-fence/. It serves regular files only, never lists a directory, never
// follows a path outside the two folders, and sends .wasm as application/wasm
// so browsers can compile it while it streams.
//
//	go run ./cmd/devserver -port 8080 -web web -module wasm/js [-coordinator out/bin/coordinator] [-wrangler node_modules/.bin/wrangler]
//
// With -coordinator (cmd/coordinator's binary) and -wrangler (the Worker
// under wrangler dev), it also serves the page's live mode under /live/
// (live.go): coordinators it starts, reached through the page's own origin.
//
// The first line it prints is the URL it listens on, so a caller that passes
// -port 0 can read the port it got.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
}

// run parses args, listens, prints the URL as the first line of stdout and
// serves until ctx is done or the process gets SIGINT/SIGTERM.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("devserver", flag.ContinueOnError)
	port := fs.Int("port", 8080, "TCP port on 127.0.0.1 (0 picks a free one)")
	web := fs.String("web", "web", "folder served at /")
	module := fs.String("module", "wasm/js", "folder served at "+ModulePrefix)
	quiet := fs.Bool("quiet", false, "do not log requests to stderr")
	coordinator := fs.String("coordinator", "", "cmd/coordinator's binary: live mode runs the page's agents against coordinators it starts (-memory, on free loopback ports)")
	wrangler := fs.String("wrangler", "", "wrangler's binary: live mode also runs against the Worker under wrangler dev, started in -worker-dir")
	workerDir := fs.String("worker-dir", "wasm/worker", "the Worker's folder (its wrangler.toml), for -wrangler")
	workerURL := fs.String("worker", "", "a Worker already running (instead of -wrangler)")
	workerTTL := fs.Duration("worker-ttl", 4*time.Second, "the lease length of the Worker live mode starts")
	workerLog := fs.String("worker-log", "", "a file that receives wrangler dev's output (appended), for -wrangler")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("-port %d is out of range 0-65535", *port)
	}
	if *workerTTL < time.Millisecond || *workerTTL > maxLiveTTL {
		return fmt.Errorf("-worker-ttl %v is out of range 1ms-%v", *workerTTL, maxLiveTTL)
	}
	h, err := NewHandler(*web, *module)
	if err != nil {
		return err
	}
	defer h.Close()
	var liveLog io.Writer = os.Stderr
	if *quiet {
		liveLog = io.Discard
	}
	opts := LiveOptions{Coordinator: *coordinator, Wrangler: *wrangler, WorkerDir: *workerDir, WorkerURL: *workerURL, WorkerTTL: *workerTTL, Log: liveLog}
	if *workerLog != "" {
		f, err := os.OpenFile(*workerLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.WorkerLog = f
	}
	live := NewLive(opts)
	defer live.Close()
	mux := http.NewServeMux()
	mux.Handle(LivePrefix, securityHeaders(live))
	mux.Handle("/", h)
	var handler http.Handler = mux
	if !*quiet {
		handler = logRequests(mux, os.Stderr)
	}

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(*port)))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	fmt.Fprintf(stdout, "http://%s/\n", ln.Addr())
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		h.Warm()
	}()
	defer func() { <-warmed }() // before h.Close

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// securityHeaders adds the headers every answer of the server carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		next.ServeHTTP(w, r)
	})
}

// setSecurityHeaders sets the headers every answer of the server carries:
// the Handler's files and live mode's answers alike.
func setSecurityHeaders(hdr http.Header) {
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// logRequests writes one line per request: method, path, status.
func logRequests(next http.Handler, w io.Writer) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: rw, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		fmt.Fprintf(w, "%s %s %d\n", r.Method, r.URL.EscapedPath(), sw.status)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
