package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// Benchmarks on a private local Redis (go test -bench . -run '^$' ./redisstore/).

// benchManager returns a Manager on a Store of its own client, as a
// process of its own would have, with the given ttl (transition ttl/2).
// The restart guard is off: the servers of the benchmarks are younger
// than ttl + transition, and the guard would hold every lock back until
// they are not (see WithRestartGuard).
func benchManager(b *testing.B, srv *testserver.RedisServer, ttl time.Duration) *lease.Manager {
	return countedManager(b, srv, ttl, nil)
}

// countedManager is benchManager whose client's requests n counts (when
// not nil).
func countedManager(b *testing.B, srv *testserver.RedisServer, ttl time.Duration, n *counter) *lease.Manager {
	b.Helper()
	c := dial(b, srv.Addr())
	if n != nil {
		c.AddHook(n)
	}
	s := newStore(b, c, srv.KeyPrefix(), redisstore.WithRestartGuard(false))
	m, err := lease.NewManager(s, lease.WithTTL(ttl), lease.WithTransition(ttl/2))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}

// BenchmarkAcquireRelease: one uncontended Acquire and Release through a
// Manager (Watch, acquire script, release script).
func BenchmarkAcquireRelease(b *testing.B) {
	srv := privateRedis(b)
	benchCycles(b, benchManager(b, srv, 10*time.Second), bg)
}

// benchCycles acquires and releases one lock of m under ctx per op.
func benchCycles(b *testing.B, m *lease.Manager, ctx context.Context) {
	for b.Loop() {
		l, err := m.Acquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseCancelable is BenchmarkAcquireRelease under a
// context that can be cancelled, as a request's is (and as the bench
// module's scenarios pass): each store call then watches it.
func BenchmarkAcquireReleaseCancelable(b *testing.B) {
	srv := privateRedis(b)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	benchCycles(b, benchManager(b, srv, 10*time.Second), ctx)
}

// BenchmarkHandoff: from one Manager's Release to the grant of another
// Manager waiting on the lock (its own client and subscription).
func BenchmarkHandoff(b *testing.B) {
	srv := privateRedis(b)
	direct := dial(b, srv.Addr())
	queue := strings.TrimSuffix(recordKeyOf(srv.KeyPrefix(), "handoff"), ":r") + ":q"
	ms := [2]*lease.Manager{benchManager(b, srv, 10*time.Second), benchManager(b, srv, 10*time.Second)}
	l, err := ms[0].Acquire(bg, "handoff")
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		got := make(chan *lease.Lease, 1)
		go func() {
			next, err := ms[(i+1)%2].Acquire(bg, "handoff")
			if err != nil {
				b.Error(err)
			}
			got <- next
		}()
		for n := int64(0); n == 0; time.Sleep(100 * time.Microsecond) { // the waiter is queued (and subscribed)
			if n, err = direct.ZCard(bg, queue).Result(); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		if err := l.Release(bg); err != nil {
			b.Fatal(err)
		}
		l = <-got
		total += time.Since(start)
		if l == nil {
			b.FailNow()
		}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/handoff")
	_ = l.Release(bg)
}

// BenchmarkWaiters32: server commands per second while 32 Managers wait
// for 5 s on a lock a 33rd holds and renews (INFO total_commands_processed;
// the INFO calls themselves are subtracted).
func BenchmarkWaiters32(b *testing.B) {
	for _, ttl := range []time.Duration{10 * time.Second, time.Second} {
		b.Run("ttl="+ttl.String(), func(b *testing.B) {
			srv := privateRedis(b)
			direct := dial(b, srv.Addr())
			queue := strings.TrimSuffix(recordKeyOf(srv.KeyPrefix(), "hot"), ":r") + ":q"
			holder := benchManager(b, srv, ttl)
			l, err := holder.Acquire(bg, "hot")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			for range 32 {
				m := benchManager(b, srv, ttl)
				go func() { _, _ = m.Acquire(ctx, "hot") }()
			}
			waitFor(b, "32 queued waiters", func() bool { n, _ := direct.ZCard(bg, queue).Result(); return n == 32 })
			waitFor(b, "32 subscribed waiters", func() bool { return pubsubConns(b, direct) == 32 })
			time.Sleep(time.Second) // each has made its attempt after subscribing
			const window = 5 * time.Second
			var rate, scripts float64
			for b.Loop() {
				before, beforeScripts := commands(b, direct)
				time.Sleep(window)
				after, afterScripts := commands(b, direct)
				rate = float64(after-before-1) / window.Seconds()
				scripts = float64(afterScripts-beforeScripts) / window.Seconds()
			}
			b.ReportMetric(rate, "cmds/s")
			b.ReportMetric(scripts, "scripts/s")
			cancel()
			_ = l.Release(bg)
		})
	}
}

// commands reads total_commands_processed (every command, also those a
// script calls) and the number of scripts run (EVALSHA and EVAL calls).
func commands(b *testing.B, c *redis.Client) (total, scripts int64) {
	info, err := c.Info(bg, "stats", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			total = atoi(b, v)
		}
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if v, ok := strings.CutPrefix(line, cmd); ok {
				scripts += atoi(b, v[:strings.IndexByte(v+",", ',')])
			}
		}
	}
	if total == 0 {
		b.Fatal(fmt.Errorf("no total_commands_processed in INFO"))
	}
	return total, scripts
}

func atoi(b testing.TB, v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
