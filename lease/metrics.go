package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// WithMeterProvider records the Manager's metrics with instruments of mp
// (meter [MeterName]; the instruments are listed with [MetricAcquireDuration]
// and the names after it). Without this option nothing is recorded and
// nothing is paid; a provider whose instruments are all disabled (such as
// the OpenTelemetry no-op provider) costs nothing either.
//
// Lock names are never an attribute unless listed with
// [WithMetricLockNames].
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil meter provider", ErrInvalidArgument)
		}
		c.meterProvider = mp
		return nil
	}
}

// WithMetricLockNames puts the lock name ([AttrLock]) on the
// measurements of the listed locks; other locks' measurements carry
// no name. Names are unbounded (one per order id, say), and every name
// is a series in the metrics backend: list a small fixed set, such as the
// names of your elections. Each name must pass [ValidateName]; at most
// [MaxMetricLockNames] are allowed.
func WithMetricLockNames(names ...string) Option {
	return func(c *config) error {
		if len(names) > MaxMetricLockNames {
			return fmt.Errorf("%w: %d metric lock names, at most %d", ErrInvalidArgument, len(names), MaxMetricLockNames)
		}
		for _, n := range names {
			if err := ValidateName(n); err != nil {
				return fmt.Errorf("%w: metric lock name: %v", ErrInvalidArgument, err)
			}
		}
		c.metricNames = append([]string(nil), names...)
		return nil
	}
}

// MaxMetricLockNames bounds [WithMetricLockNames].
const MaxMetricLockNames = 1000

// durationBuckets are the histogram boundaries, in seconds: from 100 µs
// (a store call on loopback) to 5 min (a long wait for a lock).
var durationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
}

// Enumerations of attribute values, indexes into the precomputed sets.
type (
	outcome uint8
	cause   uint8
	wake    uint8
	storeOp uint8
)

const (
	outAcquired outcome = iota
	outNotAcquired
	outCanceled
	outClosed
	outError
	nOutcomes
)

const (
	causeDeadline cause = iota
	causeNotHeld
	causeStopped
	nCauses
)

const (
	wakeEvent wake = iota
	wakeLocal
	wakePoll
	nWakes
)

const (
	opAcquire storeOp = iota
	opRenew
	opRenewMany
	opRelease
	opGet
	nOps
)

var (
	outcomeNames = [nOutcomes]string{OutcomeAcquired, OutcomeNotAcquired, OutcomeCanceled, OutcomeClosed, OutcomeError}
	causeNames   = [nCauses]string{CauseDeadline, CauseNotHeld, CauseStopped}
	wakeNames    = [nWakes]string{WakeEvent, WakeLocal, WakePoll}
	kindNames    = [...]string{claimAcquire: KindAcquire, claimTry: KindTryAcquire, claimContend: KindContend}
	opNames      = [nOps]string{"acquire", "renew", "renew_many", "release", "get"}
	errTypeNames = [...]string{"timeout", "setup", "other"}
)

// metrics are a Manager's instruments and its precomputed attribute sets.
// When on is false, which it is without a MeterProvider, nothing is
// recorded: every recording method returns at once, before reading a
// clock or allocating.
type metrics struct {
	on bool

	acquire, wait, gap, store  metric.Float64Histogram
	held, leader               metric.Int64UpDownCounter
	renewals, renewFails, lost metric.Int64Counter
	storeErrs, clockSteps      metric.Int64Counter

	def   *nameSets            // measurements of unlisted locks
	named map[string]*nameSets // WithMetricLockNames
	ops   [nOps]opSets
	steps [2]attrs // forward, backward
}

// attrs is one attribute set as the options of a Record and of an Add:
// passed as a ready slice, a variadic argument allocates nothing.
type attrs struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

// nameSets are the attribute sets of one lock name (or of none).
type nameSets struct {
	acquire [len(kindNames)][nOutcomes]attrs
	plain   attrs // held, leader, renewals, failures
	lost    [nCauses]attrs
	gap     [nWakes]attrs
}

// opSets are the attribute sets of one store operation.
type opSets struct {
	ok, failed attrs
	errs       [len(errTypeNames)]attrs
}

// newMetrics makes the instruments of cfg's MeterProvider, if any.
func newMetrics(cfg *config) (metrics, error) {
	var o metrics
	if cfg.meterProvider == nil {
		return o, nil
	}
	meter := cfg.meterProvider.Meter(MeterName)
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, err := meter.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	o.acquire = hist(MetricAcquireDuration, "Duration of Acquire and TryAcquire calls.")
	o.wait = hist(MetricAcquireWait, "Time a claim waited in line before it was granted or gave up.")
	o.gap = hist(MetricHandoffGap, "Time from a waiter seeing a lock free to its grant.")
	o.store = hist(MetricStoreDuration, "Duration of store calls.")
	o.held = upDown(MetricHeld, "{lease}", "Leases held.")
	o.leader = upDown(MetricLeader, "{contender}", "Contenders leading.")
	o.renewals = count(MetricRenewals, "{renewal}", "Renewals confirmed by the store.")
	o.renewFails = count(MetricRenewalFailures, "{renewal}", "Renewals that failed with an unknown outcome (retried).")
	o.lost = count(MetricLosses, "{lease}", "Leases that ended without a release.")
	o.storeErrs = count(MetricStoreErrors, "{call}", "Store calls that failed with an unknown outcome.")
	o.clockSteps = count(MetricClockSteps, "{step}", "Steps of the store server's clock detected from its replies.")
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("%w: meter provider: %v", ErrInvalidArgument, err)
	}
	ctx := context.Background()
	for _, e := range []interface{ Enabled(context.Context) bool }{
		o.acquire, o.wait, o.gap, o.store, o.held, o.leader,
		o.renewals, o.renewFails, o.lost, o.storeErrs, o.clockSteps,
	} {
		o.on = o.on || e.Enabled(ctx)
	}
	if !o.on {
		return metrics{}, nil
	}
	o.def = newNameSets(nil)
	if len(cfg.metricNames) > 0 {
		o.named = make(map[string]*nameSets, len(cfg.metricNames))
		for _, n := range cfg.metricNames {
			o.named[n] = newNameSets([]attribute.KeyValue{attribute.String(AttrLock, n)})
		}
	}
	for op := range o.ops {
		k := attribute.String(AttrOperation, opNames[op])
		s := &o.ops[op]
		s.ok = set(k, attribute.String(AttrOutcome, OutcomeOK))
		s.failed = set(k, attribute.String(AttrOutcome, OutcomeError))
		for i, t := range errTypeNames {
			s.errs[i] = set(k, attribute.String(AttrErrorType, t))
		}
	}
	o.steps[0] = set(attribute.String(AttrDirection, "forward"))
	o.steps[1] = set(attribute.String(AttrDirection, "backward"))
	return o, nil
}

