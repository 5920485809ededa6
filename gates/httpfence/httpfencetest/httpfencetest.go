//go:build !js

// Package httpfencetest runs the conformance suite (gates/gatetest) against
// a fence-proxy over HTTP: the store the gate guards is an upstream API
// (API, a server in the test's process) that appends each write's body to a
// list per resource; the suite's writes are POSTs through the proxy with the
// Lease-Fence header; Floor and Rejections are the proxy's own endpoints;
// Values are read from the upstream directly. gates/httpfence runs it on a
// Proxy in the test's process, cmd/fence-proxy on the proxy as a child
// process (restarted with SIGKILL for the Restart rule).
package httpfencetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dunglas/httpsfv"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/gatetest"
	"github.com/lease-fence/lease-fence/gates/httpfence"
)

// API is the upstream: POST /append?resource=r appends the body to r's
// list, then answers 500 if X-Fail is set (a write that fails after it
// stored part of itself), else 204; GET /values?resource=r lists them as
// JSON. X-Inside names a function (registered with Inside) to run while the
// request is held upstream.
type API struct {
	URL string

	mu     sync.Mutex
	values map[string][]string
	inside sync.Map // key -> func()
	seq    atomic.Int64
	srv    *http.Server
}

// apis maps an API's URL to it, for Write.Inside (which only the process
// that made the gate can run).
var apis sync.Map

// NewAPI starts an API on 127.0.0.1, closed when t ends.
func NewAPI(t testing.TB) *API {
	a := &API{values: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.URL = "http://" + ln.Addr().String()
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve)}
	go func() { _ = a.srv.Serve(ln) }()
	apis.Store(a.URL, a)
	t.Cleanup(func() {
		a.srv.Close()
		apis.Delete(a.URL)
	})
	return a
}

// Values returns resource's list.
func (a *API) Values(resource string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string{}, a.values[resource]...)
}

func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	res := r.URL.Query().Get("resource")
	switch {
	case r.Method == "GET" && r.URL.Path == "/values":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.Values(res))
	case r.Method == "POST" && r.URL.Path == "/append":
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.values[res] = append(a.values[res], string(body))
		a.mu.Unlock()
		if k := r.Header.Get("X-Inside"); k != "" {
			if f, ok := a.inside.LoadAndDelete(k); ok {
				f.(func())()
			}
		}
		if r.Header.Get("X-Fail") != "" {
			http.Error(w, "stored part of the write, then failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

// Config is the suite's config for fence-proxies: start starts one in
// front of api and returns its URL, restart starts again the one at addr
// (from Addr) on its state, and shared says whether it shares admission
// (not -exclusive). What every proxy declares is set here: writes through
// the proxy run upstream (Inside), a write that fails upstream keeps the
// floor raised (KeepsFloor: the upstream may hold part of it), refusals
// are paged, and the header carries fences up to httpfence.MaxHeaderFence.
func Config(start func(t testing.TB, api *API) string, restart func(t testing.TB, addr string), shared bool) gatetest.Config {
	return gatetest.Config{
		New: func(t testing.TB, _ gatetest.Options) (gatetest.Gate, string) {
			api := NewAPI(t)
			addr := Addr(start(t, api), api)
			return Attach(t, addr), addr
		},
		Attach:      Attach,
		FailedWrite: gatetest.KeepsFloor,
		Paged:       true,
		Inside:      true,
		Shared:      shared,
		MaxFence:    httpfence.MaxHeaderFence,
		Restart:     restart,
	}
}

// Addr is what Config.New returns for a proxy at proxyURL in front of api:
// the address Attach takes.
func Addr(proxyURL string, api *API) string { return proxyURL + " " + api.URL }

// Gate is a client of a proxy and of its upstream API: what another process
// gets from Attach.
type Gate struct {
	proxy, upstream string
	client          *http.Client
}

// Attach returns a Gate on the proxy and API named by addr (from Addr).
func Attach(t testing.TB, addr string) gatetest.Gate {
	proxy, upstream, _ := strings.Cut(addr, " ")
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &Gate{proxy: proxy, upstream: upstream, client: &http.Client{Transport: tr}}
}

// RawHeader writes tok as a Lease-Fence value without checking it, so that
// the proxy, not the client, is what refuses a bad token (a fence above
// httpfence.MaxHeaderFence is written with all its digits).
func RawHeader(tok fence.Token) string {
	id := func(s string) string {
		var v any = s
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				v = httpsfv.DisplayString(s)
				break
			}
		}
		out, err := httpsfv.Marshal(httpsfv.List{httpsfv.NewItem(v)})
		if err != nil {
			return `"?"`
		}
		return out
	}
	return "resource=" + id(tok.Resource) + ", holder=" + id(tok.HolderID) + ", fence=" + strconv.FormatUint(tok.Fence, 10)
}

