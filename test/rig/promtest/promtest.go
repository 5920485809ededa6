// Package promtest reads a server's Prometheus metrics in a test: the text
// format parsed by Prometheus's own parser, and a sample's value found by
// its name and labels.
package promtest

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is a scrape, parsed: its metric families by name.
type Families map[string]*dto.MetricFamily

// Parse parses a scrape in the Prometheus text format.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("the metrics do not parse: %w", err)
	}
	return fams, nil
}

// Value returns the value of the first sample of name that has the labels
// given (name=value pairs), or -1 if there is none: a counter's or a
// gauge's value, a histogram's count.
func (f Families) Value(name string, labels ...string) float64 {
	fam := f[name]
	if fam == nil {
		return -1
	}
next:
	for _, m := range fam.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}
