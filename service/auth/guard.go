package auth

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// Guard authenticates the requests of a server against a Set, which Swap
// replaces at any time (a reload: calls already authenticated finish with
// the entry they were authenticated with). It is safe for concurrent use.
type Guard struct {
	set  atomic.Pointer[Set]
	opts Options
}

// Options configures a Guard.
type Options struct {
	// Logger receives a line for each request Middleware refuses (the
	// path, the method and the code; never the header). Nil logs nothing.
	Logger *slog.Logger
	// Answered, if set, is told of each request Middleware refuses, as
	// httpapi.HandlerOptions.Answered is of the others.
	Answered func(op wire.Op, result string, e *wire.Error)
	// Now is the clock a token's expiry is read against; nil is
	// time.Now.
	Now func() time.Time
}

// NewGuard returns a guard over s.
func NewGuard(s *Set, opts Options) *Guard {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Guard{opts: opts}
	g.set.Store(s)
	return g
}

// Swap makes s the set later requests are checked against.
func (g *Guard) Swap(s *Set) { g.set.Store(s) }

// Set returns the set in force.
func (g *Guard) Set() *Set { return g.set.Load() }

type tokenKey struct{}

// WithToken returns ctx carrying t, as Middleware does.
func WithToken(ctx context.Context, t *Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// TokenOf returns the token Middleware found for the request ctx belongs
// to.
func TokenOf(ctx context.Context) (*Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(*Token)
	return t, ok && t != nil
}

// Authenticate returns the entry of the bearer token of r, or the 401
// refusal: no Authorization header, more than one, another scheme than
// Bearer, an empty or over-long token, a token the set does not list, or
// one that expired (Token.Expires).
func (g *Guard) Authenticate(r *http.Request) (*Token, *wire.Error) {
	vs := r.Header.Values("Authorization")
	if len(vs) == 0 {
		return nil, wire.NewError(wire.CodeUnauthorized, "this coordinator needs a token: send Authorization: Bearer <token>")
	}
	if len(vs) > 1 {
		return nil, wire.NewError(wire.CodeUnauthorized, "send one Authorization header, not "+strconv.Itoa(len(vs)))
	}
	scheme, token, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, wire.NewError(wire.CodeUnauthorized, "the Authorization header must be Bearer <token>")
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || len(token) > MaxTokenBytes {
		return nil, wire.NewError(wire.CodeUnauthorized, "the bearer token is empty or longer than "+strconv.Itoa(MaxTokenBytes)+" bytes")
	}
	t, ok := g.set.Load().Authenticate(token)
	if !ok {
		return nil, wire.NewError(wire.CodeUnauthorized, "the bearer token is not one this coordinator knows")
	}
	if t.Expired(g.opts.Now()) {
		return nil, wire.NewError(wire.CodeUnauthorized, "the bearer token "+strconv.Quote(t.Name)+" expired at "+t.Expires.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// Middleware answers 401 unauthorized (with a WWW-Authenticate header) to
// a request without a known bearer token, before its body is read, and
// passes the others on with their token in the context (TokenOf).
func (g *Guard) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, e := g.Authenticate(r)
		if e != nil {
			op := opOf(r.URL.Path)
			if g.opts.Logger != nil {
				g.opts.Logger.LogAttrs(r.Context(), slog.LevelWarn, "lease call refused", slog.String("op", string(op)),
					slog.String("method", r.Method), slog.String("path", wire.QuoteShort(r.URL.Path)), slog.String("code", e.Code),
					slog.String("remote", r.RemoteAddr))
			}
			if g.opts.Answered != nil {
				g.opts.Answered(op, httpapi.ResultRefused, e)
			}
			Refuse(w, e)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithToken(r.Context(), t)))
	})
}

// Refuse writes e, with the WWW-Authenticate header a 401 needs (RFC 6750).
func Refuse(w http.ResponseWriter, e *wire.Error) {
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lease-fence"`)
	}
	httpapi.WriteError(w, e)
}

// opOf returns the operation served at path, or "".
func opOf(path string) wire.Op {
	if op := wire.Op(strings.TrimPrefix(path, "/v1/")); op.Known() && op.Path() == path {
		return op
	}
	if path == wire.ListPath || path == wire.WatchPath {
		return wire.Op(path[len("/v1/"):])
	}
	return ""
}

// Authorize is a httpapi.HandlerOptions.Authorize: it refuses (403
// forbidden) a call whose resource or holder id is outside the scopes of
// the request's token, and fills in m.Caller (the token's name and
// limits). A request that did not pass Middleware is refused with 401.
func (g *Guard) Authorize(r *http.Request, m *wire.Message) *wire.Error {
	t, ok := TokenOf(r.Context())
	if !ok {
		return wire.NewError(wire.CodeUnauthorized, "the request was not authenticated")
	}
	m.Caller = wire.Caller{Name: t.Name, MaxLeases: t.MaxLeases, MaxWaiters: t.MaxWaiters}
	return t.Allows(m)
}

// Scope is a httpapi.HandlerOptions.Scope: a list or a watch sees only
// the resources matching the patterns of the request's token. A request
// that did not pass Middleware is refused with 401.
func (g *Guard) Scope(r *http.Request) (wire.Caller, func(resource string) bool, *wire.Error) {
	t, ok := TokenOf(r.Context())
	if !ok {
		return wire.Caller{}, nil, wire.NewError(wire.CodeUnauthorized, "the request was not authenticated")
	}
	return wire.Caller{Name: t.Name, MaxLeases: t.MaxLeases, MaxWaiters: t.MaxWaiters}, t.Sees, nil
}
