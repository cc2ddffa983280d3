package sqlstore_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

// BenchmarkHandoffK: K contenders, each a Manager on a Store and pool of
// its own (as K processes), loop on one lock as the benchmark of bench/
// does: lock, hold 1 ms, unlock, wait until another one holds it, lock
// again. b.N hand-offs. Reports the gap from a release to the next grant
// (p50, p99), statements per hand-off as the server counts them and as
// bench/ does (PostgreSQL transactions, MariaDB Questions, pings and
// prepares; interpolateParams=true, as bench/'s DSN), Jain's index over the
// acquisitions per contender and the longest wait of a Lock.
func BenchmarkHandoffK(b *testing.B) {
	for _, k := range []int{8, 32} {
		for _, d := range pushDialects {
			b.Run(fmt.Sprintf("%s/K=%d", d.name, k), func(b *testing.B) { handoffK(b, d, k) })
		}
	}
}

func handoffK(b *testing.B, d dialect, k int) {
	b.ResetTimer()
	r := runHandoffs(b, d, k, b.N, 0)
	b.StopTimer()
	if !math.IsNaN(r.stmts) {
		b.ReportMetric(r.stmts, "stmts/handoff")
	}
	gaps := r.gaps
	slices.Sort(gaps)
	b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(r.longest.Milliseconds()), "longest-ms")
	var sum, sq float64
	for _, c := range r.counts {
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	b.ReportMetric(sum*sum/(float64(k)*sq), "jain")
}

// handoffs is what runHandoffs measured.
type handoffs struct {
	gaps    []time.Duration // from a release to the next grant
	longest time.Duration   // of a Lock
	counts  []int           // acquisitions per contender
	stmts   float64         // statements per hand-off after the warm-up; NaN without a server counter
}

// runHandoffs: k contenders, each a Manager on a Store and pool of its own
// (as k processes), loop on one lock as the benchmark of bench/ does:
// lock, hold 1 ms, unlock, wait until another one holds it, lock again,
// until n hand-offs have been made. Statements are counted from the
// warm-up's last hand-off on (from before the first Lock when warm is 0,
// cold start included); with warm > 0 the counter is read while the
// contenders run, so PostgreSQL, whose backends publish counters late, is
// counted only when warm is 0.
func runHandoffs(tb testing.TB, d dialect, k, n, warm int) handoffs {
	dsn := d.migrated(tb)
	if d.name == "mysql" {
		dsn += "?interpolateParams=true" // as bench/ and the package's documentation
	}
	ops := serverOps(tb, d, dsn)
	if d.schema == schema.Postgres && warm > 0 {
		ops = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ms := make([]*lease.Manager, k)
	var closers []func() // every server session of the contenders, so that PostgreSQL publishes their counters
	for i := range ms {
		m, closeAll := newContender(tb, d, dsn, i, 4, nil)
		closers = append(closers, closeAll)
		ms[i] = m
	}
	const hold = time.Millisecond
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		holder   = -1
		released time.Time // of the last release, zero before the first
		r        = handoffs{counts: make([]int, k), stmts: math.NaN()}
		done     bool
		before   int64
	)
	if ops != nil && warm == 0 {
		before = ops()
	}
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
					tb.Error(err)
					mu.Lock()
					done = true
					cond.Broadcast()
					mu.Unlock()
					return
				}
				mu.Lock()
				if !released.IsZero() {
					r.gaps = append(r.gaps, time.Since(released))
				}
				r.longest = max(r.longest, time.Since(begin))
				r.counts[i]++
				holder = i
				done = done || len(r.gaps) >= warm+n
				if ops != nil && warm > 0 && len(r.gaps) == warm {
					before = ops() // the holder holds: no statement of the hand-offs runs meanwhile
				}
				cond.Broadcast()
				mu.Unlock()
				time.Sleep(hold)
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					tb.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(r.gaps) == 0 {
		tb.Fatal("no hand-off")
	}
	var after int64
	if ops != nil && warm > 0 {
		after = ops() // before the contenders leave: their withdrawals are not hand-offs
	}
	for _, c := range closers {
		c()
	}
	if ops != nil {
		if warm == 0 {
			after = ops()
		}
		r.stmts = float64(after-before) / float64(len(r.gaps)-warm)
	}
	r.gaps = r.gaps[warm:]
	return r
}