// HeaderRefused is the proxy's 400 for a malformed token or query: an
// argument error.
type HeaderRefused struct{ Message string }

func (e *HeaderRefused) Error() string { return e.Message }

// InvalidArgument reports true: the proxy refused the token as bad input.
func (e *HeaderRefused) InvalidArgument() bool { return true }

// send makes one write to the proxy and turns its answer into the gate's
// result: nil for 2xx, the refusal for a stale fence, an argument error for
// a malformed one, an error otherwise.
func (g *Gate) send(ctx context.Context, path string, tok fence.Token, body string, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, "POST", g.proxy+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set(httpfence.Header, RawHeader(tok))
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if stale := httpfence.StaleFence(resp); stale != nil {
		return stale
	}
	if pe := httpfence.ProxyError(resp); pe != nil && pe.Error.Code == "bad_fence_header" {
		return &HeaderRefused{pe.Error.Message}
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	return nil
}

// Commit appends w.Value to the resource's list through the proxy.
func (g *Gate) Commit(ctx context.Context, tok fence.Token, w gatetest.Write) error {
	if w.Nil {
		// An HTTP write is a request; the Go client's missing request is a
		// nil one, refused by the Transport before anything is sent.
		_, err := (&httpfence.Transport{Source: httpfence.TokenFunc(func() fence.Token { return tok })}).RoundTrip(nil)
		return err
	}
	h := http.Header{}
	if w.Fail {
		h.Set("X-Fail", "1")
	}
	if w.Inside != nil {
		v, ok := apis.Load(g.upstream)
		if !ok {
			return errors.New("httpfencetest: Write.Inside in a process without the upstream API")
		}
		api := v.(*API)
		k := strconv.FormatInt(api.seq.Add(1), 10)
		api.inside.Store(k, w.Inside)
		h.Set("X-Inside", k)
	}
	return g.send(ctx, "/append?resource="+url.QueryEscape(tok.Resource), tok, w.Value, h)
}

// Admit raises the floor through POST /.lease-fence/admit.
func (g *Gate) Admit(ctx context.Context, tok fence.Token) error {
	return g.send(ctx, "/.lease-fence/admit", tok, "", nil)
}

func (g *Gate) get(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if pe := httpfence.ProxyError(resp); pe != nil && pe.Error.Code == "bad_query" {
		return &badQuery{pe.Error.Message}
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Floor reads GET /.lease-fence/floor.
func (g *Gate) Floor(ctx context.Context, r string) (uint64, error) {
	var out struct{ Floor uint64 }
	err := g.get(ctx, g.proxy+"/.lease-fence/floor?resource="+url.QueryEscape(r), &out)
	return out.Floor, err
}

// Rejections reads GET /.lease-fence/rejections a page after another until
// the proxy says there are no more.
func (g *Gate) Rejections(ctx context.Context, r string) ([]fence.Rejection, error) {
	var all []fence.Rejection
	after := uint64(0)
	for {
		page, more, err := g.page(ctx, r, after, "")
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if !more {
			return all, nil
		}
		if len(page) == 0 {
			return nil, errors.New("httpfencetest: the proxy answered an empty page with more")
		}
		after = page[len(page)-1].Seq
	}
}

// RejectionsAfter reads one page: GET /.lease-fence/rejections with after
// and limit. A limit the proxy refuses (400) is an argument error.
func (g *Gate) RejectionsAfter(ctx context.Context, r string, after uint64, limit int) ([]fence.Rejection, error) {
	page, _, err := g.page(ctx, r, after, strconv.Itoa(limit))
	return page, err
}

// page reads one page (limit "": the proxy's default).
func (g *Gate) page(ctx context.Context, r string, after uint64, limit string) ([]fence.Rejection, bool, error) {
	u := g.proxy + "/.lease-fence/rejections?resource=" + url.QueryEscape(r) + "&after=" + strconv.FormatUint(after, 10)
	if limit != "" {
		u += "&limit=" + limit
	}
	var out httpfence.RejectionsPage
	if err := g.get(ctx, u, &out); err != nil {
		var bad *badQuery
		if errors.As(err, &bad) {
			return nil, false, &HeaderRefused{bad.msg}
		}
		return nil, false, err
	}
	rs := make([]fence.Rejection, len(out.Rejections))
	for i, x := range out.Rejections {
		rs[i] = x.Rejection()
	}
	return rs, out.More, nil
}

// badQuery is the proxy's 400 bad_query.
type badQuery struct{ msg string }

func (e *badQuery) Error() string { return e.msg }

// Values reads the upstream's list directly.
func (g *Gate) Values(ctx context.Context, r string) ([]string, error) {
	var out []string
	err := g.get(ctx, g.upstream+"/values?resource="+url.QueryEscape(r), &out)
	return out, err
}
