package testserver_test

import (
	"context"
	"database/sql"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/integration/testserver"
)

// TestServerClock: a server under a ServerClock reads the machine's time
// plus the clock's offset, and a Step while it runs moves the time it
// reads at once (Redis TIME, PostgreSQL clock_timestamp(), MariaDB
// SYSDATE(6), a ZooKeeper node's mtime), forward and backward.
func TestServerClock(t *testing.T) {
	t.Parallel()
	sqlNow := func(t *testing.T, driver, dsn, query string) func(ctx context.Context) (time.Time, error) {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return func(ctx context.Context) (time.Time, error) {
			var unix float64
			err := db.QueryRowContext(ctx, query).Scan(&unix)
			return time.UnixMicro(int64(unix * 1e6)), err
		}
	}
	for _, s := range []struct {
		name  string
		start func(t *testing.T, c *testserver.ServerClock) func(ctx context.Context) (time.Time, error)
	}{
		{"redis", func(t *testing.T, c *testserver.ServerClock) func(ctx context.Context) (time.Time, error) {
			srv := testserver.PrivateRedis(t, testserver.RedisServerClock(c))
			rc := redisClient(t, srv.Addr())
			return func(ctx context.Context) (time.Time, error) { return rc.Time(ctx).Result() }
		}},
		{"postgres", func(t *testing.T, c *testserver.ServerClock) func(ctx context.Context) (time.Time, error) {
			srv := testserver.PrivatePostgresWith(t, testserver.WithServerClock(c))
			return sqlNow(t, "pgx", srv.DSN(), "SELECT extract(epoch FROM clock_timestamp())::float8")
		}},
		{"mysql", func(t *testing.T, c *testserver.ServerClock) func(ctx context.Context) (time.Time, error) {
			srv := testserver.PrivateMySQLWith(t, testserver.WithServerClock(c))
			return sqlNow(t, "mysql", srv.DSN(), "SELECT UNIX_TIMESTAMP(SYSDATE(6))")
		}},
		{"zookeeper", func(t *testing.T, c *testserver.ServerClock) func(ctx context.Context) (time.Time, error) {
			// The server's wall clock is the mtime it gives a node it
			// writes. (Its sessions expire on the JVM's monotonic clock,
			// which a step does not move.)
			srv := testserver.PrivateZooKeeper(t, testserver.ZooKeeperServerClock(c))
			conn := zkConn(t, srv.Servers(), 4*time.Second)
			p := path.Join(srv.Root(), "clock")
			if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			return func(context.Context) (time.Time, error) {
				st, err := conn.Set(p, nil, -1)
				if err != nil {
					return time.Time{}, err
				}
				return time.UnixMilli(st.Mtime), nil
			}
		}},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			c := testserver.NewServerClock(t)
			now := s.start(t, c)
			ctx := ctxTimeout(t, time.Minute)
			// ahead is how far the server's clock is ahead of ours; a
			// call may take seconds on a loaded machine, the steps are
			// minutes.
			ahead := func() time.Duration {
				t.Helper()
				before := time.Now()
				st, err := now(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return st.Sub(before).Round(time.Second)
			}
			if d := ahead(); d < -5*time.Second || d > 5*time.Second {
				t.Fatalf("at offset 0 the server's clock is %v ahead", d)
			}
			for _, step := range []time.Duration{10 * time.Minute, -30 * time.Minute} {
				if err := c.Step(step); err != nil {
					t.Fatal(err)
				}
				want := c.Offset()
				d := ahead()
				for range 20 { // ZooKeeper's JVM reads the offset once a second
					if d >= want-5*time.Second && d <= want+5*time.Second {
						break
					}
					time.Sleep(250 * time.Millisecond)
					d = ahead()
				}
				if d < want-5*time.Second || d > want+5*time.Second {
					t.Errorf("after a step of %v the server's clock is %v ahead, want %v", step, d, want)
				}
			}
		})
	}
}
