//go:build !js && !wasip1

package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/auth"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// front is what the API listener serves: the four calls (behind CORS and
// the tokens, if configured), /healthz, /readyz and, unless it has a
// listener of its own, /metrics (behind the tokens: one with "metrics":
// true).
type front struct {
	api         http.Handler // the wire handler
	svc         *service.Service
	guard       *auth.Guard // nil without -auth
	cors        []string
	metrics     *metrics
	ownListener bool         // /metrics is served on -metrics-addr, not here
	ui          http.Handler // the console (-ui), or nil
	draining    atomic.Bool
	log         *slog.Logger
	tokenWarned atomic.Bool       // a call without -auth carried a token, and it was logged
	sessions    *httpapi.Sessions // the call sessions (without -auth), closed by drain
}

func (f *front) handler() http.Handler {
	api := f.api
	if f.guard != nil {
		api = f.guard.Middleware(api)
	} else {
		api = f.warnUncheckedTokens(api)
	}
	if len(f.cors) > 0 {
		api = httpapi.CORS(f.cors, api)
	}
	api = f.metrics.timed(api)
	var scrape http.Handler = http.HandlerFunc(f.scrape)
	if f.ownListener {
		scrape = api // 404 from the API, like any other path
	}
	return f.route(scrape, api)
}

// warnUncheckedTokens serves the calls of a server started without -auth
// as next does, and logs the first call that carries an Authorization
// header, once per process: its client sends a token it expects to be
// checked, and nothing checks it.
func (f *front) warnUncheckedTokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.log != nil && r.Header.Get("Authorization") != "" && !f.tokenWarned.Load() && f.tokenWarned.CompareAndSwap(false, true) {
			f.log.Warn("a call carried a token (Authorization header), but this coordinator was started without -auth: tokens are not checked, "+
				"and any client that reaches it may take or release any lease. Start it with -auth tokens.json, or stop sending the token. "+
				"Logged once", "remote", r.RemoteAddr, "path", r.URL.Path)
		}
		next.ServeHTTP(w, r)
	})
}

// route serves /healthz and /readyz, /metrics with metrics, and every
// other path with other.
func (f *front) route(metrics, other http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			f.health(w, r)
		case "/readyz":
			f.ready(w, r)
		case "/metrics":
			metrics.ServeHTTP(w, r)
		case "/ui":
			if f.ui == nil {
				other.ServeHTTP(w, r)
				return
			}
			http.Redirect(w, r, uiPrefix, http.StatusMovedPermanently)
		default:
			if f.ui != nil && strings.HasPrefix(r.URL.Path, uiPrefix) {
				f.ui.ServeHTTP(w, r)
				return
			}
			other.ServeHTTP(w, r)
		}
	})
}

// health answers /healthz: the process is alive and serving.
func (f *front) health(w http.ResponseWriter, r *http.Request) {
	if !getOrHead(w, r) {
		return
	}
	writeStatus(w, http.StatusOK, map[string]any{"alive": true})
}

// ready answers /readyz: 200 while the store takes changes, 503 with the
// reason while it does not (a full disk, a database out of reach), while
// the server drains, or when the store does not answer within a second.
func (f *front) ready(w http.ResponseWriter, r *http.Request) {
	if !getOrHead(w, r) {
		return
	}
	if f.draining.Load() {
		writeStatus(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "draining: the server is shutting down"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := f.svc.Ready(ctx); err != nil {
		writeStatus(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": err.Error()})
		return
	}
	writeStatus(w, http.StatusOK, map[string]any{"ready": true})
}

// scrape answers /metrics on the API listener: with -auth, only to a token
// with "metrics": true.
func (f *front) scrape(w http.ResponseWriter, r *http.Request) {
	if f.guard != nil {
		t, e := f.guard.Authenticate(r)
		if e == nil && !t.Metrics {
			e = wire.NewError(wire.CodeForbidden, "the token "+t.Name+" may not read /metrics (\"metrics\": true in the tokens file)")
		}
		if e != nil {
			auth.Refuse(w, e)
			return
		}
	}
	f.metrics.handler().ServeHTTP(w, r)
}

func getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	httpapi.WriteError(w, wire.NewError(wire.CodeMethodNotAllowed, r.URL.Path+" takes GET or HEAD"))
	return false
}

func writeStatus(w http.ResponseWriter, status int, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
