// Command otelprom shows a simba-go Manager's metrics and health check
// served the way an application serves them: the Manager records into an
// OpenTelemetry SDK MeterProvider, whose Prometheus exporter is scraped
// at /metrics; /healthz is the Manager's HealthCheck. A small workload on
// the in-memory store (a leader election and short locks, one of them
// waited for) keeps the numbers moving.
//
//	go run ./examples/otelprom          # then: curl 127.0.0.1:9464/metrics
//
// It is a module of its own, so that the SDK and the exporter never
// enter the requirements of the simba-go library: a library user imports
// only the OpenTelemetry metric API through package lease.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9464", "address to serve /metrics and /healthz on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "otelprom:", err)
		os.Exit(1)
	}
}

// Telemetry is an SDK MeterProvider exported to a Prometheus registry of
// its own.
type Telemetry struct {
	Provider *sdkmetric.MeterProvider
	Metrics  http.Handler // the registry in the Prometheus text format
}

// NewTelemetry sets up the SDK and the Prometheus exporter. Shut the
// provider down when done.
func NewTelemetry() (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, err
	}
	return &Telemetry{
		Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		Metrics:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}, nil
}

// Handler serves /metrics and the Manager's health at /healthz.
func (t *Telemetry) Handler(m *lease.Manager, tolerance time.Duration) (http.Handler, error) {
	h, err := m.HealthCheck(tolerance)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.Metrics)
	mux.Handle("GET /healthz", h)
	return mux, nil
}

// run serves the metrics of a demo workload until ctx ends.
func run(ctx context.Context, listen string) error {
	tel, err := NewTelemetry()
	if err != nil {
		return err
	}
	defer tel.Provider.Shutdown(context.Background())
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	store := memstore.New()
	opts := []lease.Option{
		lease.WithTTL(3 * time.Second), lease.WithTransition(2 * time.Second),
		lease.WithMeterProvider(tel.Provider),
		lease.WithMetricLockNames("leader"), // a fixed name: safe as an attribute
		lease.WithLogger(logger),
	}
	a, err := lease.NewManager(store, append(opts, lease.WithContenderID("a"))...)
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	b, err := lease.NewManager(store, append(opts, lease.WithContenderID("b"))...)
	if err != nil {
		return err
	}
	defer b.Close(context.Background())

	handler, err := tel.Handler(a, time.Second)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Printf("serving http://%s/metrics and /healthz; Ctrl-C ends\n", ln.Addr())

	for _, m := range []*lease.Manager{a, b} {
		if _, err := m.Contend("leader", lease.Callbacks{OnAcquired: lead}); err != nil {
			return err
		}
	}
	go workload(ctx, a, b)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// lead leads for two seconds, then resigns by returning and letting the
// lease go (the Contender contends again).
func lead(ctx context.Context, l *lease.Lease) {
	select {
	case <-time.After(2 * time.Second):
		_ = l.Release(ctx)
	case <-ctx.Done():
	}
}

// workload takes a new order lock every 500 ms on a, and once in a while
// has b wait for one that a holds.
func workload(ctx context.Context, a, b *lease.Manager) {
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("orders/%d", i)
		l, err := a.Acquire(ctx, name)
		if err != nil {
			return
		}
		if i%4 == 0 {
			go func() { time.Sleep(300 * time.Millisecond); _ = l.Release(ctx) }()
			if l2, err := b.Acquire(ctx, name); err == nil { // waits for a's release
				_ = l2.Release(ctx)
			}
		} else {
			_ = l.Release(ctx)
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
