//go:build e2e

package workere2e

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/test/rig/faultproxy"
	"github.com/lease-fence/lease-fence/test/rig/holdtest"
	"github.com/lease-fence/lease-fence/test/rig/syncio"
)

// holdTTL is the lease length of the second runtime, which the holding
// suite uses: short, so that expiries happen within the test, and long
// enough that a hold or a leader renewing every third of it on real timers
// outlives a stall of its process, wrangler dev or workerd of up to 3 s,
// which a loaded 2-core runner reaches (at 2 s, the native suite's holds
// and leaders were lost to such stalls).
const holdTTL = 5 * time.Second

// The side runtimes' bounds on waiting (LEASE_MAX_WAIT_MS and
// LEASE_MAX_WAITERS, per resource), for holdtest.QueueBounds: over the
// suite's 30 s waits and the 8 waiters of ArrivalOrder.
const (
	holdMaxWait    = 45 * time.Second
	holdMaxWaiters = 12
)

// The waiting tests that hold each waiter's grant in raw calls, without
// renewals, from its answer until the test releases it (ArrivalOrder,
// RetriedWaiter and QueueBounds) run on the first runtime (mainTarget),
// whose TTL (runtimeTTL) is far above what two calls take on a loaded
// machine (3.2 s each at load 33, when a 5 s lease expired between them).
// None of them waits for an expiry.

// sideRuntime is a `wrangler dev` beside the first, with variables of its
// own, started by the first test that needs it and stopped by TestMain.
type sideRuntime struct {
	name  string
	ttl   time.Duration
	once  sync.Once
	w     *wranglerDev
	dir   string // its state, removed when it stops
	err   error
	log   syncio.Buffer
	proxy *faultproxy.Proxy
}

var (
	// holdRuntime, with LEASE_TTL_MS of holdTTL: the holding suite.
	holdRuntime = &sideRuntime{name: "the second wrangler dev", ttl: holdTTL}
)

func (r *sideRuntime) start() (*holdtest.Target, error) {
	r.once.Do(func() {
		r.err = func() error {
			dir, err := os.MkdirTemp("", "lease-fence-e2e-hold-")
			if err != nil {
				return err
			}
			r.dir = dir
			r.w, err = startWrangler(dir, &r.log,
				"--var", "LEASE_TTL_MS:"+strconv.FormatInt(r.ttl.Milliseconds(), 10),
				"--var", "LEASE_MAX_WAIT_MS:"+strconv.FormatInt(holdMaxWait.Milliseconds(), 10),
				"--var", "LEASE_MAX_WAITERS:"+strconv.Itoa(holdMaxWaiters))
			if err != nil {
				os.RemoveAll(dir)
				return errors.New(r.name + ": " + err.Error())
			}
			r.proxy, err = faultproxy.Start(r.w.url())
			return err
		}()
	})
	if r.err != nil {
		return nil, r.err
	}
	return &holdtest.Target{Name: "worker", Proxy: r.proxy, TTL: r.ttl, MaxWait: holdMaxWait, MaxWaiters: holdMaxWaiters}, nil
}

func (r *sideRuntime) stop() {
	if r.proxy != nil {
		r.proxy.Close()
	}
	if r.w != nil {
		r.w.stop()
	}
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
}

func startHoldRuntime() (*holdtest.Target, error) { return holdRuntime.start() }

// stopHoldRuntime ends the side runtime, if it was started.
func stopHoldRuntime() { holdRuntime.stop() }

func holdTarget(t *testing.T) *holdtest.Target {
	t.Helper()
	tg, err := startHoldRuntime()
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestWaiting runs the server side of the holding suite against the Worker:
// each waiting call is held open in its resource's Durable Object.
func TestWaiting(t *testing.T) {
	tg := holdTarget(t)
	long := mainTarget(t)
	holdtest.Waiting(t, long, tg)
	t.Run("QueueBounds", func(t *testing.T) { holdtest.QueueBounds(t, long) })
}

// mainTarget is the first runtime as a holdtest.Target, through a fault
// proxy of its own to the address it listens on now (TestRestart moves it),
// closed when the test ends.
func mainTarget(t *testing.T) *holdtest.Target {
	t.Helper()
	p, err := faultproxy.Start("http://" + addr.Load().(string))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &holdtest.Target{Name: "worker", Proxy: p, TTL: runtimeTTL, MaxWait: holdMaxWait, MaxWaiters: holdMaxWaiters}
}

// holdRuns is how many seeded runs RenewalsUnderFaults makes against the
// Worker: HOLD_RUNS, 40 unless set (`make soak-hold` runs more). The Go
// client's hold is the same code against either coordinator (cmd/coordinator
// runs it 40 times against the native one, and service checks the same
// rule over 200 runs in synctest bubbles); what the Worker adds is its
// answer to each renewal (granted, or refused as expired), which every run
// meets many times, at each of the five fault rates eight times in 40 runs.
func holdRuns(t *testing.T) int {
	s := os.Getenv("HOLD_RUNS")
	if s == "" {
		return 40
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 5 {
		t.Fatalf("HOLD_RUNS=%q: want a whole number of at least 5", s)
	}
	return n
}

// TestHolding runs the client side of the holding suite against the
// Worker: a hold that outlives 10 TTLs, seeded runs of renewals under
// dropped and held-back replies (holdRuns), elections of five campaigner
// processes whose leader is killed.
func TestHolding(t *testing.T) {
	tg := holdTarget(t)
	t.Run("OutlivesTenTTLs", func(t *testing.T) { holdtest.HoldOutlivesTenTTLs(t, tg) })
	t.Run("RenewalsUnderFaults", func(t *testing.T) { holdtest.RenewalsUnderFaults(t, tg, holdRuns(t)) })
	t.Run("Elections", func(t *testing.T) { holdtest.Elections(t, tg) })
}
