//go:build !js && !wasip1

package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lease-fence/lease-fence/service/auth"
)

// drain ends the server after ctx ended (SIGTERM or SIGINT): /readyz
// answers 503 at once, the listener stops accepting, idle connections are
// closed, the calls in flight are answered (waiting calls at once, as if
// their wait had ended: Service.StopWaiting) and their connections closed
// after their answer; then the sweep stops and the state is closed, which
// makes every change answered durable (Pebble syncs its log at close).
// All of it within timeout: calls still open then are cut off, and drain
// returns an error.
func drain(srv *http.Server, errc <-chan error, fr *front, stopSweep func(), closeStore func() error, timeout time.Duration, log *slog.Logger) error {
	start := time.Now()
	fr.draining.Store(true)
	log.Info("draining: no new connections; answering the calls in flight (waiting calls at once)", "timeout", timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var cut error
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
		cut = errors.New("the drain took longer than -drain-timeout " + timeout.String() + ": the connections still open were closed")
		log.Error(cut.Error())
	}
	// The sessions are not the server's connections any more: each ends
	// after the call it is answering, if any.
	if fr.sessions != nil {
		if err := fr.sessions.Close(ctx); err != nil && cut == nil {
			cut = errors.New("the drain took longer than -drain-timeout " + timeout.String() + ": the sessions still open were closed")
			log.Error(cut.Error())
		}
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// Calls cut off above may still be deciding: the store refuses what
	// they write once it is closed (they were never answered).
	stopSweep()
	if err := closeStore(); err != nil {
		return errors.New("closing the state: " + err.Error())
	}
	if cut != nil {
		return cut
	}
	log.Info("drained: every change answered is durable, and the state is closed", "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// reload reads the tokens file and the TLS files again (SIGHUP). A file
// that is refused leaves what it would have replaced in force, and the log
// says why. Leases are not touched.
func reload(log *slog.Logger, authFile string, guard *auth.Guard, tlsf *tlsFiles) {
	if guard == nil && tlsf == nil {
		log.Info("SIGHUP: nothing to read again (no -auth, no -tls-cert)")
	}
	if guard != nil {
		set, err := auth.Load(authFile)
		if err != nil {
			log.Error("SIGHUP: the tokens file is refused; the tokens read before stay in force", "err", err.Error())
		} else {
			guard.Swap(set)
			log.Info("SIGHUP: tokens read again from "+authFile, "tokens", len(set.Tokens()))
			warnExpired(log, set, time.Now())
		}
	}
	if tlsf != nil {
		if err := tlsf.load(); err != nil {
			log.Error("SIGHUP: the TLS files are refused; the certificate read before stays in force", "err", err.Error())
		} else {
			log.Info("SIGHUP: TLS certificate read again from " + tlsf.cert)
		}
	}
}

// warnExpired logs each token of s that has expired at now: the file is
// good, but those entries are refused (401) until they are removed or
// given a later "expires".
func warnExpired(log *slog.Logger, s *auth.Set, now time.Time) {
	for _, t := range s.Tokens() {
		if t.Expired(now) {
			log.Warn("the token "+strconv.Quote(t.Name)+" expired at "+t.Expires.UTC().Format(time.RFC3339)+": its calls are refused with 401",
				"token", t.Name)
		}
	}
}

// checkListen refuses to listen on addr, if it is not a loopback address,
// for a server without tokens, unless insecure (-insecure-listen) says the
// network is trusted; it is checked before anything listens. Tokens
// without TLS on such an address are allowed (TLS may end at a proxy in
// front), with a warning.
func checkListen(addr string, tokens, insecure, tls bool, log *slog.Logger) error {
	loopback, err := isLoopback(addr)
	if err != nil {
		return errors.New("-addr: " + err.Error())
	}
	if loopback {
		return nil
	}
	switch {
	case !tokens && !insecure:
		return errors.New("refusing to listen on " + addr + " (not a loopback address) without -auth: anyone who reaches it could " +
			"take or release any lease. Give -auth tokens.json, or -insecure-listen if every client on that network is trusted")
	case !tokens:
		log.Warn("listening on " + addr + " without tokens (-insecure-listen): anyone who reaches it can take any lease")
	case !tls:
		log.Warn("listening on " + addr + " without TLS: tokens and secrets travel in clear unless a proxy in front adds TLS")
	}
	return nil
}

// checkMetricsListen refuses a -metrics-addr that is not a loopback
// address unless its /metrics is behind the tokens (-auth: a token with
// "metrics": true, as on the API listener) or -insecure-listen says the
// network is trusted; it reports whether the address is loopback (where
// /metrics is served without a token, to a local scraper).
func checkMetricsListen(addr string, tokens, insecure, tls bool, log *slog.Logger) (loopback bool, err error) {
	loopback, err = isLoopback(addr)
	if err != nil {
		return false, errors.New("-metrics-addr: " + err.Error())
	}
	switch {
	case loopback:
	case !tokens && !insecure:
		return false, errors.New("refusing -metrics-addr " + addr + " (not a loopback address) without -auth: anyone who reaches it could " +
			"read the metrics. Put it on loopback, give -auth (a token with \"metrics\": true then reads it), or -insecure-listen if every client on that network is trusted")
	case !tokens:
		log.Warn("metrics on " + addr + " without tokens (-insecure-listen): anyone who reaches it can read them")
	case !tls:
		log.Warn("metrics on " + addr + " without TLS: the tokens that read them travel in clear unless a proxy in front adds TLS")
	}
	return loopback, nil
}

// isLoopback reports whether addr (host:port) is a loopback address; an
// empty host (every address) is not. (A variable: the tests, which listen
// on loopback only, make it say no to run a server as it runs elsewhere.)
var isLoopback = func(addr string) (bool, error) {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return false, err
	}
	return a.IP != nil && a.IP.IsLoopback(), nil
}

// listFlag is a flag that may be repeated, each value a comma-separated
// list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// opsHandler is what -metrics-addr serves: /metrics (without tokens on
// loopback; with guarded, only to a token with "metrics": true), /healthz
// and /readyz. It stays open while the server drains (its /readyz then
// answers 503), and closes last.
func opsHandler(m *metrics, fr *front, guarded bool) http.Handler {
	h := m.handler()
	if guarded {
		h = http.HandlerFunc(fr.scrape)
	}
	return fr.route(h, http.NotFoundHandler())
}
