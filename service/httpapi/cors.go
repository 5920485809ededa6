package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/lease-fence/lease-fence/service/wire"
)

// CORS lets pages served from origins call the API endpoints (POST
// /v1/acquire, renew, release, inspect and renewals) from a browser, and nothing else: a preflight
// (OPTIONS with Access-Control-Request-Method) of one of those paths from
// one of the origins is answered 204 with the methods (POST) and headers
// (Content-Type, Authorization) it may send, and the answers to its calls
// carry Access-Control-Allow-Origin. Requests from other origins, and other
// paths, get no CORS header (a browser then refuses the page the answer);
// a preflight from another origin is passed on, and so answered 405. "*"
// in origins allows every origin. No cookies are involved, so credentials
// are never allowed; a token travels in the Authorization header.
func CORS(origins []string, next http.Handler) http.Handler {
	all := slices.Contains(origins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if !apiPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if origin == "" || !(all || slices.Contains(origins, origin)) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", http.MethodPost)
			h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		next.ServeHTTP(w, r)
	})
}

func apiPath(p string) bool {
	if p == wire.RenewalsPath {
		return true // a client's holds renew together
	}
	switch wire.Op(strings.TrimPrefix(p, "/v1/")) {
	case wire.OpAcquire, wire.OpRenew, wire.OpRelease, wire.OpInspect:
		return strings.HasPrefix(p, "/v1/")
	}
	return false
}

// CheckOrigins refuses an origin that is not "*" or a bare origin
// (scheme://host[:port], with no path, query or trailing slash), as a
// browser sends it in its Origin header.
func CheckOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "/") || u.String() != o {
			return errors.New("httpapi: " + wire.QuoteShort(o) + " is not an origin: write scheme://host[:port], as in https://app.example.com, or *")
		}
	}
	return nil
}