// newContender returns the Manager of contender i ("c" i) on a Store and
// a pool of its own, as bench/ runs one per process (ttl 5 s, transition
// 3 s), and a function that closes all three; the Manager sees the Store
// through wrap, when not nil.
func newContender(tb testing.TB, d dialect, dsn string, i, pool int, wrap func(*sqlstore.Store) lease.Store) (*lease.Manager, func()) {
	db := d.open(tb, dsn)
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	s, err := d.store(db)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	var store lease.Store = s
	if wrap != nil {
		store = wrap(s)
	}
	m, err := lease.NewManager(store, lease.WithTTL(5*time.Second), lease.WithTransition(3*time.Second),
		lease.WithContenderID(fmt.Sprint("c", i)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close(context.Background()) })
	return m, func() { m.Close(context.Background()); s.Close(); db.Close() }
}

// TestStatementsPerHandoff (issue 18): at K = 8 and 32 contenders on one
// lock, once every contender has come, a hand-off on MariaDB costs at
// most 3 statements as bench/ counts them: the release (which lets the
// holder's doorbell go), the previous holder's Acquire that queues it
// again, and its doorbell's wait, which takes the lock for it at its turn
// (WaitGrant: the next one runs no statement to take it); allow a quarter
// more for doorbells taken late (the waiter then probes the row). The
// code before WaitGrant measured 3.91 at K = 8.
func TestStatementsPerHandoff(t *testing.T) {
	if testing.Short() {
		t.Skip("hand-offs of 32 contenders")
	}
	for _, k := range []int{8, 32} {
		t.Run(fmt.Sprint("mysql/K=", k), func(t *testing.T) {
			r := runHandoffs(t, mysqlDB, k, 100, 2*k)
			t.Logf("%.2f statements per hand-off", r.stmts)
			if r.stmts > 3.75 {
				t.Errorf("%.2f statements per hand-off, want at most 3 (3.75 with late doorbells)", r.stmts)
			}
		})
	}
}

// BenchmarkHandoffBellless: the hand-off from a holder that took the lock
// without waiting, and so holds no doorbell, to a waiter that came while it
// held, which tries the row now and then. Contender 0 takes the lock
// uncontended, contender 1 queues, and 0 releases 5 ms after that; the gap
// runs from the release call to 1's grant. Reports its p50: 5.9 ms on
// MySQL and PostgreSQL with tries from 10 ms doubling, 3.9 ms from 1 ms
// (private servers, 50 hand-offs).
func BenchmarkHandoffBellless(b *testing.B) {
	for _, d := range pushDoorbells {
		b.Run(d.name, func(b *testing.B) {
			dsn := d.migrated(b)
			if d.name == "mysql" {
				dsn += "?interpolateParams=true"
			}
			m0, close0 := newContender(b, d, dsn, 0, 4, nil)
			defer close0()
			m1, close1 := newContender(b, d, dsn, 1, 4, nil)
			defer close1()
			raw := d.open(b, dsn)
			defer raw.Close()
			ctx := context.Background()
			const name, hold = "bench/bellless", 5 * time.Millisecond
			queueOf := "SELECT queue FROM simba_mutex WHERE mutex = ?"
			if d.schema == schema.Postgres {
				queueOf = "SELECT queue FROM simba_mutex WHERE mutex = $1"
			}
			var gaps []time.Duration
			b.ResetTimer()
			for range b.N {
				l0, err := m0.Acquire(ctx, name)
				if err != nil {
					b.Fatal(err)
				}
				got := make(chan *lease.Lease, 1)
				go func() {
					l1, err := m1.Acquire(ctx, name)
					if err != nil {
						b.Error(err)
					}
					got <- l1
				}()
				for { // until 1 is queued
					var q string
					if err := raw.QueryRowContext(ctx, queueOf, name).Scan(&q); err != nil {
						b.Fatal(err)
					}
					if q != "" {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
				time.Sleep(hold)
				t0 := time.Now()
				if err := l0.Release(ctx); err != nil {
					b.Fatal(err)
				}
				l1 := <-got
				gaps = append(gaps, time.Since(t0))
				if l1 == nil {
					b.FailNow()
				}
				if err := l1.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			slices.Sort(gaps)
			b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "p50-µs")
		})
	}
}
