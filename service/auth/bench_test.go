package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// benchSet is a tokens file of n entries; tok is the last one's token.
func benchSet(b *testing.B, n int) (s *Set, tok string) {
	b.Helper()
	var file []map[string]any
	for i := range n {
		tok = "bench-token-" + strconv.Itoa(i) + "-0123456789abcdef0123456789"
		file = append(file, map[string]any{"name": "t" + strconv.Itoa(i), "tokenSha256": hashOf(tok), "resources": []string{"jobs/*"}})
	}
	data, _ := json.Marshal(file)
	s, err := Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	return s, tok
}

// BenchmarkAuthenticate: the cost of finding a token in files of 1 to 1,000
// entries: a SHA-256 of the token, then a constant-time comparison with
// every entry (the cost grows with the file, whichever entry matches).
func BenchmarkAuthenticate(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run("tokens="+strconv.Itoa(n), func(b *testing.B) {
			s, tok := benchSet(b, n)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := s.Authenticate(tok); !ok {
					b.Fatal("not found")
				}
			}
		})
	}
}

// BenchmarkMiddleware: what the guard adds to a request that passes, with
// a file of 10 entries: reading the header, Authenticate, the token put in
// the request's context (a copy of the request).
func BenchmarkMiddleware(b *testing.B) {
	s, tok := benchSet(b, 10)
	g := NewGuard(s, Options{})
	h := g.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest("POST", "/v1/acquire", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}
