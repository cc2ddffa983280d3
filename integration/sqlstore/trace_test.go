package sqlstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// BenchmarkHandoffTrace (issue 18) times the steps of one hand-off at
// K = 2 and 8, as bench/'s scenario c does it (a Manager, Store and pool per
// contender): the holder's release statement, the wake-up of the next
// holder's Watch, its acquire statement, and the grant reported to its
// caller. Each step is the median over b.N hand-offs, from the moment the
// holder calls Release.
func BenchmarkHandoffTrace(b *testing.B) {
	for _, k := range []int{2, 8} {
		for _, d := range servers {
			b.Run(fmt.Sprintf("%s/K=%d", d.name, k), func(b *testing.B) {
				st := traceHandoffs(b, d, k, max(b.N, 50))
				for _, s := range st {
					b.ReportMetric(float64(s.at.Microseconds()), s.name+"-µs")
				}
				b.Log(describeSteps(st))
			})
		}
	}
}

// step is a median time since the release call.
type step struct {
	name string
	at   time.Duration
}

func describeSteps(st []step) string {
	var sb strings.Builder
	for _, s := range st {
		fmt.Fprintf(&sb, "%s %v; ", s.name, s.at)
	}
	return sb.String()
}

// tracedStore records when a contender's calls start and end and when its
// Watch events arrive.
type tracedStore struct {
	*sqlstore.Store
	mu     sync.Mutex
	event  time.Time // the last event seen
	acq0   time.Time // the last Acquire's start
	acq1   time.Time // and end
	rel0   time.Time
	rel1   time.Time
	events int // events since the last grant
}

func (t *tracedStore) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	t0 := time.Now()
	r, err := t.Store.Acquire(ctx, name, contender, ttl, transition)
	t1 := time.Now()
	t.mu.Lock()
	t.acq0, t.acq1 = t0, t1
	t.mu.Unlock()
	return r, err
}

func (t *tracedStore) Release(ctx context.Context, name, contender string, token uint64) error {
	t0 := time.Now()
	err := t.Store.Release(ctx, name, contender, token)
	t1 := time.Now()
	if token != 0 {
		t.mu.Lock()
		t.rel0, t.rel1 = t0, t1
		t.mu.Unlock()
	}
	return err
}

func (t *tracedStore) Watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	in, err := t.Store.Watch(ctx, name, contender)
	if err != nil {
		return nil, err
	}
	out := make(chan lease.Event, 1)
	go func() {
		defer close(out)
		for e := range in {
			now := time.Now()
			t.mu.Lock()
			t.event = now
			t.events++
			t.mu.Unlock()
			select {
			case out <- e:
			default:
			}
		}
	}()
	return out, nil
}

func traceHandoffs(tb testing.TB, d dialect, k, n int) []step {
	dsn := d.migrated(tb)
	if d.name == "mysql" {
		dsn += "?interpolateParams=true"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ms := make([]*lease.Manager, k)
	ts := make([]*tracedStore, k)
	for i := range ms {
		ms[i], _ = newContender(tb, d, dsn, i, 16, func(s *sqlstore.Store) lease.Store {
			ts[i] = &tracedStore{Store: s}
			return ts[i]
		})
	}
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		holder   = -1
		last     = -1 // the previous holder
		inLock   int
		done     bool
		rows     [][5]time.Duration // release end, event, acquire start, acquire end, grant, each since the release call
		handoffs int
	)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			for {
				mu.Lock()
				for holder == i && !done {
					cond.Wait()
				}
				if done {
					mu.Unlock()
					return
				}
				inLock++
				mu.Unlock()
				l, err := m.Acquire(ctx, "bench/trace")
				got := time.Now()
				if err != nil {
					tb.Error(err)
					mu.Lock()
					done = true
					cond.Broadcast()
					mu.Unlock()
					return
				}
				mu.Lock()
				inLock--
				if last >= 0 {
					p, me := ts[last], ts[i]
					p.mu.Lock()
					r0, r1 := p.rel0, p.rel1
					p.mu.Unlock()
					me.mu.Lock()
					ev, a0, a1, nev := me.event, me.acq0, me.acq1, me.events
					me.events = 0
					me.mu.Unlock()
					if nev > 0 && ev.After(r0) && a0.After(ev) && handoffs >= k {
						rows = append(rows, [5]time.Duration{r1.Sub(r0), ev.Sub(r0), a0.Sub(r0), a1.Sub(r0), got.Sub(r0)})
					}
					handoffs++
				} else {
					ts[i].mu.Lock()
					ts[i].events = 0
					ts[i].mu.Unlock()
				}
				holder, last = i, i
				done = done || len(rows) >= n
				cond.Broadcast()
				mu.Unlock()
				// Release once every other contender waits, and 1 ms more.
				for {
					mu.Lock()
					all := inLock >= k-1 || done
					mu.Unlock()
					if all {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
				time.Sleep(time.Millisecond)
				mu.Lock()
				holder = -1
				cond.Broadcast()
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					tb.Error(err)
				}
				mu.Lock()
				for holder == -1 && !done { // until another one holds it
					cond.Wait()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	names := []string{"release", "event", "acquire-start", "acquire-end", "grant"}
	st := make([]step, len(names))
	for j, name := range names {
		col := make([]time.Duration, len(rows))
		for r := range rows {
			col[r] = rows[r][j]
		}
		slices.Sort(col)
		st[j] = step{name, col[len(col)/2]}
	}
	tb.Logf("%d hand-offs traced of %d", len(rows), handoffs)
	return st
}
