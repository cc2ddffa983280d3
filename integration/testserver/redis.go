package testserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a Redis server for one test. Tests of one binary may share
// the server; each gets a key prefix of its own and must keep its keys under
// it. The prefix contains no hash tag ('{'), so it does not pin keys to one
// Redis Cluster slot.
type RedisServer struct {
	*Process // Addr; control methods work for PrivateRedis only
	prefix   string
	dir      string // data directory of a private server
}

// KeyPrefix returns the test's unique key prefix, e.g. "simba-test-1a2b3c4d5e6f:".
func (s *RedisServer) KeyPrefix() string { return s.prefix }

// Dir returns the data directory of a server from [PrivateRedis] (where
// SAVE writes dump.rdb and, with [RedisAOF], the appendonlydir lives), or
// "" for a shared one.
func (s *RedisServer) Dir() string { return s.dir }

// A RedisOption configures a server from [PrivateRedis].
type RedisOption func(*redisConfig)

type redisConfig struct {
	args  []string
	clock *ServerClock
}

// RedisAOF runs the server with an append-only file synced every second
// (appendonly yes, appendfsync everysec), as many installations do; a
// restart then comes back with the data of the file. Without it a private
// server has no persistence of its own, but a restart after a SAVE comes
// back with the snapshot SAVE wrote.
func RedisAOF() RedisOption {
	return func(c *redisConfig) { c.args = append(c.args, "--appendonly", "yes", "--appendfsync", "everysec") }
}

// RedisReplication readies a server from [PrivateRedis] to be a primary
// with replicas (see [RedisServer.ReplicaOf]): a replica's full sync
// starts at once (repl-diskless-sync-delay 0) instead of 5 s later.
func RedisReplication() RedisOption {
	return func(c *redisConfig) { c.args = append(c.args, "--repl-diskless-sync-delay", "0") }
}

// ReplicaOf makes a server from [PrivateRedis] a replica of the server at
// primary (REPLICAOF host port: it drops its data set and syncs from
// primary), and waits until the replication link is up and the sync is
// done. A primary with clients keeps them: their writes are refused
// (READONLY) from then on. A restart makes the server a primary again.
func (s *RedisServer) ReplicaOf(ctx context.Context, primary string) error {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return fmt.Errorf("testserver: %s: replica of %q: %w", s.Process, primary, err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.ReplicaOf(ctx, host, port).Err(); err != nil {
		return fmt.Errorf("testserver: %s: REPLICAOF %s: %w", s.Process, primary, err)
	}
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testserver: %s: sync from %s: %w (last INFO error %v)", s.Process, primary, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Promote makes a replica from [PrivateRedis] a primary (REPLICAOF NO
// ONE), as Sentinel does to the replica it elects: it keeps its data set
// and accepts writes.
func (s *RedisServer) Promote(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("testserver: %s: REPLICAOF NO ONE: %w", s.Process, err)
	}
	return nil
}

var sharedRedis lazy[*Process]

// Redis returns a Redis server for the test: the one named by
// SIMBA_TEST_REDIS, else a container when Docker answers, else a local
// redis-server shared by the tests of this binary. Only the key prefix is
// the test's own; the server is not controllable (see PrivateRedis).
func Redis(t testing.TB) *RedisServer {
	t.Helper()
	prefix := unique("simba-test-") + ":"
	if a := os.Getenv(EnvRedis); a != "" {
		if !hostPort(a) {
			t.Fatalf("testserver: %s=%q is not host:port", EnvRedis, a)
		}
		t.Cleanup(func() { deleteRedisKeys(t, []string{a}, prefix) })
		return &RedisServer{Process: detached("redis", a, "named by "+EnvRedis), prefix: prefix}
	}
	begin := time.Now()
	p, err := startSharedRedis()
	need(t, err)
	logStart(t, "shared "+p.String(), begin)
	return &RedisServer{Process: p, prefix: prefix}
}

// startSharedRedis starts the shared server once per binary.
func startSharedRedis() (*Process, error) {
	return sharedRedis.get(func() (*Process, error) {
		return sharedServer("redis", containerSpec{
			image: imageRedis, port: "6379/tcp",
			cmd:   []string{"redis-server", "--save", "", "--appendonly", "no"},
			ready: pingRedis,
		}, func() (*group, error) { return startRedis() }, "PrivateRedis")
	})
}

// RedisAddr returns the address of the server [Redis] gives a test,
// starting it when needed, for runnable examples, which have no testing.TB.
// The caller keeps its keys under a prefix of its own and removes them.
func RedisAddr() (string, error) {
	if a := os.Getenv(EnvRedis); a != "" {
		if !hostPort(a) {
			return "", fmt.Errorf("testserver: %s=%q is not host:port", EnvRedis, a)
		}
		return a, nil
	}
	p, err := startSharedRedis()
	if err != nil {
		return "", err
	}
	return p.Addr(), nil
}

// PrivateRedis starts a local redis-server for this test alone, stopped
// when the test ends. Its control methods work; it runs without
// persistence (unless an option says otherwise), so a restart empties it,
// unless the test ran SAVE before.
func PrivateRedis(t testing.TB, opts ...RedisOption) *RedisServer {
	t.Helper()
	var cfg redisConfig
	for _, o := range opts {
		o(&cfg)
	}
	begin := time.Now()
	g, err := startRedisEnv(clockEnv(cfg.clock, true, false, false), cfg.args...)
	need(t, err)
	private(t, g)
	logStart(t, "private "+g.procs[0].String(), begin)
	return &RedisServer{Process: g.procs[0], prefix: unique("simba-test-") + ":", dir: g.dir}
}

// redisBinary finds redis-server.
func redisBinary() (string, error) {
	if !localSupported {
		return "", &MissingError{Server: "redis", Package: "redis-server", Env: EnvRedis, Detail: "not a Unix system"}
	}
	p, ok := lookBinary([]string{"redis-server"}, "/usr/bin", "/usr/local/bin", "/opt/homebrew/bin")
	if !ok {
		return "", &MissingError{Server: "redis", Package: "redis-server", Env: EnvRedis, Detail: "redis-server not found"}
	}
	return p, nil
}

// startRedis starts one local redis-server on a free port, with extra
// arguments.
func startRedis(extra ...string) (*group, error) { return startRedisEnv(nil, extra...) }

// startRedisEnv starts one local redis-server on a free port, with env
// added to its environment and extra arguments.
func startRedisEnv(env []string, extra ...string) (*group, error) {
	bin, err := redisBinary()
	if err != nil {
		return nil, err
	}
	dir, err := newWorkDir("redis")
	if err != nil {
		return nil, err
	}
	g := &group{dir: dir}
	err = retryPorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		p := newRedisProcess(bin, dir, port, extra...)
		p.spec.env = env
		g.procs = []*Process{p}
		return p.Start()
	})
	if err != nil {
		_ = g.close()
		return nil, err
	}
	return g, nil
}

