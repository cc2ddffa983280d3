package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// Targets returns every target of a run on s: simba and its peers on Redis,
// the SQL servers, ZooKeeper and etcd, in report order.
func Targets(s Servers) []Target {
	var ts []Target
	ts = append(ts, redisTargets(s)...)
	ts = append(ts, sqlTargets(s)...)
	ts = append(ts, zkTargets(s)...)
	ts = append(ts, etcdTargets(s)...)
	return ts
}

// Options select and bound what Run measures.
type Options struct {
	// Only keeps the targets whose ID contains one of these strings
	// (case-insensitive); empty keeps all.
	Only []string
	// Scenarios keeps the scenarios whose letter ("a" … "f") is listed;
	// empty keeps all.
	Scenarios string
	// Holder returns the command that starts a holder process for target
	// id and key (scenario f); it must print holdingLine once it holds.
	// Nil skips scenario f.
	Holder func(id, key string) *exec.Cmd
	// Logf reports progress; nil is quiet.
	Logf func(format string, args ...any)
}

// holdingLine is what a holder process prints once it holds its lock.
const holdingLine = "simba-bench: holding"

// Selected reports whether o keeps target t.
func (o Options) Selected(t Target) bool {
	if len(o.Only) == 0 {
		return true
	}
	id := strings.ToLower(t.ID())
	for _, s := range o.Only {
		if s != "" && strings.Contains(id, strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// A Table is the result of one scenario: a row per target.
type Table struct {
	ID, Title, Method string
	Cols              []Column
	Rows              []Row
}

// A Column of a Table.
type Column struct {
	Name   string
	Kind   Kind
	Better int  // +1 when higher is better, -1 when lower is, 0 for settings
	Ratio  bool // simba's factor against the best peer is reported
}

// Kind says how a column's values are written.
type Kind int

// The kinds of values: durations are stored in seconds.
const (
	Duration Kind = iota
	Rate
	Count
	Index
)

// A Row is one target's values (NaN when not measured) or the reason it has
// none.
type Row struct {
	Target Target
	Values []float64
	Err    string
	Note   string
}

// floorScenarios are the IDs of the scenarios the floors run in (see
// floor.go): those that time whole uncontended cycles.
var floorScenarios = map[string]bool{"a": true, "b": true, "bs": true}

// Run measures every selected target in every selected scenario, one at a
// time, and returns one Table per scenario. A scenario that fails or runs
// over its time limit gives its row an Err and never stops the run.
func Run(ctx context.Context, s Servers, targets []Target, o Options) []Table {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	for _, t := range targets {
		if t.Warm != nil {
			start := time.Now()
			err := t.Warm(ctx)
			logf("warm %-24s %6.1fs  %v", t.ID(), time.Since(start).Seconds(), err)
		}
	}
	var tables []Table
	for _, sc := range scenarios() {
		if o.Scenarios != "" && !strings.Contains(o.Scenarios, sc.letter) {
			continue
		}
		targets := targets
		if !floorScenarios[sc.id] {
			targets = slices.DeleteFunc(slices.Clone(targets), func(t Target) bool { return t.Floor })
		}
		tab := Table{ID: sc.id, Title: sc.title, Method: sc.method, Cols: sc.cols, Rows: make([]Row, len(targets))}
		runs := make([][]Row, len(targets))
		for run := range max(1, sc.runs) {
			var wg sync.WaitGroup
			for j := range targets {
				// Every other run goes through the targets backwards: a
				// server still warming up (a JVM) favours whoever comes
				// later in a run.
				i := j
				if run%2 == 1 {
					i = len(targets) - 1 - j
				}
				t := targets[i]
				one := func() {
					start := time.Now()
					r := measure(ctx, sc, env{t: t, s: s, holder: o.Holder, fresh: fmt.Sprintf("%s%d", sc.id, run)})
					runs[i] = append(runs[i], r)
					logf("%-4s %-24s %6.1fs  %s", sc.id, t.ID(), time.Since(start).Seconds(), summary(sc.cols, r))
				}
				if sc.parallel {
					wg.Go(one)
				} else {
					one()
				}
			}
			wg.Wait()
		}
		for i := range targets {
			tab.Rows[i] = medianRow(runs[i], sc.median, sc.cols[sc.median])
		}
		tables = append(tables, tab)
	}
	return tables
}

// medianRow returns, of one target's runs of a scenario, the run with the
// median value in column col (the lower middle of an even count of
// measured runs), noting every run's value when there were several; the
// first run when none was measured.
func medianRow(runs []Row, col int, c Column) Row {
	if len(runs) == 1 {
		return runs[0]
	}
	var ok []Row
	for _, r := range runs {
		if r.Err == "" && !math.IsNaN(r.Values[col]) {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return runs[0]
	}
	vals := make([]string, len(runs))
	for i, r := range runs {
		if r.Err != "" || math.IsNaN(r.Values[col]) {
			vals[i] = "—"
		} else {
			vals[i] = format(c.Kind, r.Values[col])
		}
	}
	slices.SortFunc(ok, func(a, b Row) int { return cmp.Compare(a.Values[col], b.Values[col]) })
	m := ok[(len(ok)-1)/2]
	note := fmt.Sprintf("%s of %d runs: %s", c.Name, len(runs), strings.Join(vals, ", "))
	if m.Note != "" {
		note = m.Note + "; " + note
	}
	m.Note = note
	return m
}

// measure runs one scenario on one target under guard.
func measure(ctx context.Context, sc scenario, e env) Row {
	row := Row{Target: e.t}
	vals, note, err := guard(ctx, sc.budget, func(ctx context.Context) ([]float64, string, error) { return sc.run(ctx, e) })
	switch {
	case errors.Is(err, errSkip):
		row.Err = note
	case err != nil:
		row.Err = oneLine(err.Error())
	default:
		row.Values, row.Note = vals, note
	}
	if row.Values == nil {
		row.Values = nans(len(sc.cols))
	}
	return row
}

// errSkip marks a scenario that does not apply to a target; the note says why.
var errSkip = errors.New("not applicable")

// guard runs f under a context that ends after budget, and gives up on it
// (leaving it to finish on its own) when it has not returned 30 s later, so a
// library that ignores its context cannot hang the run.
func guard(ctx context.Context, budget time.Duration, f func(ctx context.Context) ([]float64, string, error)) ([]float64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	type result struct {
		vals []float64
		note string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("panic: %v", p)}
			}
		}()
		v, n, err := f(ctx)
		done <- result{v, n, err}
	}()
	hard := time.NewTimer(budget + 30*time.Second)
	defer hard.Stop()
	select {
	case r := <-done:
		if r.err != nil && ctx.Err() != nil && !errors.Is(r.err, errSkip) {
			r.err = fmt.Errorf("over the time limit of %v: %w", budget, r.err)
		}
		return r.vals, r.note, r.err
	case <-hard.C:
		return nil, "", fmt.Errorf("did not return within %v of its time limit; abandoned", 30*time.Second)
	}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:157] + "…"
	}
	return s
}

