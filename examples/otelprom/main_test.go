package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

var bg = context.Background()

// eventually polls cond every 10 ms until it holds, at most 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("not within 10s: %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// get fetches path from srv.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape is one parsed /metrics.
type scrape map[string]*dto.MetricFamily

func scrapeOf(t *testing.T, srv *httptest.Server) scrape {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// series returns the value (a histogram's count) of the series of name
// whose labels are exactly labels (name=value pairs), and whether there
// is one.
func (s scrape) series(name string, labels ...string) (float64, bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName(), l.GetValue())
		}
		if !sameLabels(got, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// sum adds the values of every series of name.
func (s scrape) sum(name string) float64 {
	var t float64
	if f := s[name]; f != nil {
		for _, m := range f.GetMetric() {
			t += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return t
}

func sameLabels(a, b []string) bool {
	pairs := func(x []string) []string {
		var out []string
		for i := 0; i+1 < len(x); i += 2 {
			out = append(out, x[i]+"="+x[i+1])
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(pairs(a), pairs(b))
}

func (s scrape) want(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	if got, ok := s.series(name, labels...); !ok || got != want {
		t.Errorf("%s%v = %v (found %v), want %v", name, labels, got, ok, want)
	}
}

// TestScrape (issue 20): after acquires, renewals, a leadership term, a
// waiter's hand-off, releases and a loss on memstore, the example's
// /metrics (the OpenTelemetry SDK and its Prometheus exporter) shows each
// instrument with its value, and /healthz turns from ok to failing while
// renewals fail, and back.
func TestScrape(t *testing.T) {
	tel, err := NewTelemetry()
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Provider.Shutdown(bg)
	st := memstore.New()
	opts := []lease.Option{
		// Renewals every 333 ms, deadline 1.5 s after each, calls bounded
		// by 250 ms: far from anything a loaded machine does to memstore.
		lease.WithTTL(time.Second), lease.WithTransition(time.Second),
		lease.WithMeterProvider(tel.Provider), lease.WithMetricLockNames("job"),
	}
	a, err := lease.NewManager(st, append(opts, lease.WithContenderID("a"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(bg)
	b, err := lease.NewManager(st, append(opts, lease.WithContenderID("b"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(bg)
	handler, err := tel.Handler(a, 400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	// a holds "job" through two renewals; b leads "lead" meanwhile.
	la, err := a.Acquire(bg, "job")
	if err != nil {
		t.Fatal(err)
	}
	leading := make(chan struct{})
	c, err := b.Contend("lead", lease.Callbacks{OnAcquired: func(context.Context, *lease.Lease) { close(leading) }})
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	eventually(t, "two renewals of job", func() bool {
		v, _ := scrapeOf(t, srv).series("simba_lease_renewals_total", "simba_lock", "job")
		return v >= 2
	})
	mid := scrapeOf(t, srv)
	mid.want(t, 1, "simba_lease_held", "simba_lock", "job")
	mid.want(t, 1, "simba_lease_held")
	mid.want(t, 1, "simba_lease_leader")
	if code, body := get(t, srv, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while renewing: %d %s", code, body)
	}
	if err := c.Stop(bg); err != nil {
		t.Fatal(err)
	}

	// b waits for "job" and gets it at a's release, pushed by the store.
	acquires := st.Stats().Acquire
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := b.Acquire(bg, "job")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// Queued, subscribed, and past the attempt a waiter makes once
	// subscribed: a release before that attempt is seen by the attempt,
	// not by an event (under load: "handoff_gap_seconds[… simba_wake
	// event] = 0").
	eventually(t, "b waits for job's event", func() bool {
		in := st.Inspect("job")
		return slices.Contains(in.Queue, "b") && in.Watchers > 0 && st.Stats().Acquire >= acquires+2
	})
	if err := la.Release(bg); err != nil {
		t.Fatal(err)
	}
	if lb := <-got; lb != nil {
		if err := lb.Release(bg); err != nil {
			t.Fatal(err)
		}
	}

	// a's lease of an unlisted name is lost while its renewals fail; the
	// health check fails before the loss, and the loss's clean-up (a
	// release) fails too.
	lo, err := a.Acquire(bg, "orders/1")
	if err != nil {
		t.Fatal(err)
	}
	released := st.Stats().Release
	st.FailContender("a", memstore.FaultFail)
	eventually(t, "/healthz fails", func() bool { code, _ := get(t, srv, "/healthz"); return code == http.StatusServiceUnavailable })
	<-lo.Done()
	if !errors.Is(lo.Err(), lease.ErrLost) {
		t.Fatalf("lease ended with %v, want lost", lo.Err())
	}
	eventually(t, "the lost grant's release is tried", func() bool { return st.Stats().Release > released })
	st.Heal()
	if _, err := a.Get(bg, "orders/1"); err != nil { // the store answers again
		t.Fatal(err)
	}
	if code, body := get(t, srv, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz once the store answers: %d %q", code, body)
	}

	s := scrapeOf(t, srv)
	acq := []string{"simba_kind", "acquire", "simba_outcome", "acquired"}
	s.want(t, 2, "simba_lease_acquire_duration_seconds", append(acq, "simba_lock", "job")...)
	s.want(t, 1, "simba_lease_acquire_duration_seconds", acq...)
	s.want(t, 1, "simba_lease_acquire_wait_seconds", append(acq, "simba_lock", "job")...)
	s.want(t, 1, "simba_lease_acquire_wait_seconds", "simba_kind", "contend", "simba_outcome", "acquired")
	s.want(t, 1, "simba_lease_handoff_gap_seconds", "simba_lock", "job", "simba_wake", "event")
	s.want(t, 0, "simba_lease_held", "simba_lock", "job")
	s.want(t, 0, "simba_lease_held")
	s.want(t, 0, "simba_lease_leader")
	s.want(t, 1, "simba_lease_losses_total", "simba_cause", "deadline")
	s.want(t, 3, "simba_lease_store_duration_seconds", "simba_operation", "release", "simba_outcome", "ok")
	s.want(t, 1, "simba_lease_store_duration_seconds", "simba_operation", "release", "simba_outcome", "error")
	s.want(t, 1, "simba_lease_store_errors_total", "simba_operation", "release", "error_type", "other")
	if v, _ := s.series("simba_lease_renewals_total", "simba_lock", "job"); v < 2 {
		t.Errorf("%v renewals of job, want at least 2", v)
	}
	fails := s.sum("simba_lease_renewal_failures_total")
	if fails < 1 {
		t.Errorf("%v renewal failures, want at least one", fails)
	}
	// Each RenewMany carried one lease (no Manager held two at once).
	calls := float64(st.Stats().RenewMany)
	if r := s.sum("simba_lease_renewals_total"); r+fails != calls {
		t.Errorf("%v renewals + %v failures, want the store's %v RenewMany calls", r, fails, calls)
	}
	ok, _ := s.series("simba_lease_store_duration_seconds", "simba_operation", "renew_many", "simba_outcome", "ok")
	bad, _ := s.series("simba_lease_store_duration_seconds", "simba_operation", "renew_many", "simba_outcome", "error")
	if ok+bad != calls || bad != fails {
		t.Errorf("renew_many calls timed: %v ok + %v failed, want %v with %v failed", ok, bad, calls, fails)
	}
	if _, ok := s["simba_lease_server_clock_steps_total"]; ok {
		t.Error("clock steps recorded before any step")
	}

	// The store's clock steps an hour forward: the next renewal's reply
	// shows it (and is refused: the grant ended on the stepped clock).
	l, err := a.Acquire(bg, "job")
	if err != nil {
		t.Fatal(err)
	}
	st.StepClock(time.Hour)
	<-l.Done()
	eventually(t, "a forward clock step counted", func() bool {
		v, _ := scrapeOf(t, srv).series("simba_lease_server_clock_steps_total", "simba_direction", "forward")
		return v == 1
	})
}

// BenchmarkCycleSDK is lease's BenchmarkManager/cycle with the SDK's
// MeterProvider recording: what enabled metrics cost an uncontended
// Acquire + Release.
//
//	go test -run '^$' -bench . -benchmem
func BenchmarkCycleSDK(b *testing.B) {
	tel, err := NewTelemetry()
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Provider.Shutdown(bg)
	m, err := lease.NewManager(memstore.New(), lease.WithMeterProvider(tel.Provider))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(bg)
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Acquire(bg, "orders/42")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(bg); err != nil {
			b.Fatal(err)
		}
	}
}
