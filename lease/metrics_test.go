package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/simba-go/simba/internal/metricmem"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// Attributes of the metrics, shortened.
func kv(k, v string) attribute.KeyValue { return attribute.String(k, v) }

var (
	jobAttr   = kv(lease.AttrLock, "job")
	kindAcq   = kv(lease.AttrKind, lease.KindAcquire)
	kindTry   = kv(lease.AttrKind, lease.KindTryAcquire)
	kindCont  = kv(lease.AttrKind, lease.KindContend)
	acquired  = kv(lease.AttrOutcome, lease.OutcomeAcquired)
	outOK     = kv(lease.AttrOutcome, lease.OutcomeOK)
	outErr    = kv(lease.AttrOutcome, lease.OutcomeError)
	opAttr    = func(op string) attribute.KeyValue { return kv(lease.AttrOperation, op) }
	causeAttr = func(c string) attribute.KeyValue { return kv(lease.AttrCause, c) }
	wakeAttr  = func(w string) attribute.KeyValue { return kv(lease.AttrWake, w) }
)

// observed is a Manager whose metrics go to a metricmem.Provider.
func observed(t *testing.T, st lease.Store, id string, opts ...lease.Option) (*lease.Manager, *metricmem.Provider) {
	t.Helper()
	p := metricmem.New()
	return newMgr(t, st, id, append([]lease.Option{lease.WithMeterProvider(p)}, opts...)...), p
}

// wantValue fails unless the series of name with attributes kvs has value
// want (a counter's value, or a histogram's count when count is set).
func wantValue(t *testing.T, p *metricmem.Provider, want float64, name string, kvs ...attribute.KeyValue) {
	t.Helper()
	if got := p.Value(name, kvs...); got != want {
		t.Errorf("%s%v = %v, want %v (series: %v)", name, kvs, got, want, p.Series(name))
	}
}

func wantCount(t *testing.T, p *metricmem.Provider, want uint64, name string, kvs ...attribute.KeyValue) {
	t.Helper()
	if got := p.Count(name, kvs...); got != want {
		t.Errorf("%s%v count = %v, want %v (series: %v)", name, kvs, got, want, p.Series(name))
	}
}

// TestMetricsOfAHeldLease (issue 20): an acquire, two renewals and a
// release of a listed lock, then a lease of an unlisted one lost at its
// deadline while its renewals fail: each instrument has exactly its
// value, and the unlisted name appears in no attribute.
func TestMetricsOfAHeldLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m, p := observed(t, st, "a", lease.WithMetricLockNames("job"))
		l := mustAcquire(t, m, "job")
		wantCount(t, p, 1, lease.MetricAcquireDuration, jobAttr, kindAcq, acquired)
		wantValue(t, p, 1, lease.MetricHeld, jobAttr)
		time.Sleep(tTTL/3*2 + tTTL/6) // two renewals (ttl/3 apart)
		wantValue(t, p, 2, lease.MetricRenewals, jobAttr)
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		wantValue(t, p, 0, lease.MetricHeld, jobAttr)
		wantCount(t, p, 1, lease.MetricStoreDuration, opAttr("acquire"), outOK)
		wantCount(t, p, 2, lease.MetricStoreDuration, opAttr("renew_many"), outOK)
		wantCount(t, p, 1, lease.MetricStoreDuration, opAttr("release"), outOK)

		other := mustAcquire(t, m, "orders/42")
		wantValue(t, p, 1, lease.MetricHeld)
		st.FailContender("a", memstore.FaultFail)
		<-other.Done()
		st.Heal()
		synctest.Wait() // the loss is counted after the holder is told
		wantValue(t, p, 0, lease.MetricHeld)
		wantValue(t, p, 1, lease.MetricLosses, causeAttr(lease.CauseDeadline))
		fails := p.Value(lease.MetricRenewalFailures)
		if fails < 2 {
			t.Errorf("%v renewal failures before the deadline, want several", fails)
		}
		wantValue(t, p, fails, lease.MetricStoreErrors, opAttr("renew_many"), kv(lease.AttrErrorType, "other"))
		wantCount(t, p, uint64(fails), lease.MetricStoreDuration, opAttr("renew_many"), outErr)
		for _, name := range []string{lease.MetricHeld, lease.MetricLosses, lease.MetricRenewalFailures, lease.MetricAcquireDuration} {
			for _, set := range p.Series(name) {
				if v, ok := set.Value(lease.AttrLock); ok && v.AsString() != "job" {
					t.Errorf("%s has a series for the unlisted lock %q", name, v.AsString())
				}
			}
		}
	})
}

