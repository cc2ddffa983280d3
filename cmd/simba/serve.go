//go:build unix

package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/simba-go/simba/internal/metricmem"
	"github.com/simba-go/simba/lease"
)

// obsFlags are run's and elect's flags for logs, metrics and health.
type obsFlags struct {
	logLevel string
	listen   string
}

func (o *obsFlags) register(f *flags) {
	f.StringVar(&o.logLevel, "log-level", "warn", "the library's records shown on stderr, from level `L` up: debug, info, warn\n"+
		"or error "+
		"(default warn: failed renewals and store calls)")
	f.StringVar(&o.listen, "listen", "", "serve /metrics (Prometheus text) and /healthz on `ADDR`, e.g. 127.0.0.1:9464\n"+
		"(/healthz is 503 when a renewal is overdue by ttl/3 or the store does not answer)")
}

// level returns the --log-level.
func (o *obsFlags) level(f *flags) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(o.logLevel)); err != nil {
		return 0, fail(codeUsage, "%s: --log-level %q: want debug, info, warn or error", f.cmd, o.logLevel)
	}
	return l, nil
}

// observer serves a Manager's metrics and health over HTTP, for --listen.
//
// The metrics are kept by metricmem, an in-memory MeterProvider on the
// OpenTelemetry metric API, and written in the Prometheus text format:
// the CLI lives in the library's module, so the OpenTelemetry SDK and its
// Prometheus exporter would enter every library user's go.mod (see
// examples/otelprom for an application that uses them).
type observer struct {
	provider *metricmem.Provider
	ln       net.Listener
	srv      *http.Server
}

// observer starts listening on --listen, before the store is opened (nil
// without --listen).
func (o *obsFlags) observer(f *flags) (*observer, error) {
	if o.listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, fail(codeUsage, "%s: --listen %s: %v", f.cmd, o.listen, err)
	}
	return &observer{provider: metricmem.New(), ln: ln}, nil
}

// options are the Manager options that record into the observer.
func (ob *observer) options() []lease.Option {
	if ob == nil {
		return nil
	}
	return []lease.Option{lease.WithMeterProvider(ob.provider)}
}

// serve starts serving /metrics and /healthz (unhealthy when a renewal is
// overdue by more than ttl/3, or the store does not answer).
func (ob *observer) serve(m *lease.Manager, tm timing, log *slog.Logger) error {
	if ob == nil {
		return nil
	}
	h, err := m.HealthCheck(max(tm.ttl/3, time.Millisecond))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", ob.provider)
	mux.Handle("GET /healthz", h)
	ob.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	addr := ob.ln.Addr().String()
	log.Info("serving /metrics and /healthz", "address", addr)
	if !loopback(addr) {
		log.Warn("serving /metrics and /healthz beyond the loopback interface: anyone who reaches it can read them", "address", addr)
	}
	go func() {
		if err := ob.srv.Serve(ob.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("serving /metrics and /healthz stopped", "error", err)
		}
	}()
	return nil
}

// Close stops serving.
func (ob *observer) Close() {
	switch {
	case ob == nil:
	case ob.srv != nil:
		_ = ob.srv.Close()
	default:
		_ = ob.ln.Close()
	}
}

// loopback reports whether addr's host is a loopback address or name.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
