//go:build !js

package wranglerdev

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lease-fence/lease-fence/test/rig/roundtrip"
)

// server answers the first `lost` requests as wrangler dev's proxy does
// when its connection to the runtime failed, and the others with what it
// received.
func server(t *testing.T, lost int32, other func(w http.ResponseWriter) bool) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if n.Add(1) <= lost {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "Your worker restarted mid-request. Please try sending the request again. Only GET or HEAD requests are retried automatically.")
			return
		}
		if other != nil && other(w) {
			return
		}
		w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, data := roundtrip.Read(t, (&http.Client{Transport: Transport{}}).Do, req)
	return resp.StatusCode, string(data)
}

func TestTheProxysLostAnswerIsSentAgainWithItsBody(t *testing.T) {
	s, n := server(t, 2, nil)
	status, body := post(t, s.URL, `{"requestId":"r1"}`)
	if status != http.StatusOK || body != `{"requestId":"r1"}` || n.Load() != 3 {
		t.Fatalf("got %d %q after %d requests; want 200 with the body, after 3", status, body, n.Load())
	}
}

func TestThreeTimesAtMost(t *testing.T) {
	s, n := server(t, 5, nil)
	status, body := post(t, s.URL, "x")
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(body, "Your worker restarted") || n.Load() != 3 {
		t.Fatalf("got %d %q after %d requests; want the proxy's 503 passed on after 3", status, body, n.Load())
	}
}

func TestAnother503IsPassedOnWhole(t *testing.T) {
	const answer = `{"ok":false,"error":{"code":"unavailable","message":"the store is full"}}`
	s, n := server(t, 0, func(w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, answer)
		return true
	})
	status, body := post(t, s.URL, "x")
	if status != http.StatusServiceUnavailable || body != answer || n.Load() != 1 {
		t.Fatalf("got %d %q after %d requests; want the coordinator's 503 as it was, after 1", status, body, n.Load())
	}
}

func TestABodyThatCannotBeHadAgainIsNotSentAgain(t *testing.T) {
	s, n := server(t, 1, nil)
	req, err := http.NewRequest(http.MethodPost, s.URL, io.NopCloser(strings.NewReader("once")))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || n.Load() != 1 {
		t.Fatalf("got %d after %d requests; want the 503 after 1", resp.StatusCode, n.Load())
	}
}

// TestAKeptAliveConnectionClosedUnderARequest: the second request, on the
// first's kept-alive connection, is read and its connection closed with
// no answer (EOF, as wrangler dev did when it closed a connection as it
// was reused): it is sent again on a new one and answered.
func TestAKeptAliveConnectionClosedUnderARequest(t *testing.T) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if n.Add(1) == 2 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		w.Write(body)
	}))
	t.Cleanup(s.Close)
	hc := &http.Client{Transport: Transport{Base: s.Client().Transport}}
	for _, body := range []string{`{"requestId":"r1"}`, `{"requestId":"r2"}`} {
		req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, data := roundtrip.Read(t, hc.Do, req)
		if resp.StatusCode != http.StatusOK || string(data) != body {
			t.Fatalf("%s: got %d %q", body, resp.StatusCode, data)
		}
	}
	if n.Load() != 3 {
		t.Fatalf("%d requests reached the server; want 3", n.Load())
	}
}
