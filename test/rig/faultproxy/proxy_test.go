//go:build !js

package faultproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// waitInFlight waits until p serves active requests, parked of them.
func waitInFlight(t *testing.T, p *Proxy, active, parked int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, k := p.InFlight()
		if a == active && k == parked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("in flight: %d requests, %d parked; want %d and %d", a, k, active, parked)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestInFlight: a request whose reply is delayed, held back or held counts
// as active and parked until the test releases it or its client goes away;
// a request answered counts no more; the path is forwarded as it came.
func TestInFlight(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	defer backend.Close()
	p, err := Start(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	release := make(chan struct{})
	p.SetPolicy(func(c *Call) Action {
		switch c.Path {
		case "/prefix/delayed":
			return Action{Release: release}
		case "/held-reply":
			return Action{HoldReply: true}
		case "/held":
			return Action{Hold: true}
		}
		return Action{}
	})
	post := func(ctx context.Context, path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := post(context.Background(), "/plain"); got != "/plain" || err != nil {
		t.Fatalf("plain: %q %v", got, err)
	}
	waitInFlight(t, p, 0, 0)
	got := make(chan string, 1)
	go func() {
		s, _ := post(context.Background(), "/prefix/delayed")
		got <- s
	}()
	waitInFlight(t, p, 1, 1)
	close(release)
	if s := <-got; s != "/prefix/delayed" {
		t.Fatalf("delayed: %q", s)
	}
	waitInFlight(t, p, 0, 0)
	for _, path := range []string{"/held-reply", "/held"} {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := post(ctx, path)
			errc <- err
		}()
		waitInFlight(t, p, 1, 1)
		cancel()
		if err := <-errc; err == nil {
			t.Fatalf("%s answered", path)
		}
		waitInFlight(t, p, 0, 0)
	}
	if n := len(p.Calls()); n != 4 {
		t.Fatalf("%d calls", n)
	}
}
