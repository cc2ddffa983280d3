package testserver_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
)

// short is the timeout of a request that must fail against a paused server.
const short = 300 * time.Millisecond

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// redisClient returns a client that neither retries nor waits long.
func redisClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: short, WriteTimeout: short, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// queryOne runs SELECT 1 with a timeout.
func queryOne(db *sql.DB, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// zkConn connects and waits for a session.
func zkConn(t *testing.T, servers []string, session time.Duration) *zk.Conn {
	conn, events, err := zk.Connect(servers, session, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			t.Fatalf("no session with %v", servers)
		}
	}
}

// eventually retries f until it succeeds or d passes.
func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// timed runs f and reports its duration.
func timed(t *testing.T, what string, f func() error) {
	t.Helper()
	begin := time.Now()
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s took %v", what, time.Since(begin).Round(time.Millisecond))
}

// notControllable checks that every control method refuses.
func notControllable(t *testing.T, p *testserver.Process) {
	t.Helper()
	for name, f := range map[string]func() error{
		"Start": p.Start, "Stop": p.Stop, "Kill": p.Kill, "Restart": p.Restart, "Pause": p.Pause, "Resume": p.Resume,
	} {
		if err := f(); !errors.Is(err, testserver.ErrNotControllable) {
			t.Errorf("%s on %s: got %v, want ErrNotControllable", name, p, err)
		}
	}
}

// quiet drops go-zookeeper's log lines: reconnects are the point here, and
// its goroutines may log after the test ended.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