// set returns the options of the attributes kvs.
func set(kvs ...attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return attrs{rec: []metric.RecordOption{o}, add: []metric.AddOption{o}}
}

// newNameSets precomputes the attribute sets of one name (base: its name
// attribute, or none).
func newNameSets(base []attribute.KeyValue) *nameSets {
	with := func(kvs ...attribute.KeyValue) attrs {
		return set(append(append([]attribute.KeyValue(nil), base...), kvs...)...)
	}
	s := &nameSets{plain: with()}
	for k, kn := range kindNames {
		for o, on := range outcomeNames {
			s.acquire[k][o] = with(attribute.String(AttrKind, kn), attribute.String(AttrOutcome, on))
		}
	}
	for c, cn := range causeNames {
		s.lost[c] = with(attribute.String(AttrCause, cn))
	}
	for w, wn := range wakeNames {
		s.gap[w] = with(attribute.String(AttrWake, wn))
	}
	return s
}

// sets returns the attribute sets of the lock name.
func (o *metrics) sets(name string) *nameSets {
	if s := o.named[name]; s != nil {
		return s
	}
	return o.def
}

var bgCtx = context.Background()

// acquired records an Acquire or TryAcquire call that began at start.
func (o *metrics) acquired(ctx context.Context, name string, kind claimKind, start time.Time, err error) {
	if !o.on {
		return
	}
	o.acquire.Record(bgCtx, time.Since(start).Seconds(), o.sets(name).acquire[kind][outcomeOf(ctx, err)].rec...)
}

// waited records a claim that waited in line since it was made.
func (o *metrics) waited(name string, c *claim, out outcome) {
	if !o.on || c.since.IsZero() {
		return
	}
	o.wait.Record(bgCtx, time.Since(c.since).Seconds(), o.sets(name).acquire[c.kind][out].rec...)
}

// outcomeOf classifies the result of an acquisition under ctx.
func outcomeOf(ctx context.Context, err error) outcome {
	switch {
	case err == nil:
		return outAcquired
	case errors.Is(err, ErrClosed):
		return outClosed
	case ctx != nil && ctx.Err() != nil:
		return outCanceled
	case errors.Is(err, ErrNotAcquired):
		return outNotAcquired
	}
	return outError
}

// holding records a lease gained (+1) or ended (-1).
func (o *metrics) holding(name string, d int64) {
	if o.on {
		o.held.Add(bgCtx, d, o.sets(name).plain.add...)
	}
}

// leading records leadership gained (+1) or ended (-1).
func (o *metrics) leading(name string, d int64) {
	if o.on {
		o.leader.Add(bgCtx, d, o.sets(name).plain.add...)
	}
}

// renewal records a renewal confirmed (ok) or failed with an unknown
// outcome.
func (o *metrics) renewal(name string, ok bool) {
	switch {
	case !o.on:
	case ok:
		o.renewals.Add(bgCtx, 1, o.sets(name).plain.add...)
	default:
		o.renewFails.Add(bgCtx, 1, o.sets(name).plain.add...)
	}
}

// loss records a lease that ended without a release.
func (o *metrics) loss(name string, c cause) {
	if o.on {
		o.lost.Add(bgCtx, 1, o.sets(name).lost[c].add...)
	}
}

// handoff records the gap a waiter saw between a lock being free and
// its grant.
func (o *metrics) handoff(name string, w wake, gap time.Duration) {
	if o.on {
		o.gap.Record(bgCtx, gap.Seconds(), o.sets(name).gap[w].rec...)
	}
}

// storeCall records a store call of op that took d and returned err (an
// ErrNotHeld answer is no error).
func (o *metrics) storeCall(op storeOp, d time.Duration, err error) {
	if !o.on {
		return
	}
	s := &o.ops[op]
	if err == nil || errors.Is(err, ErrNotHeld) {
		o.store.Record(bgCtx, d.Seconds(), s.ok.rec...)
		return
	}
	o.store.Record(bgCtx, d.Seconds(), s.failed.rec...)
	t := 2
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		t = 0
	case errors.Is(err, ErrStoreSetup):
		t = 1
	}
	o.storeErrs.Add(bgCtx, 1, s.errs[t].add...)
}

// clockStep records a step of the server's clock. Reserved for the
// detector of server clock steps, which calls it once it lands.
func (o *metrics) clockStep(forward bool) {
	if !o.on {
		return
	}
	i := 1
	if forward {
		i = 0
	}
	o.clockSteps.Add(bgCtx, 1, o.steps[i].add...)
}
