package redisstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// Server-side cost, counted as the benchmark of bench/ counts it: INFO's
// total_commands_processed (a script and every command it runs), less the
// INFO calls that read it.

// serverOps returns the commands the server at c has processed, less the
// INFO calls from outside scripts, and the INFO calls made by scripts.
func serverOps(tb testing.TB, c *redis.Client) (ops, infos int64) {
	tb.Helper()
	info, err := c.Info(bg, "stats", "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total, infoCalls int64
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			total = atoi(tb, v)
		}
		if v, ok := strings.CutPrefix(line, "cmdstat_info:calls="); ok {
			infoCalls = atoi(tb, v[:strings.IndexByte(v+",", ',')])
		}
	}
	if total == 0 {
		tb.Fatal("no total_commands_processed in INFO")
	}
	return total - infoCalls, infoCalls
}

// BenchmarkCycleCost: server commands per uncontended acquire + release
// through a Manager, on one lock and over 10,000 fresh names.
func BenchmarkCycleCost(b *testing.B) {
	for _, fresh := range []bool{false, true} {
		b.Run(fmt.Sprintf("fresh=%v", fresh), func(b *testing.B) {
			srv := privateRedis(b)
			direct := dial(b, srv.Addr())
			m := manager(b, newStore(b, dial(b, srv.Addr()), srv.KeyPrefix())) // the guard on: settled covers its ttl
			name := func(i int) string {
				if fresh {
					return fmt.Sprintf("fresh/%d", i)
				}
				return "one"
			}
			cycle := func(i int) {
				l, err := m.Acquire(bg, name(i))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(bg); err != nil {
					b.Fatal(err)
				}
			}
			cycle(-1) // the store's first contact with the server
			before, infosBefore := serverOps(b, direct)
			n := 0
			for b.Loop() {
				cycle(n)
				n++
			}
			after, infosAfter := serverOps(b, direct)
			b.ReportMetric(float64(after-before-1)/float64(n), "cmds/cycle")
			b.ReportMetric(float64(infosAfter-infosBefore-1)/float64(n), "INFO/cycle")
		})
	}
}

// BenchmarkRenewCost: server commands per second while one Manager holds
// 1,000 leases (ttl 5 s, transition 3 s: about 600 renewals per second).
func BenchmarkRenewCost(b *testing.B) {
	srv := privateRedis(b)
	direct := dial(b, srv.Addr())
	s := newStore(b, dial(b, srv.Addr()), srv.KeyPrefix(), redisstore.WithRestartGuard(false)) // a young server
	m, err := lease.NewManager(s, lease.WithTTL(5*time.Second), lease.WithTransition(3*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(bg)
	for i := range 1000 {
		if _, err := m.Acquire(bg, fmt.Sprintf("held/%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	const window = 10 * time.Second
	var rate float64
	for b.Loop() {
		before, _ := serverOps(b, direct)
		time.Sleep(window)
		after, _ := serverOps(b, direct)
		rate = float64(after-before-1) / window.Seconds()
	}
	b.ReportMetric(rate, "cmds/s")
}
