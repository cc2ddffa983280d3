package redisstore_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// TestMain finds the Redis server of the examples, then runs the tests,
// stops the shared test servers and checks for leaked goroutines.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		childWaiter() // this binary again, as a waiter process (see waiter_test.go)
		return
	}
	if a, err := testserver.RedisAddr(); err == nil {
		redisAddr = a
	}
	testserver.VerifyTestMain(m)
}

// redisAddr is the server of the examples (in an application, yours).
var redisAddr = "localhost:6379"

var bg = context.Background()

// Timings of the raw-store tests: long enough for a slow machine, short
// enough to wait out.
const (
	ttl = 500 * time.Millisecond
	tr  = 300 * time.Millisecond
)

// dial returns a client of addr, closed when the test ends. Context
// deadlines bound its calls, as the lease package's call timeouts expect.
func dial(t testing.TB, addr string) *redis.Client { return dialNamed(t, addr, "") }

// dialNamed is dial with a client name (CLIENT SETNAME) on every
// connection.
func dialNamed(t testing.TB, addr, name string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, ClientName: name, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// dialCluster returns a cluster client of addrs, closed when the test ends.
func dialCluster(t testing.TB, addrs []string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore returns a Store on c under prefix, closed when the test ends.
func newStore(t testing.TB, c redis.UniversalClient, prefix string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithKeyPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// shared returns a Store on the shared Redis server under the test's own
// prefix. When the test ends, every key the Store left must expire.
func shared(t testing.TB, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	srv := sharedRedis(t)
	c := dial(t, srv.Addr())
	t.Cleanup(func() { wantAllExpire(t, c, srv.KeyPrefix()) })
	return newStore(t, c, srv.KeyPrefix(), opts...)
}

// wantAllExpire checks that every key under prefix but the epoch keys
// (one per slot, see keys.go) has an expiry: the Store leaves no orphans.
func wantAllExpire(t testing.TB, c *redis.Client, prefix string) {
	t.Helper()
	keys, err := c.Keys(bg, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ":epoch") {
			continue
		}
		if d, err := c.PTTL(bg, k).Result(); err == nil && d == -1 {
			t.Errorf("key %q never expires", k)
		}
	}
}

func mustHold(t testing.TB, s lease.Store, name, contender string) lease.Record {
	t.Helper()
	rec, err := s.Acquire(bg, name, contender, ttl, tr)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", name, contender, err)
	}
	if !rec.Held(contender) {
		t.Fatalf("Acquire(%q, %q) lost: %+v", name, contender, rec)
	}
	return rec
}

func mustLose(t testing.TB, s lease.Store, name, contender string) lease.Record {
	t.Helper()
	rec, err := s.Acquire(bg, name, contender, ttl, tr)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", name, contender, err)
	}
	if rec.Held(contender) {
		t.Fatalf("Acquire(%q, %q) won: %+v", name, contender, rec)
	}
	return rec
}

// splitHostPort splits addr for REPLICAOF.
func splitHostPort(t testing.TB, addr string) (string, string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return host, port
}

// containsLine reports whether text has line, ignoring CR.
func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimRight(l, "\r") == line {
			return true
		}
	}
	return false
}

// grantKeyOf finds the grant key under prefix whose token is tok.
func grantKeyOf(t testing.TB, c *redis.Client, prefix string, tok uint64) string {
	t.Helper()
	keys, err := c.Keys(bg, prefix+"*:g:"+strconv.FormatUint(tok, 10)+":*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("grant keys with token %d: %v, %v; want one", tok, keys, err)
	}
	return keys[0]
}

// The servers of the tests, each up for long enough that the restart guard
// (see WithRestartGuard) no longer holds back new locks with the tests'
// timings.

func sharedRedis(t testing.TB) *testserver.RedisServer {
	t.Helper()
	srv := testserver.Redis(t)
	settled(t, srv.Addr())
	return srv
}

func privateRedis(t testing.TB) *testserver.RedisServer {
	t.Helper()
	srv := testserver.PrivateRedis(t)
	settled(t, srv.Addr())
	return srv
}

func sharedCluster(t testing.TB) *testserver.ClusterServer {
	t.Helper()
	srv := testserver.RedisCluster(t)
	settled(t, srv.Addrs()...)
	return srv
}

// settledUptime is longer than the guard holds back a lock whose ttl +
// transition is at most 1.5 s (the guard counts uptime minus one second).
const settledUptime = 3

// settled waits until every server at addrs has been up for settledUptime
// seconds.
func settled(t testing.TB, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		waitFor(t, "server "+a+" up for a while", func() bool {
			info, err := c.Info(bg, "server").Result()
			if err != nil {
				return false
			}
			for _, l := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "uptime_in_seconds:"); ok {
					n, err := strconv.Atoi(v)
					return err == nil && n >= settledUptime
				}
			}
			return false
		})
		_ = c.Close()
	}
}
