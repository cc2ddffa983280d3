package testserver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/testserver"
)

func TestRedisShared(t *testing.T) {
	t.Parallel()
	a, b := testserver.Redis(t), testserver.Redis(t)
	if a.Addr() != b.Addr() {
		t.Errorf("shared servers differ: %s, %s", a.Addr(), b.Addr())
	}
	if a.KeyPrefix() == b.KeyPrefix() || strings.Contains(a.KeyPrefix(), "{") {
		t.Errorf("prefixes %q, %q: want distinct, without hash tag", a.KeyPrefix(), b.KeyPrefix())
	}
	if !strings.HasPrefix(a.Addr(), "127.0.0.1:") {
		t.Errorf("addr %s is not on 127.0.0.1", a.Addr())
	}
	c := redisClient(t, a.Addr())
	ctx := ctxTimeout(t, 5*time.Second)
	key := a.KeyPrefix() + "k"
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET %s = %q, %v", key, v, err)
	}
	notControllable(t, a.Process)
}

// TestPrivateRedisReplica: a replica syncs from its primary, is promoted
// and takes writes, and the old primary becomes its replica.
func TestPrivateRedisReplica(t *testing.T) {
	t.Parallel()
	a := testserver.PrivateRedis(t, testserver.RedisReplication())
	b := testserver.PrivateRedis(t, testserver.RedisReplication())
	ctx := ctxTimeout(t, 30*time.Second)
	ca, cb := redisClient(t, a.Addr()), redisClient(t, b.Addr())
	key := a.KeyPrefix() + "k"
	if err := ca.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.ReplicaOf(ctx, a.Addr()); err != nil {
		t.Fatal(err)
	}
	if v, err := cb.Get(ctx, key).Result(); err != nil || v != "before" {
		t.Fatalf("replica's GET after the sync = %q, %v", v, err)
	}
	if err := cb.Set(ctx, key, "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("SET on the replica: %v, want READONLY", err)
	}
	if err := b.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cb.Set(ctx, key, "after", 0).Err(); err != nil {
		t.Fatalf("SET on the promoted replica: %v", err)
	}
	if err := a.ReplicaOf(ctx, b.Addr()); err != nil {
		t.Fatal(err)
	}
	if v, err := ca.Get(ctx, key).Result(); err != nil || v != "after" {
		t.Fatalf("the old primary's GET after it synced from the new one = %q, %v", v, err)
	}
	if err := a.ReplicaOf(ctx, "nowhere"); err == nil {
		t.Fatal("ReplicaOf an address without a port: no error")
	}
}

func TestPrivateRedisFaults(t *testing.T) {
	t.Parallel()
	srv := testserver.PrivateRedis(t)
	c := redisClient(t, srv.Addr())
	ctx := ctxTimeout(t, 30*time.Second)
	key := srv.KeyPrefix() + "k"
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	addr := srv.Addr()
	timed(t, "redis restart", srv.Restart)
	if srv.Addr() != addr {
		t.Fatalf("address changed on restart: %s -> %s", addr, srv.Addr())
	}
	// No persistence: the restarted server is empty (scenario S3).
	eventually(t, 60*time.Second, "GET after restart", func() error {
		err := c.Get(ctx, key).Err()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return errors.Join(errors.New("want redis.Nil"), err)
	})

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered by a paused server")
	}
	if took := time.Since(begin); took < short/2 {
		t.Fatalf("PING failed after %v, before its timeout: not a pause", took)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "PING after resume", func() error { return c.Ping(ctx).Err() })

	timed(t, "redis stop", srv.Stop)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered by a stopped server")
	}
	if err := srv.Pause(); !errors.Is(err, testserver.ErrNotRunning) {
		t.Fatalf("Pause of a stopped server: %v", err)
	}
	timed(t, "redis start", srv.Start)
	eventually(t, 60*time.Second, "PING after start", func() error { return c.Ping(ctx).Err() })

	timed(t, "redis kill", srv.Kill)
	timed(t, "redis start after kill", srv.Start)
	eventually(t, 60*time.Second, "PING after kill and start", func() error { return c.Ping(ctx).Err() })
}

// TestPrivateRedisPersistence: a private server comes back from a SAVE's
// snapshot after a restart, and with RedisAOF from its append-only file
// after a kill.
func TestPrivateRedisPersistence(t *testing.T) {
	t.Parallel()
	for _, aof := range []bool{false, true} {
		var opts []testserver.RedisOption
		if aof {
			opts = append(opts, testserver.RedisAOF())
		}
		srv := testserver.PrivateRedis(t, opts...)
		if srv.Dir() == "" {
			t.Fatal("a private server without a directory")
		}
		c := redisClient(t, srv.Addr())
		ctx := ctxTimeout(t, 30*time.Second)
		key := srv.KeyPrefix() + "k"
		if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if aof {
			eventually(t, 60*time.Second, "the AOF written", func() error {
				info, err := c.Info(ctx, "persistence").Result()
				if err != nil || !strings.Contains(info, "aof_buffer_length:0") {
					return errors.Join(errors.New("AOF buffer not empty"), err)
				}
				return nil
			})
			timed(t, "redis kill", srv.Kill)
			timed(t, "redis start", srv.Start)
		} else {
			if err := c.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			timed(t, "redis restart", srv.Restart)
		}
		eventually(t, 60*time.Second, "GET after restart", func() error {
			v, err := c.Get(ctx, key).Result()
			if err == nil && v != "v" {
				err = errors.New("value " + v)
			}
			return err
		})
	}
}

// TestRedisPersistenceRestarts: a restart from a snapshot and a crash with
// an append-only file come back with the data (in a new server life: a new
// run_id), and a plain Restart afterwards comes back empty.
func TestRedisPersistenceRestarts(t *testing.T) {
	t.Parallel()
	srv := testserver.PrivateRedis(t)
	c := redisClient(t, srv.Addr())
	ctx := ctxTimeout(t, time.Minute)
	runID := func() string {
		t.Helper()
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(info, "run_id:")
		id, _, _ := strings.Cut(rest, "\r\n")
		return id
	}
	for _, r := range []struct {
		name    string
		restart func() error
	}{
		{"snapshot", func() error { return srv.RestartFromSnapshot(ctx) }},
		{"aof", func() error { return srv.CrashWithAOF(ctx, 1500*time.Millisecond) }},
	} {
		key := srv.KeyPrefix() + r.name
		if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		before := runID()
		if err := r.restart(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if runID() == before {
			t.Errorf("%s: the server did not restart", r.name)
		}
		if got, err := c.Get(ctx, key).Result(); err != nil || got != "v" {
			t.Errorf("%s: after the restart GET = %q, %v; want the value kept", r.name, got, err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
			t.Errorf("%s: a plain restart afterwards kept %d keys (%v); want none", r.name, n, err)
		}
	}
}
