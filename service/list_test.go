package service

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// memService is a Service over a Local in memory, on a manual clock,
// that holds up to n leases.
func memService(t testing.TB, n int, cfg Config) (*Service, *clock.Manual) {
	t.Helper()
	clk, err := clock.NewManual("coordinator", clock.ManualOptions{Start: 1000})
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewLocal(LocalConfig{Clock: clk, TTL: ttl, Limits: Limits{MaxLeases: n, ReleaseMemory: n, FenceMemory: n}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.TTL, cfg.Store, cfg.AfterFunc = ttl, store, clk.AfterFunc
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc, clk
}

// take acquires resource for holder directly, and returns its fence.
func take(t testing.TB, svc *Service, resource, holder string) uint64 {
	t.Helper()
	r, err := svc.Call(context.Background(), acquireMsg("q-"+resource+"-"+holder, resource, holder))
	if err != nil || !r.OK {
		t.Fatalf("acquire %s: %+v %v", resource, r, err)
	}
	return r.Grant.Fence
}

func drop(t testing.TB, svc *Service, resource, holder string, fence uint64) {
	t.Helper()
	r, err := svc.Call(context.Background(), releaseMsg("r-"+resource+"-"+holder, resource, holder, fence, secretOf(holder)))
	if err != nil || !r.OK {
		t.Fatalf("release %s: %+v %v", resource, r, err)
	}
}

// TestListPagesEveryLiveLeaseOnce lists 100,000 leases page by page while
// leases are released and granted between the pages: every lease live
// throughout the listing is listed exactly once, nothing is listed twice,
// every page is in byte order, holds at most the limit, and lists only
// live leases of the prefix.
func TestListPagesEveryLiveLeaseOnce(t *testing.T) {
	const n = 100_000
	svc, _ := memService(t, 2*n, Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	fences := map[string]uint64{}
	name := func(i int) string { return "job/" + strconv.Itoa(i) }
	for i := range n {
		fences[name(i)] = take(t, svc, name(i), "h")
	}
	take(t, svc, "other/1", "h") // outside the prefix
	throughout := map[string]bool{}
	for r := range fences {
		throughout[r] = true
	}
	seen := map[string]int{}
	cursor, pages, next := "", 0, n
	last := ""
	for {
		page, err := svc.List(context.Background(), wire.ListRequest{Prefix: "job/", Cursor: cursor, Limit: 1000}, nil)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Leases) > 1000 {
			t.Fatalf("page %d holds %d leases", pages, len(page.Leases))
		}
		for _, l := range page.Leases {
			if l.Resource <= last || !strings.HasPrefix(l.Resource, "job/") {
				t.Fatalf("page %d: %q after %q", pages, l.Resource, last)
			}
			last = l.Resource
			seen[l.Resource]++
			if f, live := fences[l.Resource]; !live || f != l.Fence || l.HolderID != "h" || l.RemainingMillis <= 0 {
				t.Fatalf("listed %+v, which is not live (%d, %v)", l, f, live)
			}
		}
		if page.Cursor == "" {
			break
		}
		cursor = page.Cursor
		// Leases come and go between pages, before and after the cursor.
		for range 50 {
			r := name(rng.IntN(next))
			if f, ok := fences[r]; ok {
				drop(t, svc, r, "h", f)
				delete(fences, r)
				delete(throughout, r)
			}
			fences[name(next)] = take(t, svc, name(next), "h")
			next++
		}
	}
	if pages*1000 < len(seen) || len(seen) < n-50*pages {
		t.Fatalf("%d pages for %d leases listed", pages, len(seen))
	}
	for r, k := range seen {
		if k != 1 {
			t.Fatalf("%s listed %d times", r, k)
		}
	}
	for r := range throughout {
		if seen[r] != 1 {
			t.Fatalf("%s, live throughout, was listed %d times", r, seen[r])
		}
	}
}

// TestListSkipsExpiredAndShowsWaiters: a lease that expired is not
// listed (before the sweep too); with waiters, each lease's waiters are
// listed in queue order.
func TestListSkipsExpiredAndShowsWaiters(t *testing.T) {
	svc, clk := memService(t, 100, Config{})
	take(t, svc, "a", "h1")
	clk.Advance(600)
	take(t, svc, "b", "h2")
	w, err := svc.Watch(wire.WatchRequest{}, wire.Caller{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, h := range []string{"w1", "w2"} {
		m := acquireMsg("q-"+h, "b", h)
		m.Wait = 30_000_000_000
		go func() { _, _ = svc.Call(ctx, m) }()
		for ev := range w.Events() { // wait for the waiter to join
			if ev.Type == wire.EventWaiting && ev.HolderID == h {
				break
			}
		}
	}
	clk.Advance(500) // a expired, b still live
	page, err := svc.List(context.Background(), wire.ListRequest{Waiters: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Leases) != 1 || page.Leases[0].Resource != "b" || page.Leases[0].Waiters != 2 ||
		strings.Join(page.Leases[0].WaiterIDs, ",") != "w1,w2" || page.Cursor != "" {
		t.Fatalf("list %+v", page)
	}
	page, _ = svc.List(context.Background(), wire.ListRequest{}, nil)
	if len(page.Leases) != 1 || page.Leases[0].WaiterIDs != nil || page.Leases[0].Waiters != 2 {
		t.Fatalf("list without waiters %+v", page)
	}
}

// post sends body to path of h and returns the status and the body.
func postTo(t *testing.T, h http.Handler, path, body string, mod func(*http.Request)) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if mod != nil {
		mod(req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestListAndWatchRefuseBadInput: unknown, repeated or null members, an
// oversized prefix, a limit of 0 or 1001, a cursor not given by the
// coordinator: refused with the error shape and its code.
func TestListAndWatchRefuseBadInput(t *testing.T) {
	svc, _ := memService(t, 100, Config{})
	h := httpapi.NewHandler(svc, httpapi.HandlerOptions{})
	long := `"` + strings.Repeat("x", wire.MaxPrefixBytes+1) + `"`
	for _, c := range []struct{ path, body, code string }{
		{wire.ListPath, `{"prefix":"a","extra":1}`, wire.CodeUnknownField},
		{wire.ListPath, `{"prefix":"a","prefix":"b"}`, wire.CodeDuplicateField},
		{wire.ListPath, `{"prefix":null}`, wire.CodeWrongType},
		{wire.ListPath, `null`, wire.CodeWrongType},
		{wire.ListPath, `{"prefix":` + long + `}`, wire.CodeInvalidValue},
		{wire.ListPath, `{"limit":0}`, wire.CodeInvalidValue},
		{wire.ListPath, `{"limit":1001}`, wire.CodeInvalidValue},
		{wire.ListPath, `{"limit":1.5}`, wire.CodeInvalidValue},
		{wire.ListPath, `{"waiters":"yes"}`, wire.CodeWrongType},
		{wire.ListPath, `{"cursor":"!!"}`, wire.CodeInvalidValue},
		{wire.ListPath, `{`, wire.CodeMalformedJSON},
		{wire.WatchPath, `{"prefix":"a","members":1}`, wire.CodeUnknownField},
		{wire.WatchPath, `{"prefix":` + long + `}`, wire.CodeInvalidValue},
		{wire.WatchPath, `{"afterSeq":-1}`, wire.CodeInvalidValue},
		{wire.WatchPath, `{"stream":null}`, wire.CodeWrongType},
	} {
		st, out := postTo(t, h, c.path, c.body, nil)
		var e wire.ErrorBody
		if err := json.Unmarshal([]byte(out), &e); err != nil || e.Error.Code != c.code || e.Error.Message == "" || st != wire.NewError(c.code, "").Status {
			t.Errorf("%s %s: %d %s, want %s", c.path, c.body, st, out, c.code)
		}
	}
	if st, out := postTo(t, h, wire.ListPath, `{}`, func(r *http.Request) { r.Method = http.MethodGet }); st != 405 {
		t.Errorf("GET list: %d %s", st, out)
	}
	if svc.Watchers() != 0 {
		t.Fatal("a refused watch is open")
	}
}

// TestListAndWatchInScope: with a Scope, a list shows only the resources
// the caller may see, and so does a watch.
func TestListAndWatchInScope(t *testing.T) {
	svc, _ := memService(t, 100, Config{})
	scope := func(*http.Request) (wire.Caller, func(string) bool, *wire.Error) {
		return wire.Caller{Name: "t"}, func(r string) bool { return strings.HasPrefix(r, "mine/") }, nil
	}
	h := httpapi.NewHandler(svc, httpapi.HandlerOptions{Scope: scope})
	w, err := svc.Watch(wire.WatchRequest{}, wire.Caller{Name: "t"}, func(r string) bool { return strings.HasPrefix(r, "mine/") })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, r := range []string{"mine/1", "theirs/1", "mine/2", "theirs/2"} {
		take(t, svc, r, "h")
	}
	st, out := postTo(t, h, wire.ListPath, `{"limit":2}`, nil)
	var page wire.ListReply
	if err := json.Unmarshal([]byte(out), &page); err != nil || st != 200 {
		t.Fatalf("%d %s", st, out)
	}
	if len(page.Leases) != 2 || page.Leases[0].Resource != "mine/1" || page.Leases[1].Resource != "mine/2" || page.Cursor == "" {
		t.Fatalf("first page %s", out)
	}
	st, out = postTo(t, h, wire.ListPath, `{"cursor":"`+page.Cursor+`"}`, nil)
	if st != 200 || !strings.Contains(out, `"leases":[]`) || strings.Contains(out, "theirs") {
		t.Fatalf("second page %d %s", st, out)
	}
	if strings.Contains(out, "secret") {
		t.Fatal("a list shows a secret")
	}
	var got []string
	for _, ev := range drained(w) {
		got = append(got, ev.Resource)
	}
	if strings.Join(got, ",") != "mine/1,mine/2" {
		t.Fatalf("watch in scope saw %v", got)
	}
}

// TestListShowsTheValue: a lease acquired with a value is listed with it.
func TestListShowsTheValue(t *testing.T) {
	svc, _ := memService(t, 10, Config{})
	m := acquireMsg("q1", "leader", "h")
	m.Value = "10.0.0.7:8080"
	if r, err := svc.Call(context.Background(), m); err != nil || !r.OK {
		t.Fatalf("%+v %v", r, err)
	}
	take(t, svc, "plain", "h")
	page, err := svc.List(context.Background(), wire.ListRequest{}, nil)
	if err != nil || len(page.Leases) != 2 || page.Leases[0].Value == nil || *page.Leases[0].Value != "10.0.0.7:8080" || page.Leases[1].Value != nil {
		t.Fatalf("%+v %v", page, err)
	}
}

// BenchmarkListPage reads one page of 1,000 leases (the second) with
// 10,000 and with 100,000 leases held: its time and allocations are the
// page's, not the store's.
func BenchmarkListPage(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			svc, _ := memService(b, n, Config{})
			for i := range n {
				take(b, svc, "r/"+strconv.Itoa(100_000+i), "h")
			}
			after, _ := svc.List(context.Background(), wire.ListRequest{Limit: 1000}, nil)
			q := wire.ListRequest{Cursor: after.Cursor, Limit: 1000}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				page, err := svc.List(context.Background(), q, nil)
				if err != nil || len(page.Leases) != 1000 {
					b.Fatal(len(page.Leases), err)
				}
			}
		})
	}
}
