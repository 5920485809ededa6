//go:build !js

// Package holdtest is the suite of waiting, inspecting, holding and
// elections that runs against every coordinator: the native server
// (cmd/coordinator's tests start it as a child process) and the Worker
// under wrangler dev (test/worker), each through a faultproxy. The server
// tests speak the protocol with plain JSON bodies, so that what they check
// is the server; the client tests (client.go) check client.Client's Hold, Do
// and elections on top.
package holdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/faultproxy"
)

// Target is a coordinator under test.
type Target struct {
	Name  string
	Proxy *faultproxy.Proxy // every call goes through it
	TTL   time.Duration     // the coordinator's lease length
	// KeptPlaces, if not nil, reports how many places the coordinator
	// keeps with no call attached on a resource (the native server's
	// /debug/waiting?resource=).
	// Nil means the coordinator cannot tell that a client went away (the
	// Worker: workerd does not report a client's disconnect to the Worker
	// or its Durable Object).
	KeptPlaces func(resource string) (int, error)
	// MaxWait and MaxWaiters are the coordinator's bounds on waiting
	// (-max-wait and -max-waiters natively, LEASE_MAX_WAIT_MS and
	// LEASE_MAX_WAITERS on the Worker), for QueueBounds; zero if the
	// target is not for it. MaxWaiters counts every waiting call of the
	// coordinator natively, and those of one resource on the Worker (each
	// resource is its own Durable Object): QueueBounds needs the
	// coordinator to itself while it runs.
	MaxWait    time.Duration
	MaxWaiters int
}

// The tests of the suite run one at a time against their coordinator, each
// on resources of its own: nothing else is granted meanwhile, so each new
// fence is the last one plus 1 (the native server's counter is shared by
// every resource, the Worker's is the resource's own).

// Wait is how long the waiters of these tests wait (queue). A waiter
// woken by the coordinator (a release, an expiry) is answered before its
// wait runs out; after it, a grant could only come from the wait's end.
// So that is what the tests check (woken), from before the call was sent:
// a stall of this process (seconds on a loaded machine) cannot fail them.
const Wait = 30 * time.Second

// Bound is how long after a lease's expiry, on the coordinator's own
// clock (its grants' CoordinatorExpiresAt), the next holder's grant may
// be decided (the expiry timer, or the sweep every half TTL): both
// instants are the coordinator's, so a stall of this process cannot fail
// it.
const Bound = 3 * time.Second

// unique returns a resource name no earlier run used.
func unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// holder is one side of the raw protocol: a holder id, and the secret of
// its acquisition.
type holder struct {
	id, secret string
}

func newHolder(id string) holder { return holder{id: id, secret: "secret-of-" + id + "-0123456789"} }

func (h holder) acquireBody(reqID, resource string, wait time.Duration) string {
	w := ""
	if wait > 0 {
		w = `,"waitMillis":` + strconv.FormatInt(wait.Milliseconds(), 10)
	}
	return fmt.Sprintf(`{"requestId":%q,"resource":%q,"holderId":%q,"sentAt":{"millis":1,"domain":%q},"kind":"acquire","secret":%q%s}`,
		reqID, resource, h.id, h.id, h.secret, w)
}

func (h holder) releaseBody(reqID, resource string, fence uint64) string {
	return fmt.Sprintf(`{"requestId":%q,"resource":%q,"holderId":%q,"fence":%d,"secret":%q}`, reqID, resource, h.id, fence, h.secret)
}

// answer is a call's outcome.
type answer struct {
	status int
	reply  wire.Reply
	raw    string
	err    error
	sent   time.Time // when it was sent
	at     time.Time // when it came
}

var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}

// post sends body to path through the target's proxy.
func (tg *Target) post(ctx context.Context, path, body string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.Proxy.URL+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{err: err, sent: sent, at: time.Now()}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(data), err: err, sent: sent, at: time.Now()}
	if err == nil && resp.StatusCode == http.StatusOK {
		a.err = json.Unmarshal(data, &a.reply)
	}
	return a
}

func (tg *Target) async(ctx context.Context, path, body string) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- tg.post(ctx, path, body) }()
	return ch
}

func got(t *testing.T, what string, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no answer after 60 s", what)
	}
	return answer{}
}

func pending(t *testing.T, what string, ch <-chan answer) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s was answered too early: %d %s %v", what, a.status, a.raw, a.err)
	default:
	}
}

