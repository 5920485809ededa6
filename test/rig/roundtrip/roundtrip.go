// Package roundtrip sends a test's HTTP request and reads its answer whole.
package roundtrip

import (
	"io"
	"net/http"
	"testing"
)

// Read sends req with do (a Client's Do, a Transport's RoundTrip), fails t
// if it cannot or if the answer's body cannot be read, and returns the
// answer with its whole body, closed.
func Read(t testing.TB, do func(*http.Request) (*http.Response, error), req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL, err)
	}
	return resp, data
}
