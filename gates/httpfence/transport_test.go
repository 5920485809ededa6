//go:build !js

package httpfence_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
)

// roundTripFunc records what the Transport hands on.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

func TestTransportAddsTheHeaderToWritesOnly(t *testing.T) {
	tok := fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 7}
	var sent *http.Request
	tr := &httpfence.Transport{
		Source: httpfence.TokenFunc(func() fence.Token { return tok }),
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent = r
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		}),
	}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		req, _ := http.NewRequest(m, "http://gate.invalid/x", strings.NewReader("b"))
		req.Header.Set("X-Mine", "1")
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if got := sent.Header.Get("Lease-Fence"); got != `resource="deploy-slot", holder="agent-a", fence=7` {
			t.Fatalf("%s sent Lease-Fence %q", m, got)
		}
		if sent.Header.Get("X-Mine") != "1" || req.Header.Get("Lease-Fence") != "" || sent == req {
			t.Fatalf("%s: the caller's request was modified or not copied", m)
		}
	}
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		req, _ := http.NewRequest(m, "http://gate.invalid/x", nil)
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if sent != req || sent.Header.Get("Lease-Fence") != "" {
			t.Fatalf("%s was changed", m)
		}
	}
	// A header already on the request is replaced, not doubled.
	req, _ := http.NewRequest("POST", "http://gate.invalid/x", nil)
	req.Header.Add("Lease-Fence", `resource="x", holder="y", fence=1`)
	_, _ = tr.RoundTrip(req)
	if v := sent.Header.Values("Lease-Fence"); len(v) != 1 || !strings.Contains(v[0], "fence=7") {
		t.Fatalf("sent %q", v)
	}
}

func TestTransportRefusesATokenItCannotSend(t *testing.T) {
	calls := 0
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) { calls++; return nil, errors.New("sent") })
	for _, tr := range []*httpfence.Transport{
		{Base: base},
		{Base: base, Source: httpfence.TokenFunc(func() fence.Token { return fence.Token{} })},
		{Base: base, Source: httpfence.TokenFunc(func() fence.Token {
			return fence.Token{Resource: "r", HolderID: "h", Fence: httpfence.MaxHeaderFence + 1}
		})},
	} {
		body := &closeCounter{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest("POST", "http://gate.invalid/x", body)
		_, err := tr.RoundTrip(req)
		var ae *fence.ArgumentError
		if !errors.As(err, &ae) {
			t.Fatalf("RoundTrip: %v, want an ArgumentError", err)
		}
		if body.closed.Load() != 1 {
			t.Fatalf("the body was closed %d times, want 1", body.closed.Load())
		}
	}
	if calls != 0 {
		t.Fatalf("%d requests were sent", calls)
	}
}

// Through a real proxy: the Transport's header is what the proxy reads, and
// StaleFence turns its refusal into the gate's error.
func TestTransportThroughTheProxy(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	client := func(tok fence.Token) *http.Client {
		return &http.Client{Transport: &httpfence.Transport{Source: httpfence.TokenFunc(func() fence.Token { return tok })}}
	}
	b := client(fence.Token{Resource: "deploy-slot", HolderID: "agent-ü", Fence: 8})
	a := client(fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 7})
	resp, err := b.Post(e.srv.URL+"/deploy", "text/plain", strings.NewReader("b"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || httpfence.StaleFence(resp) != nil || httpfence.ProxyError(resp) != nil {
		t.Fatalf("agent-b: %d", resp.StatusCode)
	}
	resp, err = a.Post(e.srv.URL+"/deploy", "text/plain", strings.NewReader("a"))
	if err != nil {
		t.Fatal(err)
	}
	stale := httpfence.StaleFence(resp)
	want := fence.Rejection{Seq: 1, Resource: "deploy-slot", RefusedHolderID: "agent-a", RefusedFence: 7, AdmittedHolderID: "agent-ü", AdmittedFence: 8}
	if stale == nil || stale.Rejection != want {
		t.Fatalf("StaleFence = %+v, want %+v", stale, want)
	}
	// The body can still be read after StaleFence.
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"stale_fence"`) {
		t.Fatalf("body %q", body)
	}
	// Read after the body was closed, the refusal is still reported, from
	// the headers.
	resp, err = a.Post(e.srv.URL+"/deploy", "text/plain", strings.NewReader("a"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want = fence.Rejection{Resource: "deploy-slot", RefusedHolderID: "agent-a", RefusedFence: 7, AdmittedFence: 8}
	if stale := httpfence.StaleFence(resp); stale == nil || stale.Rejection != want {
		t.Fatalf("StaleFence after Close = %+v, want %+v", stale, want)
	}
	// Reads go out without a header.
	resp, err = a.Get(e.srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := e.up.seen(); len(got) != 2 || got[1].Fence != "" || got[0].Fence != `resource="deploy-slot", holder=%"agent-%c3%bc", fence=8` {
		t.Fatalf("upstream saw %+v", got)
	}
}

func TestStaleFenceAndProxyErrorIgnoreUpstreamAnswers(t *testing.T) {
	e := newEnv(t, httpfence.Options{})
	e.up.setHandle(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Lease-Fence-Error", "stale_fence") // removed by the proxy
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":{"code":"stale_fence","message":"upstream's own","rejection":{"seq":1}}}`)
	})
	c := &http.Client{Transport: &httpfence.Transport{Source: httpfence.TokenFunc(func() fence.Token {
		return fence.Token{Resource: "r", HolderID: "h", Fence: 1}
	})}}
	resp, err := c.Post(e.srv.URL+"/x", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || httpfence.StaleFence(resp) != nil || httpfence.ProxyError(resp) != nil {
		t.Fatalf("an upstream 409 was taken for the proxy's refusal")
	}
}