func granted(t *testing.T, what string, a answer, holderID string) *wire.Grant {
	t.Helper()
	if a.err != nil || a.status != 200 || !a.reply.OK || a.reply.Grant == nil || a.reply.Grant.HolderID != holderID {
		t.Fatalf("%s: not granted to %s: %d %s %v", what, holderID, a.status, a.raw, a.err)
	}
	return a.reply.Grant
}

// woken fails the test unless a (a waiting call, queue's) was answered
// before its wait ran out, counted from before it was sent: granted by
// the coordinator's wake-up, not at the wait's end. Only a stall of this
// process of nearly Wait can fail it.
func woken(t *testing.T, what string, a answer) {
	t.Helper()
	if took := a.at.Sub(a.sent); took >= Wait {
		t.Fatalf("%s: answered %v after its waiting call was sent, past its wait (%v)", what, took, Wait)
	}
}

// decided is when the coordinator decided g, on its own clock.
func decided(g *wire.Grant) float64 { return g.CoordinatorExpiresAt.Millis - g.TTLMillis }

// grantsOn returns the grants of fence on resource that tg's proxy saw
// answered (acquisitions and renewals, batched or not).
func (tg *Target) grantsOn(resource string, fence uint64) []*wire.Grant {
	var out []*wire.Grant
	for _, c := range tg.Proxy.Calls() {
		if c.Status != http.StatusOK {
			continue
		}
		var r struct {
			Grant   *wire.Grant `json:"grant"`
			Results []struct {
				Grant *wire.Grant `json:"grant"`
			} `json:"results"`
		}
		if json.Unmarshal(c.Reply, &r) != nil {
			continue
		}
		gs := []*wire.Grant{r.Grant}
		for _, x := range r.Results {
			gs = append(gs, x.Grant)
		}
		for _, g := range gs {
			if g != nil && g.Resource == resource && g.Fence == fence {
				out = append(out, g)
			}
		}
	}
	return out
}

// handedOnAtExpiry fails the test unless the lease of fence next on
// resource was decided no earlier than the lease of fence prev expired
// (its last grant the proxy saw answered), and within Bound of it, on the
// coordinator's clock; it returns how long after. (A renewal of prev
// decided but never answered, its caller killed, would only end prev's
// lease later than seen here.)
func (tg *Target) handedOnAtExpiry(t *testing.T, what, resource string, prev, next uint64) time.Duration {
	t.Helper()
	ps, ns := tg.grantsOn(resource, prev), tg.grantsOn(resource, next)
	if len(ps) == 0 || len(ns) == 0 {
		t.Fatalf("%s: grants of fence %d (%d seen) or %d (%d seen) missing", what, prev, len(ps), next, len(ns))
	}
	expiry := ps[0].CoordinatorExpiresAt.Millis
	for _, g := range ps {
		expiry = max(expiry, g.CoordinatorExpiresAt.Millis)
	}
	after := time.Duration((decided(ns[0]) - expiry) * float64(time.Millisecond))
	if after < 0 || after > Bound {
		t.Fatalf("%s: fence %d was granted %v after fence %d's lease expired (the coordinator's clock), want 0 to %v", what, next, after, prev, Bound)
	}
	return after
}

func (tg *Target) acquire(t *testing.T, h holder, reqID, resource string) *wire.Grant {
	t.Helper()
	return granted(t, "acquire "+resource, tg.post(context.Background(), "/v1/acquire", h.acquireBody(reqID, resource, 0)), h.id)
}

func (tg *Target) release(t *testing.T, h holder, resource string, fence uint64) time.Time {
	t.Helper()
	a := tg.post(context.Background(), "/v1/release", h.releaseBody(unique("rel"), resource, fence))
	if a.err != nil || a.status != 200 || !a.reply.OK {
		t.Fatalf("release of %s by %s: %d %s %v", resource, h.id, a.status, a.raw, a.err)
	}
	return a.at
}

// holdFor holds resource for holder id with client.Client.Hold, renewed, so
// that a test's steps may take longer than a TTL on a loaded machine
// without the lease running out under it.
func (tg *Target) holdFor(t *testing.T, id, resource string) *client.Held {
	t.Helper()
	h, err := tg.realClient(t, id).Hold(context.Background(), resource, client.HoldOptions{})
	if err != nil {
		t.Fatalf("hold of %s by %s: %v", resource, id, err)
	}
	return h
}

