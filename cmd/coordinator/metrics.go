//go:build !js && !wasip1

package main

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lease-fence/lease-fence/internal/prom"
	"github.com/lease-fence/lease-fence/service"
	"github.com/lease-fence/lease-fence/service/httpapi"
	"github.com/lease-fence/lease-fence/service/wire"
)

// metrics are what /metrics serves (Prometheus text format, through
// github.com/prometheus/client_golang, on a registry of the server's own).
// Counters on the call path are resolved once, so a call costs a few
// atomic adds and two histogram observations, never a label lookup.
type metrics struct {
	reg      *prometheus.Registry
	calls    map[wire.Op]map[string]prometheus.Counter // by op and result
	refusals map[string]prometheus.Counter             // by code
	other    prometheus.Counter                        // refusals with a code of no one's (none expected)
	requests map[wire.Op]prometheus.Observer           // request latency by op ("" for other paths)
	syncs    prometheus.Histogram
}

// results are the results of each operation (httpapi.Answered), refused
// included.
var results = map[wire.Op][]string{
	wire.OpAcquire:  {httpapi.ResultGranted, httpapi.ResultDenied, httpapi.ResultRefused},
	wire.OpRenew:    {httpapi.ResultGranted, httpapi.ResultExpired, httpapi.ResultRefused},
	wire.OpRelease:  {httpapi.ResultOK, httpapi.ResultExpired, httpapi.ResultRefused},
	wire.OpInspect:  {httpapi.ResultHeld, httpapi.ResultFree, httpapi.ResultRefused},
	wire.OpRevoke:   {httpapi.ResultOK, httpapi.ResultRefused},
	wire.OpProclaim: {httpapi.ResultOK, httpapi.ResultExpired, httpapi.ResultRefused},
	"":              {httpapi.ResultRefused}, // a path that is none of the calls
}

// storeStats are what the metrics read from the store when scraped; a
// store that cannot tell one leaves it nil, and its metric is not served
// (the PostgreSQL store does not count expiries).
type storeStats struct {
	leases  func() int
	issued  func() uint64
	expired func() uint64
}

// newSyncHistogram is the histogram of the state's synced writes
// (timedPersister), made before the store it times.
func newSyncHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "leasefence_store_sync_seconds",
		Help:    "Time of each synced write of the state (a grant or renewal, made durable before it is answered).",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}})
}

func newMetrics(svc *service.Service, store storeStats, syncs prometheus.Histogram) *metrics {
	m := &metrics{reg: prom.NewRegistry(), calls: map[wire.Op]map[string]prometheus.Counter{},
		refusals: map[string]prometheus.Counter{}, requests: map[wire.Op]prometheus.Observer{}, syncs: syncs}
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasefence_calls_total",
		Help: "Calls answered, by operation (op, empty for a path that is none of the calls) and result (granted, denied, expired, ok, held, free, refused)."},
		[]string{"op", "result"})
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasefence_refusals_total",
		Help: "Calls refused, by the stable error code of the answer (docs/service.md, Errors)."}, []string{"code"})
	requests := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "leasefence_request_duration_seconds",
		Help:    "Time from a request's arrival to its answer, by operation; a waiting call includes its wait.",
		Buckets: prom.LatencyBuckets}, []string{"op"})
	for op, rs := range results {
		m.calls[op] = map[string]prometheus.Counter{}
		for _, r := range rs {
			m.calls[op][r] = calls.WithLabelValues(string(op), r)
		}
		m.requests[op] = requests.WithLabelValues(string(op))
	}
	for _, code := range wire.Codes() {
		m.refusals[code] = refusals.WithLabelValues(code)
	}
	m.other = refusals.WithLabelValues("other")
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.reg.MustRegister(calls, refusals, requests, m.syncs,
		counter("leasefence_grants_total", "New leases granted (waiting acquisitions included; not retries answered with the grant they already had).",
			func() float64 { return float64(svc.Stats().Grants) }),
		counter("leasefence_renewals_total", "Renewals granted.", func() float64 { return float64(svc.Stats().Renewals) }),
		counter("leasefence_releases_total", "Leases ended by a release.", func() float64 { return float64(svc.Stats().Releases) }),
		gauge("leasefence_waiters", "Calls waiting (acquisitions and observers), plus places kept for a retry.",
			func() float64 { return float64(svc.Waiting()) }),
	)
	if store.expired != nil {
		m.reg.MustRegister(counter("leasefence_expiries_total", "Leases that ran out: swept, or replaced by a new grant, once expired.",
			func() float64 { return float64(store.expired()) }))
	}
	if store.leases != nil {
		m.reg.MustRegister(gauge("leasefence_leases_held", "Lease records held: live leases, and expired ones not yet swept (every half TTL).",
			func() float64 { return float64(store.leases()) }))
	}
	if store.issued != nil {
		m.reg.MustRegister(gauge("leasefence_fence_issued", "The highest fence issued so far (the fence high-water mark).",
			func() float64 { return float64(store.issued()) }))
	}
	return m
}

