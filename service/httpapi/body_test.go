package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// refuseFirst refuses its first call with a long message, then grants.
type refuseFirst struct{ calls int }

func (b *refuseFirst) Call(context.Context, wire.Message) (wire.Reply, error) {
	b.calls++
	if b.calls == 1 {
		return wire.Reply{}, wire.NewError(wire.CodeUnavailable, strings.Repeat("a long refusal ", 40))
	}
	return wire.Reply{OK: true}, nil
}

// TestBodyReadToDeclaredLength: a body with a declared length is read up to
// that length and no further (what follows is the connection's, not the
// call's), and one shorter than declared is refused as malformed.
func TestBodyReadToDeclaredLength(t *testing.T) {
	body, err := wire.EncodeMessage(wire.Message{Op: wire.OpRelease, Secret: strings.Repeat("s", 32),
		Request: lease.Request{RequestID: "q1", Resource: "r", HolderID: "h", Fence: 1}})
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(callOnly{}, HandlerOptions{})
	src := &countingReader{r: strings.NewReader(string(body) + "GET /next HTTP/1.1\r\n")}
	req := httptest.NewRequest(http.MethodPost, wire.OpRelease.Path(), src)
	req.ContentLength = int64(len(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || src.n != len(body) {
		t.Fatalf("%d %s; read %d bytes of a body of %d", rec.Code, rec.Body.String(), src.n, len(body))
	}
	req = httptest.NewRequest(http.MethodPost, wire.OpRelease.Path(), strings.NewReader(string(body[:len(body)-2])))
	req.ContentLength = int64(len(body))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), wire.CodeMalformedJSON) {
		t.Fatalf("a body shorter than declared: %d %s", rec.Code, rec.Body.String())
	}
}

// TestAnswersDoNotShareBytes: answers are encoded into reused buffers; a
// short answer after a long one is exactly its own bytes, with its own
// Content-Length.
func TestAnswersDoNotShareBytes(t *testing.T) {
	body, err := wire.EncodeMessage(wire.Message{Op: wire.OpRelease, Secret: strings.Repeat("s", 32),
		Request: lease.Request{RequestID: "q1", Resource: "r", HolderID: "h", Fence: 1}})
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(&refuseFirst{}, HandlerOptions{})
	var got []string
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, wire.OpRelease.Path(), strings.NewReader(string(body))))
		if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(rec.Body.Len()) {
			t.Fatalf("Content-Length %s for %d bytes", cl, rec.Body.Len())
		}
		got = append(got, rec.Body.String())
	}
	if !strings.Contains(got[0], "a long refusal") || got[1] != `{"ok":true}` {
		t.Fatalf("answers %q", got)
	}
}
