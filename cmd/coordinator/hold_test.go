//go:build linux

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/wire"
	"github.com/lease-fence/lease-fence/test/rig/faultproxy"
	"github.com/lease-fence/lease-fence/test/rig/holdtest"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// startHoldTarget starts a durable coordinator with the TTL ttl and its
// debug endpoint, and a fault proxy in front of it.
func startHoldTarget(t *testing.T, ttl time.Duration, args ...string) *holdtest.Target {
	t.Helper()
	var errs syncio.Buffer
	args = append([]string{"-init", "-state", t.TempDir() + "/state", "-ttl", ttl.String(), "-debug-addr", "127.0.0.1:0"}, args...)
	srv := startKilledChild(t, &errs, args...)
	var debug string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, rest, ok := strings.Cut(errs.String(), "debug on "); ok {
			debug = strings.TrimSuffix(strings.Fields(rest)[0], "/debug/memory")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no debug line in %q", errs.String())
		}
		time.Sleep(time.Millisecond)
	}
	proxy, err := faultproxy.Start(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	return &holdtest.Target{Name: "native", Proxy: proxy, TTL: ttl, KeptPlaces: holdtest.KeptPlacesAt(debug)}
}

// TestWaiting runs the server side of the holding suite (test/rig/holdtest)
// against the real server, durable, through the fault proxy: the tests
// that wait for an expiry on a coordinator with holdTTL, those that
// release each grant themselves on one with waitTTL.
func TestWaiting(t *testing.T) {
	t.Parallel()
	long := startHoldTarget(t, waitTTL)
	tg := startHoldTarget(t, holdTTL)
	holdtest.Waiting(t, long, tg)
}

// TestQueueBounds runs the suite's bounds on waiting against the real
// server, durable, with -max-wait 45s and -max-waiters 6 (its own server:
// the bound counts every waiting call of the coordinator), and waitTTL.
func TestQueueBounds(t *testing.T) {
	t.Parallel()
	tg := startHoldTarget(t, waitTTL, "-max-wait", "45s", "-max-waiters", "6")
	tg.MaxWait, tg.MaxWaiters = 45*time.Second, 6
	holdtest.QueueBounds(t, tg)
}

// TestWaitOutlastsTheServersTimeouts: a call that waits longer than the
// server's read and write timeouts is neither cut off nor cancelled by them
// (the handler moves its connection's deadlines): it is answered when its
// wait ends, with the ordinary denial.
func TestWaitOutlastsTheServersTimeouts(t *testing.T) {
	t.Parallel()
	srv := startChild(t, "", "-memory", "-read-timeout", "200ms", "-write-timeout", "200ms")
	a := holder(t, srv.url, "a")
	ctx := context.Background()
	if _, err := a.Acquire(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	body := `{"requestId":"w1","resource":"r","holderId":"b","sentAt":{"millis":1,"domain":"b"},"kind":"acquire","secret":"0123456789abcdef","waitMillis":1000}`
	start := time.Now()
	resp, err := http.Post(srv.url+"/v1/acquire", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("the waiting call was cut off after %v: %v", time.Since(start), err)
	}
	defer resp.Body.Close()
	var reply wire.Reply
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil || resp.StatusCode != 200 || reply.HeldBy != "a" {
		t.Fatalf("after %v: %d %+v %v", time.Since(start), resp.StatusCode, reply, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("answered after %v, before its wait ended", d)
	}
}

// holdTTL is the lease length of the holding suite's coordinators: its
// holds and campaigners renew on real timers every third of it, so a hold
// survives a stall of its process (or the coordinator's) of up to 3 s,
// which a loaded 2-core runner under -race reaches; at 1 s a campaigner lost
// its lead and a hold its lease to a stall beside two CPU burners, and at
// 1.5 s RetriedWaiter's first holder lost its lease.
const holdTTL = 5 * time.Second

// waitTTL is the lease length of the coordinators of ArrivalOrder,
// RetriedWaiter and QueueBounds, which hold each grant in raw calls (no
// renewals) from its answer until the test's release: far above what two
// calls take on a loaded machine (3.2 s each at load 33, when a 5 s lease
// expired between them and the next waiter was granted before the
// release). None of them waits for an expiry.
const waitTTL = 120 * time.Second

// faultRuns is how many seeded runs RenewalsUnderFaults makes against the
// real server. The rule it checks (the hold's context ends at or before
// the holder's deadline) is Client.Hold's, which service's
// TestHoldDeadlineUnderFaults and TestHoldsDeadlineUnderFaultsBatched
// check over 200 seeded runs each; here it is checked over real HTTP and a
// real coordinator. A loss timer set past the deadline fails the first run
// that loses its lease (seed 0 here, seed 4 in service), and about one run
// in four loses it.
const faultRuns = 40

// TestHolding runs the client side of the holding suite against the real
// server through the fault proxy: a hold that outlives 10 TTLs, 40 seeded
// runs of renewals under dropped and held-back replies, and elections of
// five campaigner processes whose leader is killed. The long hold has a
// coordinator of its own and runs beside the rest, which share one (the
// seeded runs count every request at the proxy); both wait on real timers,
// so TestHolding runs beside the package's other parallel tests.
func TestHolding(t *testing.T) {
	t.Parallel()
	t.Run("OutlivesTenTTLs", func(t *testing.T) {
		t.Parallel()
		holdtest.HoldOutlivesTenTTLs(t, startHoldTarget(t, holdTTL))
	})
	t.Run("Faults", func(t *testing.T) {
		t.Parallel()
		tg := startHoldTarget(t, holdTTL)
		t.Run("RenewalsUnderFaults", func(t *testing.T) { holdtest.RenewalsUnderFaults(t, tg, faultRuns) })
		t.Run("Elections", func(t *testing.T) { holdtest.Elections(t, tg) })
	})
}
