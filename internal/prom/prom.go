// Package prom holds what lease-fence's servers (cmd/coordinator's
// /metrics, fence-proxy's /.lease-fence/metrics) share in their Prometheus
// metrics: a registry of the server's own with the Go runtime's and the
// process's collectors, the buckets of request latency, and the handler
// that serves the text format.
package prom

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// LatencyBuckets are the buckets, in seconds, of a request latency
// histogram: 100 µs to 60 s.
var LatencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// NewRegistry returns a registry with the Go runtime's collector and the
// process's (CPU, memory, open files) registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg in the Prometheus exposition format.
func Handler(reg prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