// answered is the httpapi.HandlerOptions.Answered (and auth.Options.Answered)
// of the server.
func (m *metrics) answered(op wire.Op, result string, e *wire.Error) {
	byResult := m.calls[op]
	if byResult == nil {
		byResult = m.calls[""]
	}
	if c := byResult[result]; c != nil {
		c.Inc()
	}
	if e != nil {
		if c := m.refusals[e.Code]; c != nil {
			c.Inc()
		} else {
			m.other.Inc()
		}
	}
}

// timed wraps an API handler with the request latency histogram.
func (m *metrics) timed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wire.SessionPath {
			next.ServeHTTP(w, r) // each of its calls is timed (timedCall)
			return
		}
		start := time.Now()
		next.ServeHTTP(w, r)
		o := m.requests[opOfPath(r.URL.Path)]
		o.Observe(time.Since(start).Seconds())
	})
}

// timedCall observes a call answered on a session (httpapi.SessionOptions.Timed)
// as timed observes a request.
func (m *metrics) timedCall(op wire.Op, d time.Duration) {
	if o := m.requests[op]; o != nil {
		o.Observe(d.Seconds())
	}
}

func opOfPath(path string) wire.Op {
	if op := wire.Op(strings.TrimPrefix(path, "/v1/")); op.Known() && op.Path() == path {
		return op
	}
	return ""
}

// handler serves the registry.
func (m *metrics) handler() http.Handler {
	return prom.Handler(m.reg)
}

// timedPersister times the synced writes of a Persister.
type timedPersister struct {
	service.Persister
	syncs prometheus.Histogram
}

func (p timedPersister) Write(ctx context.Context, b service.Batch, sync bool) error {
	if !sync {
		return p.Persister.Write(ctx, b, false)
	}
	start := time.Now()
	err := p.Persister.Write(ctx, b, true)
	p.syncs.Observe(time.Since(start).Seconds())
	return err
}

// SaveMark passes the fence mark on to the Persister's SaveMark
// (service.MarkSaver: a synced write and a flush, timed as one synced
// write), or writes it synced if it has none.
func (p timedPersister) SaveMark(ctx context.Context, mark uint64) error {
	ms, ok := p.Persister.(service.MarkSaver)
	if !ok {
		return p.Write(ctx, service.Batch{Mark: mark}, true)
	}
	start := time.Now()
	err := ms.SaveMark(ctx, mark)
	p.syncs.Observe(time.Since(start).Seconds())
	return err
}

// Ready passes the Persister's readiness on (pebblestore's full disk).
func (p timedPersister) Ready(ctx context.Context) error {
	if r, ok := p.Persister.(service.Readier); ok {
		return r.Ready(ctx)
	}
	return nil
}