// newRedisProcess describes a redis-server in dir on port, with extra
// arguments (for Redis Cluster).
func newRedisProcess(bin, dir string, port int, extra ...string) *Process {
	a := addr(port)
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
	}, extra...)
	return newProcess("redis", a, procSpec{
		path: bin, args: args, dir: dir,
		logPath: filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"),
		uid:     -1, gid: -1,
		ready: func(ctx context.Context) error { return pingRedis(ctx, a) },
	})
}

// pingRedis sends PING over a fresh connection and expects +PONG (a
// loading server answers -LOADING).
func pingRedis(ctx context.Context, a string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", a)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redis %s: PING answered %q", a, strings.TrimSpace(line))
	}
	return nil
}

// deleteRedisKeys removes the keys under prefix from external servers
// (masters of a cluster, or one server), so tests leave nothing behind.
func deleteRedisKeys(t testing.TB, addrs []string, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Unlink(ctx, iter.Val()) // a replica refuses: harmless
		}
		if err := iter.Err(); err != nil {
			t.Logf("testserver: cleaning keys %s* on %s: %v", prefix, a, err)
		}
		_ = c.Close()
	}
}

// RestartFromSnapshot restarts a server from [PrivateRedis] the way a
// Redis with RDB persistence comes back from a crash: it writes a
// snapshot (SAVE), stops without saving again (SHUTDOWN NOSAVE), so that
// every write after the snapshot is lost, and starts again from the
// snapshot. The snapshot is removed once loaded, so a later Restart comes
// back empty again.
func (s *RedisServer) RestartFromSnapshot(ctx context.Context) error {
	return s.RestartFromSnapshotAfter(ctx, 0, nil)
}

// RestartFromSnapshotAfter is RestartFromSnapshot with the server serving
// for during between the snapshot and the stop: what it was written then
// (a grant, say) is lost. beforeStop, when not nil, runs just before the
// stop.
func (s *RedisServer) RestartFromSnapshotAfter(ctx context.Context, during time.Duration, beforeStop func()) error {
	if s.dir == "" {
		return fmt.Errorf("%w: %s: not a PrivateRedis", ErrNotControllable, s.Process)
	}
	err := s.restartWith(syscall.SIGTERM, func() error {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		defer c.Close()
		if err := c.Save(ctx).Err(); err != nil {
			return fmt.Errorf("testserver: %s: SAVE: %w", s.Process, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(during):
		}
		if beforeStop != nil {
			beforeStop()
		}
		_ = c.ShutdownNoSave(ctx).Err() // the connection closes: no reply
		return nil
	})
	_ = os.Remove(filepath.Join(s.dir, "dump.rdb"))
	return err
}

// CrashWithAOF crashes a server from [PrivateRedis] that keeps an
// append-only file: it turns the file on (appendonly yes, appendfsync
// everysec) and waits until it holds the data set, lets the server serve
// for during, kills it with SIGKILL (what the last second's fsync did not
// reach the file is lost, as in a crash) and starts it again from the
// file; then it turns the file off, so that a later Restart comes back
// empty again.
func (s *RedisServer) CrashWithAOF(ctx context.Context, during time.Duration) error {
	return s.CrashWithAOFAfter(ctx, during, nil)
}

// CrashWithAOFAfter is CrashWithAOF with beforeKill, when not nil, run
// just before the kill.
func (s *RedisServer) CrashWithAOFAfter(ctx context.Context, during time.Duration, beforeKill func()) error {
	if s.dir == "" {
		return fmt.Errorf("%w: %s: not a PrivateRedis", ErrNotControllable, s.Process)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		return fmt.Errorf("testserver: %s: %w", s.Process, err)
	}
	if err := c.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		return fmt.Errorf("testserver: %s: %w", s.Process, err)
	}
	for { // until the rewrite that starts the file is done
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("testserver: %s: %w", s.Process, err)
		}
		if strings.Contains(info, "aof_enabled:1") && strings.Contains(info, "aof_rewrite_in_progress:0") &&
			strings.Contains(info, "aof_rewrite_scheduled:0") {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(during):
	}
	if beforeKill != nil {
		beforeKill()
	}
	if err := s.restartWith(syscall.SIGKILL, nil, "--appendonly", "yes", "--appendfsync", "everysec"); err != nil {
		return err
	}
	if err := c.ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
		return fmt.Errorf("testserver: %s: %w", s.Process, err)
	}
	return nil
}