// releaseHeld releases a hold that must still be alive, and returns when
// the release was answered.
func (tg *Target) releaseHeld(t *testing.T, h *client.Held) time.Time {
	t.Helper()
	if h.Context().Err() != nil {
		t.Fatalf("the hold of %v ended before its release: %v", h.Token(), context.Cause(h.Context()))
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatalf("release of %v: %v", h.Token(), err)
	}
	return time.Now()
}

// queue sends h's waiting acquisition (Wait) and returns once the
// coordinator has it in the queue. The barrier is a copy of the same call
// (same request id and secret) that waits 1 ms: a retry shares its place,
// so the place exists, in the queue's order, by the time the copy is
// answered (denied: the resource is held), whichever of the two the
// coordinator saw first. The copy is sent once the waiting call is
// written to its connection: a place left by the copy with no call
// attached is passed over at a handover (service.Config.KeepPlace), and
// a waiting call that had not left this process while the next ones were
// queued reached the coordinator after the handover.
func (tg *Target) queue(t *testing.T, ctx context.Context, h holder, reqID, resource string) <-chan answer {
	t.Helper()
	var once sync.Once
	wrote := make(chan struct{})
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) }}
	ch := tg.async(httptrace.WithClientTrace(ctx, trace), "/v1/acquire", h.acquireBody(reqID, resource, Wait))
	select {
	case <-wrote:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s's waiting call: not written after 60 s", h.id)
	}
	a := tg.post(context.Background(), "/v1/acquire", h.acquireBody(reqID, resource, time.Millisecond))
	if a.err != nil || a.status != 200 || a.reply.OK || a.reply.HeldBy == "" {
		t.Fatalf("the barrier copy of %s's waiting call: %d %s %v", h.id, a.status, a.raw, a.err)
	}
	return ch
}

// Waiting runs the waiting cases that every coordinator passes with its
// default bounds, each as a subtest: ArrivalOrder and RetriedWaiter on long,
// Handover (its two delays logged), GoneWaiter and Inspect on short. The
// first two hold each grant in raw calls, without renewals, from its answer
// until the test releases it, so long's TTL must be far above what two
// calls take on a loaded machine; the others wait for an expiry, so
// short's TTL is what they wait.
func Waiting(t *testing.T, long, short *Target) {
	t.Run("ArrivalOrder", func(t *testing.T) { ArrivalOrder(t, long) })
	t.Run("Handover", func(t *testing.T) {
		rel, exp := Handover(t, short)
		t.Logf("handover %v after the release, %v after the expiry", rel, exp)
	})
	t.Run("GoneWaiter", func(t *testing.T) { GoneWaiter(t, short) })
	t.Run("RetriedWaiter", func(t *testing.T) { RetriedWaiter(t, long) })
	t.Run("Inspect", func(t *testing.T) { Inspect(t, short) })
}

// ArrivalOrder: eight waiters on a held resource are granted in the order
// they arrived, each as soon as the one before releases, each with a new,
// higher fence.
func ArrivalOrder(t *testing.T, tg *Target) {
	res := unique("order")
	h0 := tg.holdFor(t, "order-h0", res)
	var waits []<-chan answer
	var hs []holder
	for i := 1; i <= 8; i++ {
		h := newHolder("order-w" + strconv.Itoa(i))
		hs = append(hs, h)
		waits = append(waits, tg.queue(t, context.Background(), h, unique("q"), res))
	}
	var cur holder
	fence := h0.Token().Fence
	for i, ch := range waits {
		for j, later := range waits[i:] {
			pending(t, "waiter "+strconv.Itoa(i+j+1), later)
		}
		if i == 0 {
			tg.releaseHeld(t, h0)
		} else {
			tg.release(t, cur, res, fence)
		}
		next := granted(t, "waiter "+strconv.Itoa(i+1), got(t, "waiter "+strconv.Itoa(i+1), ch), hs[i].id)
		if next.Fence != fence+1 {
			t.Fatalf("waiter %d got fence %d after %d", i+1, next.Fence, fence)
		}
		cur, fence = hs[i], next.Fence
	}
	tg.release(t, cur, res, fence)
}

