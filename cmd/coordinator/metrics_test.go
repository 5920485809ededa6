//go:build !js && !wasip1

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/promtest"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

func newTestLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// scrape reads url (/metrics) with the token tok, if any.
func scrape(t *testing.T, hc *http.Client, url, tok string) promtest.Families {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	fams, err := promtest.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestMetricsCountTheScript: a scripted run against a durable server with
// tokens, then a scrape of -metrics-addr: every count is what the script
// did.
func TestMetricsCountTheScript(t *testing.T) {
	dir := t.TempDir()
	var logs syncio.Buffer
	srv := startNet(t, &logs, "-quiet", "-init", "-state", filepath.Join(dir, "state"), "-ttl", "1h", "-metrics-addr", "127.0.0.1:0",
		"-auth", writeTokens(t, filepath.Join(dir, "tokens.json"), appTok, adminTok))
	_, rest, ok := strings.Cut(logs.String(), "metrics on ")
	if !ok {
		t.Fatalf("no metrics line: %s", logs.String())
	}
	metricsURL := strings.Trim(strings.Fields(rest)[0], `"`)
	hc := &http.Client{}
	ctx := context.Background()
	a := tokenClient(t, srv.url, "app-a", appTok.token)
	b := tokenClient(t, srv.url, "app-b", appTok.token)
	// The script.
	const held = 5
	var leases []*client.Lease
	for i := range held { // 5 grants
		l, err := a.Acquire(ctx, "app/"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	for i := range 3 { // 3 denials
		var de *client.DeniedError
		if _, err := b.Acquire(ctx, "app/"+strconv.Itoa(i)); !errors.As(err, &de) {
			t.Fatalf("denial %d: %v", i, err)
		}
	}
	for i := range 4 { // 4 renewals
		l, err := a.Renew(ctx, leases[0])
		if err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		leases[0] = l
	}
	for i := range 2 { // 2 releases
		if err := a.Release(ctx, leases[held-1-i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Release(ctx, leases[held-1]); !errors.Is(err, client.ErrExpired) { // 1 release refused: expired
		t.Fatalf("release again: %v", err)
	}
	for range 2 { // 2 inspections: held, free
		send(t, hc, "POST", srv.url, "/v1/inspect", appTok.token, encode(t, msgOf(wire.OpInspect, "", "app/0", "", 0)))
		send(t, hc, "POST", srv.url, "/v1/inspect", appTok.token, encode(t, msgOf(wire.OpInspect, "", "app/9", "", 0)))
	}
	send(t, hc, "POST", srv.url, "/v1/acquire", "", []byte("{}"))                                                           // unauthorized
	send(t, hc, "POST", srv.url, "/v1/acquire", appTok.token, encode(t, msgOf(wire.OpAcquire, "o", "other/1", "app-a", 0))) // forbidden
	send(t, hc, "POST", srv.url, "/v1/acquire", appTok.token, []byte("{"))                                                  // malformed_json
	send(t, hc, "POST", srv.url, "/v2/nothing", appTok.token, []byte("{}"))                                                 // not_found
	// A waiting acquisition, served by a release.
	wm := msgOf(wire.OpAcquire, "w1", "app/1", "app-b", 0)
	wm.Wait = 30 * time.Second
	waited := make(chan answer, 1)
	go func() { waited <- send(t, hc, "POST", srv.url, "/v1/acquire", appTok.token, encode(t, wm)) }()
	for deadline := time.Now().Add(10 * time.Second); scrape(t, hc, metricsURL, "").Value("leasefence_waiters") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never waited")
		}
		time.Sleep(time.Millisecond)
	}
	if err := a.Release(ctx, leases[1]); err != nil { // the third release
		t.Fatal(err)
	}
	if w := <-waited; w.status != 200 || w.body["ok"] != true {
		t.Fatalf("the waiting acquisition: %+v", w)
	}
	// Wanted: 6 grants (5 + the waiter), 4 renewals, 3 releases, no expiry.
	m := scrape(t, hc, metricsURL, "")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"leasefence_calls_total", []string{"op", "acquire", "result", "granted"}, 6},
		{"leasefence_calls_total", []string{"op", "acquire", "result", "denied"}, 3},
		{"leasefence_calls_total", []string{"op", "acquire", "result", "refused"}, 3},
		{"leasefence_calls_total", []string{"op", "renew", "result", "granted"}, 4},
		{"leasefence_calls_total", []string{"op", "release", "result", "ok"}, 3},
		{"leasefence_calls_total", []string{"op", "release", "result", "expired"}, 1},
		{"leasefence_calls_total", []string{"op", "inspect", "result", "held"}, 2},
		{"leasefence_calls_total", []string{"op", "inspect", "result", "free"}, 2},
		{"leasefence_calls_total", []string{"op", "", "result", "refused"}, 1},
		{"leasefence_refusals_total", []string{"code", "unauthorized"}, 1},
		{"leasefence_refusals_total", []string{"code", "forbidden"}, 1},
		{"leasefence_refusals_total", []string{"code", "malformed_json"}, 1},
		{"leasefence_refusals_total", []string{"code", "not_found"}, 1},
		{"leasefence_refusals_total", []string{"code", "wrong_secret"}, 0},
		{"leasefence_grants_total", nil, 6},
		{"leasefence_renewals_total", nil, 4},
		{"leasefence_releases_total", nil, 3},
		{"leasefence_expiries_total", nil, 0},
		{"leasefence_leases_held", nil, 3},
		{"leasefence_waiters", nil, 0},
		{"leasefence_fence_issued", nil, 6},
		// Every grant and renewal is one synced write, and so is the
		// fence mark raised at start, before the first grant.
		{"leasefence_store_sync_seconds", nil, 6 + 4 + 1},
		{"leasefence_request_duration_seconds", []string{"op", "acquire"}, 12},
		{"leasefence_request_duration_seconds", []string{"op", "renew"}, 4},
		{"leasefence_request_duration_seconds", []string{"op", "release"}, 4},
		{"leasefence_request_duration_seconds", []string{"op", "inspect"}, 4},
	} {
		if got := m.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if m.Value("leasefence_request_duration_seconds", "op", "inspect") != 4 {
		t.Errorf("inspections timed: %v", m.Value("leasefence_request_duration_seconds", "op", "inspect"))
	}
	if m.Value("go_goroutines") <= 0 || m.Value("process_resident_memory_bytes") <= 0 {
		t.Errorf("no Go runtime or process metrics")
	}
	// The metrics listener serves nothing else, and the API listener no
	// /metrics.
	if r := send(t, hc, "GET", strings.TrimSuffix(metricsURL, "/metrics"), "/v1/acquire", "", nil); r.status != 404 {
		t.Errorf("the metrics listener answers the API: %d", r.status)
	}
	if r := send(t, hc, "GET", srv.url, "/metrics", adminTok.token, nil); r.status != 404 {
		t.Errorf("the API listener serves /metrics beside -metrics-addr: %d", r.status)
	}
}

// TestMetricsCountExpiries: leases nobody renews run out and are swept:
// the expiries count them, and the leases held go back to zero.
func TestMetricsCountExpiries(t *testing.T) {
	srv := startNet(t, io.Discard, "-quiet", "-memory", "-ttl", "200ms")
	c := holder(t, srv.url, "h")
	for i := range 3 {
		if _, err := c.Acquire(context.Background(), "r"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	hc := &http.Client{}
	var m promtest.Families
	// The sweep takes a stripe's records out, then counts them as expired:
	// a scrape between the two sees none held and fewer expiries, so the
	// test waits for both.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m = scrape(t, hc, srv.url+"/metrics", "")
		if m.Value("leasefence_leases_held") == 0 && m.Value("leasefence_expiries_total") == 3 || time.Now().After(deadline) {
			break
		}
	}
	if m.Value("leasefence_leases_held") != 0 || m.Value("leasefence_expiries_total") != 3 || m.Value("leasefence_grants_total") != 3 {
		t.Fatalf("held %v, expiries %v, grants %v", m.Value("leasefence_leases_held"), m.Value("leasefence_expiries_total"),
			m.Value("leasefence_grants_total"))
	}
}
