package httpfence

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lease-fence/lease-fence/internal/prom"
)

// RefusalReasons are the codes a write can be refused with (the error
// codes of the answers the proxy makes itself before forwarding), the
// values of the reason label of leasefence_proxy_refusals_total.
var RefusalReasons = []string{
	"stale_fence", "missing_fence", "bad_fence_header", "body_too_large", "bad_body",
	"busy", "queue_full", "queue_timeout", "store_failed",
}

// metrics are what GET /.lease-fence/metrics serves, on a registry of the
// proxy's own (internal/prom, as the coordinator's /metrics). Counters on
// the write path are resolved once: a write costs a few atomic adds and one
// histogram observation.
type metrics struct {
	reg          *prometheus.Registry
	forwarded    prometheus.Counter
	admitted     prometheus.Counter
	raised       prometheus.Counter
	refused      map[string]prometheus.Counter
	upstreamRead prometheus.Counter
	upstreamWrit prometheus.Counter
	waiting      prometheus.Gauge
	forwarding   prometheus.Gauge
	forwardedDur prometheus.Observer
	refusedDur   prometheus.Observer
}

func newMetrics() *metrics {
	m := &metrics{reg: prom.NewRegistry(), refused: map[string]prometheus.Counter{}}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	m.forwarded = counter("leasefence_proxy_writes_forwarded_total", "Writes admitted and forwarded to the upstream (whatever it answered).")
	m.admitted = counter("leasefence_proxy_admitted_total", "Tokens admitted by the fence check: writes, and POST /.lease-fence/admit.")
	m.raised = counter("leasefence_proxy_floor_raises_total", "Admissions that raised the floor above the highest fence the proxy knew for the resource (the first admission of a resource since the proxy started included).")
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasefence_proxy_refusals_total",
		Help: "Writes (and admits) refused before anything was forwarded, by reason: the error code of the answer (stale_fence is a refusal by the fence check)."}, []string{"reason"})
	for _, code := range RefusalReasons {
		m.refused[code] = refused.WithLabelValues(code)
	}
	upstream := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasefence_proxy_upstream_errors_total",
		Help: "Requests the upstream gave no whole answer to (502), by kind: read or write."}, []string{"kind"})
	m.upstreamRead, m.upstreamWrit = upstream.WithLabelValues("read"), upstream.WithLabelValues("write")
	inFlight := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "leasefence_proxy_writes_in_flight",
		Help: "Writes in progress, by state: waiting (for their turn on the resource) or forwarding (admitted, at the upstream)."}, []string{"state"})
	m.waiting, m.forwarding = inFlight.WithLabelValues("waiting"), inFlight.WithLabelValues("forwarding")
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "leasefence_proxy_write_duration_seconds",
		Help:    "Time from a write's arrival to its answer, by outcome: forwarded, or refused (by the proxy, before forwarding).",
		Buckets: prom.LatencyBuckets}, []string{"outcome"})
	m.forwardedDur, m.refusedDur = dur.WithLabelValues("forwarded"), dur.WithLabelValues("refused")
	m.reg.MustRegister(refused, upstream, inFlight, dur)
	return m
}

// refusal counts a refusal with code (codes outside RefusalReasons are not
// refusals: the answer of a write that was forwarded).
func (m *metrics) refusal(code string) {
	if c := m.refused[code]; c != nil {
		c.Inc()
	}
}