func nans(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

func summary(cols []Column, r Row) string {
	if r.Err != "" {
		return "— " + r.Err
	}
	var b strings.Builder
	for i, c := range cols {
		fmt.Fprintf(&b, "%s=%s ", c.Name, format(c.Kind, r.Values[i]))
	}
	return b.String() + r.Note
}

// percentile returns the q-quantile (nearest rank) of d, in seconds; NaN
// when d is empty.
func percentile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return math.NaN()
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)].Seconds()
}

// jain returns Jain's fairness index of x: 1 when all are equal, 1/n when
// one has everything.
func jain(x []int) float64 {
	var sum, sq float64
	for _, v := range x {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	if sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(x)) * sq)
}

// openN opens n clients of t, up to eight at a time. closeAll closes them in
// parallel and gives up on those that take longer than 15 s.
func openN(ctx context.Context, t Target, n int) (cs []Client, closeAll func(), err error) {
	cs = make([]Client, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			octx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			cs[i], errs[i] = t.Open(octx)
		})
	}
	wg.Wait()
	closeAll = func() {
		done := make(chan struct{})
		go func() {
			var wg sync.WaitGroup
			for _, c := range cs {
				if c != nil {
					wg.Go(func() { _ = c.Close() })
				}
			}
			wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, func() {}, fmt.Errorf("open: %w", err)
	}
	return cs, closeAll, nil
}

// openShared opens one client of t for n goroutines (scenario bs): the
// slice holds it n times and closeAll closes it once. It uses
// t.OpenShared where the target has one, else t.Open.
func openShared(ctx context.Context, t Target, n int) (cs []Client, closeAll func(), err error) {
	open := t.OpenShared
	if open == nil {
		open = t.Open
	}
	octx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := open(octx)
	if err != nil {
		return nil, func() {}, fmt.Errorf("open: %w", err)
	}
	cs = make([]Client, n)
	for i := range cs {
		cs[i] = c
	}
	closeAll = func() {
		done := make(chan struct{})
		go func() {
			_ = c.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
	}
	return cs, closeAll, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlock releases l with a context of its own, so that locks taken just
// before a scenario's time ran out are still given back.
func unlock(l Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.Unlock(ctx)
}