// Handover: a waiter is woken with the lease when it is released, and when
// it expires (by the coordinator's own timer: nothing else is sent), never
// before the expiry. It returns the two latencies: release answered to
// grant received (this process's clock), and expiry to grant decided (the
// coordinator's).
func Handover(t *testing.T, tg *Target) (afterRelease, afterExpiry time.Duration) {
	res := unique("handover")
	b, c := newHolder("handover-b"), newHolder("handover-c")
	a := tg.holdFor(t, "handover-a", res)
	wb := tg.queue(t, context.Background(), b, unique("q"), res)
	released := tg.releaseHeld(t, a)
	ab := got(t, "b after the release", wb)
	gb := granted(t, "b after the release", ab, b.id)
	afterRelease = ab.at.Sub(released)
	woken(t, "b after the release", ab)
	// c waits behind b's lease, which b neither renews nor releases.
	wc := tg.queue(t, context.Background(), c, unique("q"), res)
	ac := got(t, "c after the expiry", wc)
	gc := granted(t, "c after the expiry", ac, c.id)
	woken(t, "c after the expiry", ac)
	// c's grant is decided at b's expiry (and so expires a TTL after b's).
	afterExpiry = tg.handedOnAtExpiry(t, "c after the expiry", res, gb.Fence, gc.Fence)
	tg.release(t, c, res, gc.Fence)
	return afterRelease, afterExpiry
}

