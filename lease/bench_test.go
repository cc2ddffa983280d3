package lease_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// benchKeys are the names the parallel benchmark spreads over.
var benchKeys = func() []string {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("orders/%d", i)
	}
	return keys
}()

// BenchmarkManager measures the Manager's own cost on memstore (no
// network): one uncontended Acquire + Release per op, from one goroutine
// ("cycle"; "cycle-noop-metrics" with the OpenTelemetry no-op
// MeterProvider), and from 64 goroutines sharing one Manager over 10,000
// keys ("parallel64"), as an application uses it.
//
//	go test -run '^$' -bench BenchmarkManager -benchmem ./lease/
func BenchmarkManager(b *testing.B) {
	ctx := context.Background()
	newManager := func(b *testing.B, opts ...lease.Option) *lease.Manager {
		m, err := lease.NewManager(memstore.New(), opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Close(ctx) })
		return m
	}
	cycle := func(b *testing.B, m *lease.Manager, name string) {
		l, err := m.Acquire(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("cycle", func(b *testing.B) {
		m := newManager(b)
		b.ReportAllocs()
		for b.Loop() {
			cycle(b, m, "orders/42")
		}
	})
	b.Run("cycle-noop-metrics", func(b *testing.B) { // issue 20: the no-op provider costs nothing
		m := newManager(b, lease.WithMeterProvider(noop.NewMeterProvider()))
		b.ReportAllocs()
		for b.Loop() {
			cycle(b, m, "orders/42")
		}
	})
	b.Run("parallel64", func(b *testing.B) {
		m := newManager(b)
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((64 + procs - 1) / procs)
		var seed atomic.Uint64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(seed.Add(1), 0))
			for pb.Next() {
				cycle(b, m, benchKeys[r.IntN(len(benchKeys))])
			}
		})
	})
}