// TestMetricsOfLossesByCause: a renewal the store refuses is a loss
// "not_held"; a Stop whose context ends before the callback returns
// abandons the grant, a loss "stopped"; leadership goes up and down.
func TestMetricsOfLossesByCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m, p := observed(t, st, "a")
		l := mustAcquire(t, m, "x")
		if err := st.Release(bg, "x", "a", l.Token()); err != nil { // behind the holder's back
			t.Fatal(err)
		}
		<-l.Done()
		synctest.Wait() // the loss is counted after the holder is told
		wantValue(t, p, 1, lease.MetricLosses, causeAttr(lease.CauseNotHeld))

		release := make(chan struct{})
		leading := make(chan struct{})
		c, err := m.Contend("y", lease.Callbacks{OnAcquired: func(ctx context.Context, _ *lease.Lease) {
			close(leading)
			<-release // ignores ctx
		}})
		if err != nil {
			t.Fatal(err)
		}
		<-leading
		wantValue(t, p, 1, lease.MetricLeader)
		wantCount(t, p, 1, lease.MetricAcquireWait, kindCont, acquired)
		ctx, cancel := context.WithTimeout(bg, time.Second)
		if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stop: %v, want its context's deadline", err)
		}
		cancel()
		wantValue(t, p, 1, lease.MetricLosses, causeAttr(lease.CauseStopped))
		close(release)
		synctest.Wait()
		wantValue(t, p, 0, lease.MetricLeader)
		wantValue(t, p, 0, lease.MetricHeld)
	})
}

// TestMetricsOfWaiters: a waiter's wait and hand-off gap, woken by the
// store's release event, by a release of another goroutine of its
// Manager, or by polling at the owner's transition end; TryAcquire on a
// held lock, an Acquire whose context ends, and a failing store call.
func TestMetricsOfWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newMgr(t, st, "a")
		b, p := observed(t, st, "b")

		// Pushed: b waits on a's lease; a releases after 2s.
		la := mustAcquire(t, a, "job")
		go func() { time.Sleep(2 * time.Second); _ = la.Release(bg) }()
		lb := mustAcquire(t, b, "job")
		wantCount(t, p, 1, lease.MetricAcquireWait, kindAcq, acquired)
		if w := p.Value(lease.MetricAcquireWait, kindAcq, acquired); w != 2 {
			t.Errorf("waited %vs, want 2s", w)
		}
		wantCount(t, p, 1, lease.MetricHandoffGap, wakeAttr(lease.WakeEvent))
		wantValue(t, p, 0, lease.MetricHandoffGap, wakeAttr(lease.WakeEvent)) // no time passes in the bubble

		// Local: another goroutine of b waits for lb.
		go func() { time.Sleep(time.Second); _ = lb.Release(bg) }()
		l2 := mustAcquire(t, b, "job")
		wantCount(t, p, 1, lease.MetricHandoffGap, wakeAttr(lease.WakeLocal))
		wantCount(t, p, 2, lease.MetricAcquireWait, kindAcq, acquired)
		_ = l2.Release(bg)

		// TryAcquire on a held lock; Acquire whose context ends.
		la = mustAcquire(t, a, "job")
		if _, err := b.TryAcquire(bg, "job"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("TryAcquire: %v", err)
		}
		wantCount(t, p, 1, lease.MetricAcquireDuration, kindTry, kv(lease.AttrOutcome, lease.OutcomeNotAcquired))
		ctx, cancel := context.WithTimeout(bg, time.Second)
		if _, err := b.Acquire(ctx, "job"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire: %v", err)
		}
		cancel()
		canceled := kv(lease.AttrOutcome, lease.OutcomeCanceled)
		wantCount(t, p, 1, lease.MetricAcquireDuration, kindAcq, canceled)
		wantCount(t, p, 1, lease.MetricAcquireWait, kindAcq, canceled)
		_ = la.Release(bg)

		// A failing store call.
		st.FailContender("b", memstore.FaultFail)
		if _, err := b.TryAcquire(bg, "job"); !errors.Is(err, memstore.ErrInjected) {
			t.Fatalf("TryAcquire on a failing store: %v", err)
		}
		st.Heal()
		wantCount(t, p, 1, lease.MetricAcquireDuration, kindTry, outErr)
		wantValue(t, p, 1, lease.MetricStoreErrors, opAttr("acquire"), kv(lease.AttrErrorType, "other"))
		synctest.Wait() // the failed attempt's clean-up
	})
}