// GoneWaiter: a waiter whose client went away is passed over: the next
// waiter gets the lease at the release. On a coordinator that cannot tell
// (KeptPlaces nil: the Worker), the gone waiter is granted and the next
// one gets the lease when that lease expires, by the coordinator's timer:
// what the test checks there.
func GoneWaiter(t *testing.T, tg *Target) {
	res := unique("gone")
	b, c := newHolder("gone-b"), newHolder("gone-c")
	a := tg.holdFor(t, "gone-a", res)
	ga := a.Token()
	bctx, leave := context.WithCancel(context.Background())
	wb := tg.queue(t, bctx, b, unique("q"), res)
	wc := tg.queue(t, context.Background(), c, unique("q"), res)
	leave()
	if ab := got(t, "b", wb); ab.err == nil {
		t.Fatalf("b's call, ended by b, was answered %d %s", ab.status, ab.raw)
	}
	if tg.KeptPlaces != nil {
		// The coordinator saw b go: its place is kept, with no call (the
		// only place on res that is).
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := tg.KeptPlaces(res)
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the coordinator keeps %d places on %s with no call, want 1", n, res)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	tg.releaseHeld(t, a)
	ac := got(t, "c", wc)
	gc := granted(t, "c", ac, c.id)
	woken(t, "c", ac)
	if tg.KeptPlaces != nil {
		if gc.Fence != ga.Fence+1 {
			t.Fatalf("c got fence %d after a's (%d) release: b was not passed over", gc.Fence, ga.Fence)
		}
	} else {
		// b's grant went nowhere; c gets the lease when it expires: a TTL
		// or more after a's last grant, on the coordinator's clock (b's
		// grant, which nobody heard, was decided at a's release).
		if gc.Fence != ga.Fence+2 {
			t.Fatalf("c got fence %d after a's (%d) release; want %d", gc.Fence, ga.Fence, ga.Fence+2)
		}
		last := 0.0
		for _, g := range tg.grantsOn(res, ga.Fence) {
			last = max(last, decided(g))
		}
		if d := decided(gc); d < last+gc.TTLMillis {
			t.Fatalf("c was granted %v ms after a's last grant, before b's lease (a TTL, %v ms) could run out", d-last, gc.TTLMillis)
		}
	}
	tg.release(t, c, res, gc.Fence)
}

// RetriedWaiter: a waiting acquisition whose client gives up and sends it
// again (same request id and secret), and whose grant's reply is then lost
// and sent again, keeps one place and gets one fence: the waiter queued
// after it gets the very next fence once it releases.
func RetriedWaiter(t *testing.T, tg *Target) {
	res := unique("retried")
	b, c := newHolder("retried-b"), newHolder("retried-c")
	a := tg.holdFor(t, "retried-a", res)
	ga := a.Token()
	bID := unique("q")
	// b's first call: its client gives up while it waits.
	bctx, giveUp := context.WithCancel(context.Background())
	first := tg.queue(t, bctx, b, bID, res)
	wc := tg.queue(t, context.Background(), c, unique("q"), res)
	giveUp()
	got(t, "b's first call", first)
	// b sends it again; the reply to it (the grant) is lost, so b sends it
	// once more.
	body := b.acquireBody(bID, res, 30*time.Second)
	tg.Proxy.SetPolicy(func(call *faultproxy.Call) faultproxy.Action {
		if call.Path == "/v1/acquire" && bytes.Equal(call.Body, []byte(body)) {
			tg.Proxy.SetPolicy(nil)
			return faultproxy.Action{Drop: true}
		}
		return faultproxy.Action{}
	})
	retry := tg.async(context.Background(), "/v1/acquire", body)
	a2 := tg.post(context.Background(), "/v1/acquire", b.acquireBody(bID, res, time.Millisecond)) // the barrier
	if a2.err != nil || a2.reply.OK {
		t.Fatalf("barrier: %d %s %v", a2.status, a2.raw, a2.err)
	}
	tg.releaseHeld(t, a)
	if r := got(t, "b's retry", retry); r.err == nil {
		t.Fatalf("the dropped reply came through: %d %s", r.status, r.raw)
	}
	gb := granted(t, "b's last retry", tg.post(context.Background(), "/v1/acquire", body), b.id)
	if gb.Fence != ga.Fence+1 {
		t.Fatalf("b got fence %d after %d", gb.Fence, ga.Fence)
	}
	pending(t, "c while b holds", wc)
	tg.release(t, b, res, gb.Fence)
	gc := granted(t, "c", got(t, "c", wc), c.id)
	if gc.Fence != gb.Fence+1 {
		t.Fatalf("c got fence %d after b's %d: b had a second place or fence", gc.Fence, gb.Fence)
	}
	tg.release(t, c, res, gc.Fence)
}

// Inspect: the answers of /v1/inspect, and an observer woken by a grant, a
// release and an expiry.
func Inspect(t *testing.T, tg *Target) {
	res := unique("inspect")
	ctx := context.Background()
	inspect := func(body string) answer {
		t.Helper()
		a := tg.post(ctx, "/v1/inspect", body)
		if a.err != nil || a.status != 200 || !a.reply.OK || a.reply.Held == nil {
			t.Fatalf("inspect %s: %d %s %v", body, a.status, a.raw, a.err)
		}
		return a
	}
	if a := inspect(`{"resource":"` + res + `"}`); a.raw != `{"ok":true,"held":false,"lastFence":0}` {
		t.Fatalf("a resource never held: %s", a.raw)
	}
	h := newHolder("inspect-a")
	ob := tg.async(ctx, "/v1/inspect", `{"resource":"`+res+`","afterFence":0,"waitMillis":30000}`)
	g := tg.acquire(t, h, unique("q"), res)
	if a := got(t, "observer of the grant", ob); a.err != nil || a.reply.Current() != g.Fence || a.reply.HolderID != h.id {
		t.Fatalf("the observer of the grant saw %d %s %v", a.status, a.raw, a.err)
	}
	a := inspect(`{"resource":"` + res + `"}`)
	if a.reply.Current() != g.Fence || a.reply.HolderID != h.id || a.reply.RemainingMillis <= 0 || a.reply.RemainingMillis > g.TTLMillis || a.reply.LastFence != nil {
		t.Fatalf("a held resource: %s", a.raw)
	}
	// Whether the release comes before or after the observer registers,
	// it answers with the resource free.
	ob = tg.async(ctx, "/v1/inspect", fmt.Sprintf(`{"resource":%q,"afterFence":%d,"waitMillis":30000}`, res, g.Fence))
	tg.release(t, h, res, g.Fence)
	if a := got(t, "observer of the release", ob); a.err != nil || a.reply.Current() != 0 || a.reply.LastFence == nil || *a.reply.LastFence != g.Fence {
		t.Fatalf("the observer of the release saw %d %s %v", a.status, a.raw, a.err)
	}
	g2 := tg.acquire(t, h, unique("q"), res)
	// Woken at the expiry: the end of its wait would answer the same.
	wait := tg.TTL + Wait
	ob = tg.async(ctx, "/v1/inspect", fmt.Sprintf(`{"resource":%q,"afterFence":%d,"waitMillis":%d}`, res, g2.Fence, wait.Milliseconds()))
	a = got(t, "observer of the expiry", ob)
	if took := a.at.Sub(a.sent); a.err != nil || a.reply.Current() != 0 || *a.reply.LastFence != g2.Fence || took >= wait {
		t.Fatalf("the observer of the expiry saw %d %s %v after %v (its wait: %v)", a.status, a.raw, a.err, took, wait)
	}
	for _, bad := range []struct {
		body string
		code string
	}{
		{`{"resource":"r","waitMillis":5}`, wire.CodeInvalidValue},
		{`{"resource":"r","secret":"0123456789abcdef"}`, wire.CodeUnknownField},
		{`{"resource":"r","afterFence":1,"waitMillis":` + strconv.Itoa(wire.MaxWaitMillis) + `}`, wire.CodeInvalidValue},
	} {
		a := tg.post(ctx, "/v1/inspect", bad.body)
		if e := wire.ParseError(a.status, []byte(a.raw)); e == nil || e.Code != bad.code || a.status != 400 {
			t.Fatalf("%s: %d %s, want %s", bad.body, a.status, a.raw, bad.code)
		}
	}
}

var errNoDebug = errors.New("holdtest: no debug endpoint")

// KeptPlacesAt reads the kept places from a native coordinator's
// /debug/waiting at base (http://HOST:PORT).
func KeptPlacesAt(base string) func(resource string) (int, error) {
	return func(resource string) (int, error) {
		if base == "" {
			return 0, errNoDebug
		}
		resp, err := http.Get(base + "/debug/waiting?resource=" + url.QueryEscape(resource))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var st struct {
			Kept int `json:"kept"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return 0, err
		}
		return st.Kept, nil
	}
}

// QueueBounds: the coordinator's bounds on waiting (its -max-wait and
// -max-waiters, Target.MaxWait and MaxWaiters), each refusal changing
// nothing. A wait over MaxWait is 400 invalid_value, for an acquisition and
// for an observer; one of exactly MaxWait waits. With MaxWaiters calls
// waiting on a resource, one more waiting acquisition or observer is 503
// too_many_waiters, while a call that does not wait is answered as usual
// and a retry of a waiting call (same request id and secret) is not a new
// waiter: it keeps its place, even once that call's client went away. A
// handover makes room again (on a coordinator that cannot tell that a
// client went away, KeptPlaces nil, the gone call counts until its wait
// ends: there the second handover does). At the end every waiter is served once, in
// the order of its first arrival, with consecutive fences: nothing refused
// took a place.
func QueueBounds(t *testing.T, tg *Target) {
	if tg.MaxWait <= 30*time.Second || tg.MaxWaiters < 2 {
		t.Fatalf("the target's MaxWait (%v) must be over 30 s and its MaxWaiters (%d) at least 2", tg.MaxWait, tg.MaxWaiters)
	}
	ctx := context.Background()
	res := unique("bounds")
	// h0 holds the resource throughout, renewing (the TTL is short).
	h0 := newHolder("bounds-h0")
	held := tg.holdFor(t, h0.id, res)
	g0 := held.Token()
	refused := func(what string, a answer, status int, code string) {
		t.Helper()
		if e := wire.ParseError(a.status, []byte(a.raw)); a.err != nil || e == nil || e.Code != code || a.status != status {
			t.Fatalf("%s: %d %s %v, want %d %s", what, a.status, a.raw, a.err, status, code)
		}
	}
	x := newHolder("bounds-x")
	over := tg.MaxWait + time.Millisecond
	refused("a wait over -max-wait", tg.post(ctx, "/v1/acquire", x.acquireBody(unique("q"), res, over)), 400, wire.CodeInvalidValue)
	refused("an observer's wait over -max-wait", tg.post(ctx, "/v1/inspect",
		fmt.Sprintf(`{"resource":%q,"afterFence":%d,"waitMillis":%d}`, res, g0.Fence, over.Milliseconds())), 400, wire.CodeInvalidValue)

	// MaxWaiters waiters, the first waiting exactly MaxWait; the last one's
	// client will go away.
	lctx, leave := context.WithCancel(ctx)
	defer leave()
	var ws []holder
	var ids []string
	var waits []<-chan answer
	for i := range tg.MaxWaiters {
		h, id := newHolder("bounds-w"+strconv.Itoa(i+1)), unique("q")
		wait, cctx := 30*time.Second, ctx
		if i == 0 {
			wait = tg.MaxWait
		}
		if i == tg.MaxWaiters-1 {
			cctx = lctx
		}
		ch := tg.async(cctx, "/v1/acquire", h.acquireBody(id, res, wait))
		// The barrier: a copy that waits 1 ms (a retry: it shares the
		// place, and is no new waiter).
		if a := tg.post(ctx, "/v1/acquire", h.acquireBody(id, res, time.Millisecond)); a.err != nil || a.status != 200 || a.reply.HeldBy != h0.id {
			t.Fatalf("the barrier copy of waiter %d: %d %s %v", i+1, a.status, a.raw, a.err)
		}
		ws, ids, waits = append(ws, h), append(ids, id), append(waits, ch)
	}
	// Full: one more waiter or observer is refused; a call that does not
	// wait, and an inspection, are answered.
	refused("a waiter beyond -max-waiters", tg.post(ctx, "/v1/acquire", x.acquireBody(unique("q"), res, 30*time.Second)), 503, wire.CodeTooManyWaiters)
	refused("an observer beyond -max-waiters", tg.post(ctx, "/v1/inspect",
		fmt.Sprintf(`{"resource":%q,"afterFence":%d,"waitMillis":30000}`, res, g0.Fence)), 503, wire.CodeTooManyWaiters)
	if a := tg.post(ctx, "/v1/acquire", x.acquireBody(unique("q"), res, 0)); a.err != nil || a.status != 200 || a.reply.OK || a.reply.HeldBy != h0.id {
		t.Fatalf("an acquisition that does not wait, with the queue full: %d %s %v", a.status, a.raw, a.err)
	}
	if a := tg.post(ctx, "/v1/inspect", `{"resource":"`+res+`"}`); a.err != nil || a.status != 200 || a.reply.HolderID != h0.id {
		t.Fatalf("an inspection with the queue full: %d %s %v", a.status, a.raw, a.err)
	}
	// The last waiter's client goes away, and it sends its call again (a
	// retry): it keeps its place, full as the queue is.
	last := len(ws) - 1
	leave()
	if a := got(t, "the call whose client went away", waits[last]); a.err == nil {
		t.Fatalf("the call whose client went away was answered %d %s", a.status, a.raw)
	}
	waits[last] = tg.async(ctx, "/v1/acquire", ws[last].acquireBody(ids[last], res, 30*time.Second))
	if a := tg.post(ctx, "/v1/acquire", ws[last].acquireBody(ids[last], res, time.Millisecond)); a.err != nil || a.status != 200 || a.reply.HeldBy != h0.id {
		t.Fatalf("the barrier of the last waiter's retry, with the queue full: %d %s %v", a.status, a.raw, a.err)
	}
	refused("a waiter beyond -max-waiters, after the retry", tg.post(ctx, "/v1/acquire", x.acquireBody(unique("q"), res, 30*time.Second)), 503, wire.CodeTooManyWaiters)
	// A handover makes room: x queues behind the others.
	tg.releaseHeld(t, held)
	g := granted(t, "waiter 1 (waiting -max-wait)", got(t, "waiter 1", waits[0]), ws[0].id)
	if g.Fence != g0.Fence+1 {
		t.Fatalf("waiter 1 got fence %d after %d", g.Fence, g0.Fence)
	}
	cur, fence, from := ws[0], g.Fence, 1
	if tg.KeptPlaces == nil {
		// A coordinator that cannot tell that a client went away (the
		// Worker) counts the last waiter's first call until its wait ends,
		// beside the retry: still full; the next handover makes room.
		refused("a waiter beyond -max-waiters, a gone call still counted", tg.post(ctx, "/v1/acquire", x.acquireBody(unique("q"), res, 30*time.Second)), 503, wire.CodeTooManyWaiters)
		tg.release(t, cur, res, fence)
		g := granted(t, "waiter 2", got(t, "waiter 2", waits[1]), ws[1].id)
		if g.Fence != fence+1 {
			t.Fatalf("waiter 2 got fence %d after %d", g.Fence, fence)
		}
		cur, fence, from = ws[1], g.Fence, 2
	}
	xw := tg.queue(t, ctx, x, unique("q"), res)
	ws, waits = append(ws, x), append(waits, xw)
	for i := from; i < len(ws); i++ {
		for j := i; j < len(ws); j++ {
			pending(t, "waiter "+strconv.Itoa(j+1), waits[j])
		}
		tg.release(t, cur, res, fence)
		next := granted(t, "waiter "+strconv.Itoa(i+1), got(t, "waiter "+strconv.Itoa(i+1), waits[i]), ws[i].id)
		if next.Fence != fence+1 {
			t.Fatalf("waiter %d (%s) got fence %d after %d", i+1, ws[i].id, next.Fence, fence)
		}
		cur, fence = ws[i], next.Fence
	}
	tg.release(t, cur, res, fence)
}
