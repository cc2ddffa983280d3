package metricmem_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/simba-go/simba/internal/metricmem"
)

// TestTextFormat: counters, up-down counters and histograms come out as
// the Prometheus exporter names them, with cumulative buckets and
// escaped label values; queries see the same numbers.
func TestTextFormat(t *testing.T) {
	ctx := context.Background()
	p := metricmem.New()
	m := p.Meter("test")
	c, _ := m.Int64Counter("a.count", metric.WithUnit("{call}"), metric.WithDescription("Calls."))
	u, _ := m.Int64UpDownCounter("a.held")
	h, _ := m.Float64Histogram("a.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.1, 1))
	odd := metric.WithAttributes(attribute.String("k.x", "q\"\\\n"))
	c.Add(ctx, 2, odd)
	c.Add(ctx, 1, odd)
	u.Add(ctx, 3)
	u.Add(ctx, -1)
	for _, v := range []float64{0.05, 0.1, 0.5, 7} {
		h.Record(ctx, v)
	}
	var b strings.Builder
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_count_total Calls.
# TYPE a_count_total counter
a_count_total{k_x="q\"\\\n"} 3
# TYPE a_duration_seconds histogram
a_duration_seconds_bucket{le="0.1"} 2
a_duration_seconds_bucket{le="1"} 3
a_duration_seconds_bucket{le="+Inf"} 4
a_duration_seconds_sum 7.65
a_duration_seconds_count 4
# TYPE a_held gauge
a_held 2
`
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	if v := p.Value("a.count", attribute.String("k.x", "q\"\\\n")); v != 3 {
		t.Errorf("Value = %v", v)
	}
	if n := p.Count("a.duration"); n != 4 {
		t.Errorf("Count = %v", n)
	}
	if v := p.Total("a.held"); v != 2 {
		t.Errorf("Total = %v", v)
	}
}