// pollOnly hides the store's Watcher (and BatchRenewer): waiters poll.
type pollOnly struct{ lease.Store }

// TestMetricsHandoffGapWhenPolling: without release events, a waiter
// sees the lock free at the owner's transition end, as its last attempt
// reported it, and takes it within the poll jitter (< 1s) after.
func TestMetricsHandoffGapWhenPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		if _, err := st.Acquire(bg, "job", "ghost", tTTL, tTransition); err != nil {
			t.Fatal(err)
		}
		m, p := observed(t, pollOnly{st}, "w")
		l := mustAcquire(t, m, "job")
		wantCount(t, p, 1, lease.MetricHandoffGap, wakeAttr(lease.WakePoll))
		if gap := p.Value(lease.MetricHandoffGap, wakeAttr(lease.WakePoll)); gap < 0 || gap >= 1 {
			t.Errorf("gap %vs, want within the poll jitter [0, 1s)", gap)
		}
		_ = l.Release(bg)
	})
}

// TestClockStepsInstrument: the instrument reserved for the detector of
// server clock steps records by direction.
func TestClockStepsInstrument(t *testing.T) {
	st := memstore.New()
	m, p := observed(t, st, "a")
	lease.RecordClockStep(m, true)
	lease.RecordClockStep(m, false)
	lease.RecordClockStep(m, false)
	wantValue(t, p, 1, lease.MetricClockSteps, kv(lease.AttrDirection, "forward"))
	wantValue(t, p, 2, lease.MetricClockSteps, kv(lease.AttrDirection, "backward"))
}

// TestMetricOptionsValidate: nil providers, invalid names and too many
// names are refused.
func TestMetricOptionsValidate(t *testing.T) {
	many := make([]string, lease.MaxMetricLockNames+1)
	for i := range many {
		many[i] = "n"
	}
	for name, opt := range map[string]lease.Option{
		"nil provider": lease.WithMeterProvider(nil),
		"empty name":   lease.WithMetricLockNames("ok", ""),
		"too many":     lease.WithMetricLockNames(many...),
	} {
		if _, err := lease.NewManager(memstore.New(), opt); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestNoopMetricsCostNothing (issue 20): with the OpenTelemetry no-op
// provider, as without any, an uncontended cycle allocates exactly as
// much as it does with metrics off (maxCycleAllocs).
func TestNoopMetricsCostNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	cycle := func(opts ...lease.Option) float64 {
		m, err := lease.NewManager(memstore.New(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(bg)
		return testing.AllocsPerRun(1000, func() {
			l, err := m.Acquire(bg, "job")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(bg); err != nil {
				t.Fatal(err)
			}
		})
	}
	off := cycle()
	noopAllocs := cycle(lease.WithMeterProvider(noop.NewMeterProvider()))
	if noopAllocs != off || off > maxCycleAllocs {
		t.Errorf("%.1f allocations per cycle with the no-op provider, %.1f without; want equal and at most %d", noopAllocs, off, maxCycleAllocs)
	}
}
