package sqlstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
)

// BenchmarkHandoffK: K contenders, each a Manager on a Store and pool of
// its own (as K processes), loop on one mutex as the benchmark of bench/
// does: lock, hold 1 ms, unlock, wait until another one holds it, lock
// again. b.N hand-offs. Reports the gap from a release to the next grant
// (p50, p99), statements per hand-off as the server counts them and as
// bench/ does (PostgreSQL transactions, MariaDB Questions, pings and
// prepares; interpolateParams=true, as bench/'s DSN), Jain's index over the
// acquisitions per contender and the longest wait of a Lock.
func BenchmarkHandoffK(b *testing.B) {
	for _, k := range []int{8, 32} {
		for _, d := range dialects {
			b.Run(fmt.Sprintf("%s/K=%d", d.name, k), func(b *testing.B) { handoffK(b, d, k) })
		}
	}
}

func handoffK(b *testing.B, d dialect, k int) {
	dsn := d.migrated(b)
	if d.name == "mysql" {
		dsn += "?interpolateParams=true" // as bench/ and the package's documentation
	}
	ops := serverOps(b, d, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ms := make([]*lease.Manager, k)
	var closers []func() // every server session of the contenders, so that PostgreSQL publishes their counters
	for i := range ms {
		db := d.open(b, dsn)
		db.SetMaxOpenConns(4)
		db.SetMaxIdleConns(4)
		s, err := d.store(db)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		m, err := lease.NewManager(s, lease.WithTTL(5*time.Second), lease.WithTransition(3*time.Second),
			lease.WithContenderID(fmt.Sprint("c", i)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { m.Close(context.Background()) })
		closers = append(closers, func() { m.Close(context.Background()); s.Close(); db.Close() })
		ms[i] = m
	}
	const hold = time.Millisecond
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		holder   = -1
		released time.Time // of the last release, zero before the first
		gaps     []time.Duration
		longest  time.Duration
		counts   = make([]int, k)
		done     bool
	)
	before := int64(0)
	if ops != nil {
		before = ops()
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				for holder == i && !done { // wait until another one holds it
					cond.Wait()
				}
				if done {
					mu.Unlock()
					return
				}
				mu.Unlock()
				begin := time.Now()
				l, err := m.Acquire(ctx, "bench/fair")
				if err != nil {
					b.Error(err)
					mu.Lock()
					done = true
					cond.Broadcast()
					mu.Unlock()
					return
				}
				mu.Lock()
				if !released.IsZero() {
					gaps = append(gaps, time.Since(released))
				}
				longest = max(longest, time.Since(begin))
				counts[i]++
				holder = i
				done = done || len(gaps) >= b.N
				cond.Broadcast()
				mu.Unlock()
				time.Sleep(hold)
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if len(gaps) == 0 {
		b.Fatal("no hand-off")
	}
	for _, c := range closers {
		c()
	}
	if ops != nil {
		b.ReportMetric(float64(ops()-before)/float64(len(gaps)), "stmts/handoff")
	}
	slices.Sort(gaps)
	b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(longest.Milliseconds()), "longest-ms")
	var sum, sq float64
	for _, c := range counts {
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	b.ReportMetric(sum*sum/(float64(k)*sq), "jain")
}
