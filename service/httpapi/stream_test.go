package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/service/wire"
)

type callOnly struct{}

func (callOnly) Call(context.Context, wire.Message) (wire.Reply, error) {
	return wire.Reply{OK: true}, nil
}

// TestListAndWatchNotSupported: a Backend that can neither list nor watch
// (a Worker's router: one Durable Object per resource, no index of them
// all) answers both 501 not_supported, once the body checked out.
func TestListAndWatchNotSupported(t *testing.T) {
	h := NewHandler(callOnly{}, HandlerOptions{})
	for _, path := range []string{wire.ListPath, wire.WatchPath} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{}`)))
		if rec.Code != 501 || !strings.Contains(rec.Body.String(), `"code":"not_supported"`) {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"bad":1}`)))
		if rec.Code != 400 {
			t.Fatalf("%s with a bad body: %d %s", path, rec.Code, rec.Body.String())
		}
	}
}
