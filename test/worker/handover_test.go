//go:build e2e

package workere2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/core/clock"
	"github.com/lease-fence/lease-fence/core/lease"
	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// handoverTTL is the lease length of TestExpiryHandoverFences' runtime:
// short, so that a chain of expiry handovers fits in the test.
const handoverTTL = 1000 * time.Millisecond

// TestExpiryHandoverFences: with other objects busy (a resource fenced
// over and over, a holder renewing every 100 ms on another), a chain of
// expiry handovers on a third resource: each waiting call is granted when
// the previous lease runs out, and every fence of that resource is the
// previous plus one, each answered to the call that waited for it; at the
// end no grant is outstanding that nobody was answered (the resource's
// fence is the last answered). A grant made and persisted but never
// answered, or a fence counter advanced without a grant, shows as a gap.
func TestExpiryHandoverFences(t *testing.T) {
	log := &syncio.Buffer{}
	w, err := startWrangler(t.TempDir(), log, "--var", "LEASE_TTL_MS:"+fmt.Sprint(handoverTTL.Milliseconds()),
		"--var", "LEASE_MAX_WAIT_MS:20000")
	if err != nil {
		t.Fatalf("wrangler dev: %v\n%s", err, log.String())
	}
	t.Cleanup(w.stop)
	url := w.url()
	defer func() {
		if t.Failed() {
			t.Log(log.String())
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	var bgErr atomic.Value
	// Resource A: acquired and released in a loop, its fences counted.
	bg.Add(1)
	go func() {
		defer bg.Done()
		want := uint64(1)
		for i := 0; ctx.Err() == nil; i++ {
			r, err := call(ctx, url, wire.OpAcquire, fmt.Sprint("a-acq-", i), "ho-A", "a-holder", 0, 0)
			if ctx.Err() != nil {
				return
			}
			if err != nil || !r.OK || r.Grant == nil {
				bgErr.Store(fmt.Sprintf("A acquire %d: %v %+v", i, err, r))
				return
			}
			if r.Grant.Fence != want {
				bgErr.Store(fmt.Sprintf("A: fence %d after %d", r.Grant.Fence, want-1))
			}
			want = r.Grant.Fence + 1
			if _, err := call(ctx, url, wire.OpRelease, fmt.Sprint("a-rel-", i), "ho-A", "a-holder", r.Grant.Fence, 0); err != nil && ctx.Err() == nil {
				bgErr.Store(fmt.Sprintf("A release %d: %v", i, err))
				return
			}
		}
	}()
	// Resource B: one holder renewing every 100 ms. A renewal refused as
	// expired is a fault only if the lease cannot have run out: if its
	// answer came less than a TTL after the send of the call that last
	// extended the lease (the Worker extended it no earlier than that
	// send, and decided this one no later than its answer). On a loaded
	// machine a call can take longer than the 1 s TTL; B then acquires
	// the resource again and goes on.
	bg.Add(1)
	go func() {
		defer bg.Done()
		var f uint64
		var extendedAt time.Time // the send of the call that last extended B's lease
		acquire := func(i int) bool {
			sent := time.Now()
			r, err := call(ctx, url, wire.OpAcquire, fmt.Sprint("b-acq-", i), "ho-B", "b-holder", 0, 0)
			if ctx.Err() != nil {
				return false
			}
			if err != nil || !r.OK || r.Grant == nil {
				bgErr.Store(fmt.Sprintf("B acquire %d: %v %+v", i, err, r))
				return false
			}
			f, extendedAt = r.Grant.Fence, sent
			return true
		}
		if !acquire(0) {
			return
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			sent := time.Now()
			r, err := call(ctx, url, wire.OpRenew, fmt.Sprint("b-ren-", i), "ho-B", "b-holder", f, 0)
			if ctx.Err() != nil {
				return
			}
			if err == nil && r.OK {
				extendedAt = sent
				continue
			}
			if err == nil && r.Reason == "expired" {
				if since := time.Since(extendedAt); since >= handoverTTL {
					if !acquire(i + 1) {
						return
					}
					continue
				}
			}
			bgErr.Store(fmt.Sprintf("B renew %d (answered %v after the send that last extended the lease): %v %+v", i, time.Since(extendedAt), err, r))
			return
		}
	}()
	// Resource C: each holder acquires and lets its lease run out; the
	// next one waits for it and is handed the resource at the expiry.
	const rounds = 12
	r, err := call(context.Background(), url, wire.OpAcquire, "c-acq-0", "ho-C", "c-holder-0", 0, 0)
	if err != nil || !r.OK || r.Grant == nil {
		t.Fatalf("C first acquire: %v %+v", err, r)
	}
	fences := []uint64{r.Grant.Fence}
	for i := 1; i <= rounds; i++ {
		r, err := call(context.Background(), url, wire.OpAcquire, fmt.Sprint("c-acq-", i), "ho-C", fmt.Sprint("c-holder-", i), 0, 15*time.Second)
		if err != nil || !r.OK || r.Grant == nil {
			t.Fatalf("C round %d: the waiting call was not granted: %v %+v", i, err, r)
		}
		fences = append(fences, r.Grant.Fence)
	}
	cancel()
	bg.Wait()
	if v := bgErr.Load(); v != nil {
		t.Errorf("background: %v", v)
	}
	for i, f := range fences {
		if f != uint64(i+1) {
			t.Fatalf("C's fences are not 1,2,3...: %v", fences)
		}
	}
	// Nothing granted after the last answer: the last holder's lease runs
	// out and the resource's last fence is still the last one answered.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := call(context.Background(), url, wire.OpInspect, "", "ho-C", "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if s.Held != nil && !*s.Held {
			if s.LastFence == nil || *s.LastFence != fences[len(fences)-1] {
				t.Fatalf("C: last fence %v after the last answered %d", s.LastFence, fences[len(fences)-1])
			}
			break
		}
		if s.Fence != fences[len(fences)-1] {
			t.Fatalf("C: fence %d held after the last answered %d (granted to nobody's call)", s.Fence, fences[len(fences)-1])
		}
		if time.Now().After(deadline) {
			t.Fatal("C: still held 20 s after the last grant")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call sends one call straight to the runtime and decodes its answer.
func call(ctx context.Context, url string, op wire.Op, id, resource, holder string, fence uint64, wait time.Duration) (wire.Reply, error) {
	var m wire.Message
	if op == wire.OpInspect {
		m = wire.Message{Op: op, Request: lease.Request{Resource: resource}}
	} else {
		q := lease.Request{RequestID: id, Resource: resource, HolderID: holder, Fence: fence}
		if op != wire.OpRelease {
			q.Kind, q.SentAt = lease.Kind(op), clock.At("agent", 1)
		}
		m = wire.Message{Op: op, Request: q, Secret: "secret-of-" + holder + "-0123456789", Wait: wait}
	}
	body, err := wire.EncodeMessage(m)
	if err != nil {
		return wire.Reply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+op.Path(), strings.NewReader(string(body)))
	if err != nil {
		return wire.Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := directClient.Do(req)
	if err != nil {
		return wire.Reply{}, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return wire.Reply{}, fmt.Errorf("%d %s", resp.StatusCode, data)
	}
	var r wire.Reply
	if err := json.Unmarshal(data, &r); err != nil {
		return wire.Reply{}, err
	}
	return r, nil
}
