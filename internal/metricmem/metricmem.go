// Package metricmem is a small in-memory OpenTelemetry MeterProvider built
// on the metric API alone: it sums int64 counters and up-down counters and
// float64 histograms per attribute set, answers queries for tests, and
// writes the Prometheus text format. Every other instrument kind is a
// no-op.
//
// It exists so that the simba CLI can serve its metrics, and the lease
// tests can read theirs, without the OpenTelemetry SDK or an exporter in
// the library module's requirements. Applications should use the SDK (see
// examples/otelprom).
package metricmem

import (
	"context"
	"net/http"
	"sort"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// kind is what an instrument records.
type kind int

const (
	counter kind = iota
	upDown
	histogram
)

// Provider is the MeterProvider. Its meters share one set of instruments
// by name: the first description, unit and buckets win. Safe for
// concurrent use.
type Provider struct {
	noop.MeterProvider

	mu    sync.Mutex
	insts map[string]*instrument
}

// New returns an empty Provider.
func New() *Provider { return &Provider{insts: make(map[string]*instrument)} }

// Meter returns a meter that records into p.
func (p *Provider) Meter(string, ...metric.MeterOption) metric.Meter { return meter{p: p} }

// instrument is one named instrument and its series.
type instrument struct {
	name, desc, unit string
	kind             kind
	bounds           []float64
	series           map[attribute.Distinct]*series
}

// series is the state of one attribute set of an instrument.
type series struct {
	attrs   attribute.Set
	sum     float64  // the counter's value, or the histogram's sum
	count   uint64   // histogram observations
	buckets []uint64 // histogram observations per bound (not cumulative), plus +Inf
}

// instrument returns the instrument name, making it if needed.
func (p *Provider) instrument(name, desc, unit string, k kind, bounds []float64) *instrument {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.insts[name]
	if in == nil {
		in = &instrument{name: name, desc: desc, unit: unit, kind: k,
			bounds: append([]float64(nil), bounds...), series: make(map[attribute.Distinct]*series)}
		sort.Float64s(in.bounds)
		p.insts[name] = in
	}
	return in
}

// record adds v to the series attrs of in.
func (p *Provider) record(in *instrument, v float64, attrs attribute.Set) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := in.series[attrs.Equivalent()]
	if s == nil {
		s = &series{attrs: attrs}
		if in.kind == histogram {
			s.buckets = make([]uint64, len(in.bounds)+1)
		}
		in.series[attrs.Equivalent()] = s
	}
	s.sum += v
	if in.kind == histogram {
		s.count++
		s.buckets[sort.SearchFloat64s(in.bounds, v)]++ // the first bound >= v
	}
}

// Value returns the value of the counter or up-down counter name, or the
// sum of the histogram name, for the series with exactly the attributes
// kvs (0 when there is none).
func (p *Provider) Value(name string, kvs ...attribute.KeyValue) float64 {
	if s := p.find(name, kvs); s != nil {
		return s.sum
	}
	return 0
}

// Count returns how many values the histogram name recorded for the
// series with exactly the attributes kvs.
func (p *Provider) Count(name string, kvs ...attribute.KeyValue) uint64 {
	if s := p.find(name, kvs); s != nil {
		return s.count
	}
	return 0
}

// Total returns the sum of Value over every series of name.
func (p *Provider) Total(name string) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var t float64
	if in := p.insts[name]; in != nil {
		for _, s := range in.series {
			t += s.sum
		}
	}
	return t
}

// Series returns the attribute sets recorded for name.
func (p *Provider) Series(name string) []attribute.Set {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []attribute.Set
	if in := p.insts[name]; in != nil {
		for _, s := range in.series {
			out = append(out, s.attrs)
		}
	}
	return out
}

func (p *Provider) find(name string, kvs []attribute.KeyValue) *series {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.insts[name]
	if in == nil {
		return nil
	}
	set := attribute.NewSet(kvs...)
	s := in.series[set.Equivalent()]
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// ServeHTTP writes the metrics in the Prometheus text format.
func (p *Provider) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_ = p.WriteText(w)
}

// meter makes the Provider's instruments.
type meter struct {
	noop.Meter
	p *Provider
}

func (m meter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c := metric.NewInt64CounterConfig(opts...)
	return intAdder{p: m.p, in: m.p.instrument(name, c.Description(), c.Unit(), counter, nil)}, nil
}

func (m meter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	c := metric.NewInt64UpDownCounterConfig(opts...)
	return intAdder{p: m.p, in: m.p.instrument(name, c.Description(), c.Unit(), upDown, nil)}, nil
}

func (m meter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	c := metric.NewFloat64HistogramConfig(opts...)
	bounds := c.ExplicitBucketBoundaries()
	if bounds == nil {
		bounds = []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000} // the SDK's default
	}
	return floatRecorder{p: m.p, in: m.p.instrument(name, c.Description(), c.Unit(), histogram, bounds)}, nil
}

// intAdder is an Int64Counter and an Int64UpDownCounter.
type intAdder struct {
	noop.Int64Counter
	noop.Int64UpDownCounter
	p  *Provider
	in *instrument
}

func (a intAdder) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	a.p.record(a.in, float64(v), metric.NewAddConfig(opts).Attributes())
}

func (intAdder) Enabled(context.Context) bool { return true }

// floatRecorder is a Float64Histogram.
type floatRecorder struct {
	noop.Float64Histogram
	p  *Provider
	in *instrument
}

func (r floatRecorder) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	r.p.record(r.in, v, metric.NewRecordConfig(opts).Attributes())
}

func (floatRecorder) Enabled(context.Context) bool { return true }
