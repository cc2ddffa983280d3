package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/redisstore"
)

// redisTTL is the expiry of the peers' locks, redsync's default; they are
// extended every redisTTL/2 while held.
const redisTTL = 8 * time.Second

// redisTargets returns simba, redsync and bsm/redislock on s.Redis, each
// client with a go-redis client (and connections) of its own, and the
// Redis floor (see floor.go); none when s has no Redis.
func redisTargets(s Servers) []Target {
	if s.Redis == "" {
		return nil
	}
	prefix := s.KeyPrefix + ":"
	ops := redisOps(s.Redis)
	var simba, rs, rl trips
	return []Target{{
		Lib: "simba", Backend: "Redis", Settings: simbaSettings, Ops: ops, Trips: simba.load, Takeover: simbaTTL + simbaTransition,
		Open: func(context.Context) (Client, error) {
			rdb := simba.client(s.Redis)
			store, err := redisstore.New(rdb, redisstore.WithKeyPrefix(prefix+"simba:"))
			if err != nil {
				return nil, errors.Join(err, rdb.Close())
			}
			return newSimbaClient(store, store.Close, rdb.Close)
		},
	}, {
		Lib: "redsync", Backend: "Redis", Ops: ops, Trips: rs.load, Takeover: redisTTL,
		Settings: fmt.Sprintf("defaults: expiry %v, 32 tries 50–250 ms apart (Lock retries them until ctx ends), Extend every %v", redisTTL, redisTTL/2),
		Open: func(context.Context) (Client, error) {
			rdb := rs.client(s.Redis)
			return &redsyncClient{rdb: rdb, rs: redsync.New(goredis.NewPool(rdb)), prefix: prefix + "redsync:"}, nil
		},
	}, {
		Lib: "redislock", Backend: "Redis", Ops: ops, Trips: rl.load, Takeover: redisTTL,
		Settings: fmt.Sprintf("ttl %v, LinearBackoff(100 ms) as documented, Refresh every %v", redisTTL, redisTTL/2),
		Open: func(context.Context) (Client, error) {
			rdb := rl.client(s.Redis)
			return &redislockClient{rdb: rdb, c: redislock.New(rdb), prefix: prefix + "redislock:"}, nil
		},
	}, redisFloorTarget(s.Redis, prefix, ops)}
}

// trips counts the requests of one target's go-redis clients.
type trips struct{ n atomic.Int64 }

// client returns a go-redis client on addr whose requests t counts.
func (t *trips) client(addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	rdb.AddHook(t)
	return rdb
}

func (t *trips) load() int64 { return t.n.Load() }

// DialHook implements redis.Hook.
func (t *trips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook: one command, one request.
func (t *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook: one pipeline, one request.
func (t *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t.n.Add(1)
		return next(ctx, cmds)
	}
}

// redisOps counts the commands Redis processed (INFO total_commands_processed),
// less INFO, HELLO and CLIENT: the runner's own counting and connection
// set-up. Each call uses a connection of its own.
func redisOps(addr string) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		info, err := rdb.Info(ctx, "stats", "commandstats").Result()
		if err != nil {
			return 0, err
		}
		var total int64
		found := false
		for line := range strings.Lines(info) {
			line = strings.TrimSpace(line)
			if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, err
				}
				total += n
				found = true
			}
			for _, cmd := range []string{"info", "hello", "client|setinfo", "client|setname"} {
				if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
					v, _, _ = strings.Cut(v, ",")
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						return 0, err
					}
					total -= n
				}
			}
		}
		if !found {
			return 0, errors.New("INFO has no total_commands_processed")
		}
		return total, nil
	}
}

// redisVersion asks the server for its version.
func redisVersion(ctx context.Context, addr string) string {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

type redsyncClient struct {
	rdb    *redis.Client
	rs     *redsync.Redsync
	prefix string
}

// Lock implements Client: LockContext with redsync's defaults, again after
// its tries run out, until ctx ends; errors talking to Redis end it.
func (c *redsyncClient) Lock(ctx context.Context, key string) (Lock, error) {
	m := c.rs.NewMutex(c.prefix + key)
	for {
		err := m.LockContext(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if re := (*redsync.RedisError)(nil); errors.As(err, &re) {
			return nil, err
		}
	}
	return keepAlive(redisTTL/2, func(ctx context.Context) error {
		_, err := m.ExtendContext(ctx)
		return err
	}, func(ctx context.Context) error {
		_, err := m.UnlockContext(ctx)
		return err
	}), nil
}

// Close implements Client.
func (c *redsyncClient) Close() error { return c.rdb.Close() }

type redislockClient struct {
	rdb    *redis.Client
	c      *redislock.Client
	prefix string
}

// Lock implements Client: Obtain with the documented LinearBackoff(100 ms)
// retry under ctx.
func (c *redislockClient) Lock(ctx context.Context, key string) (Lock, error) {
	for {
		// Obtain retries until ctx's deadline; without one it gives up
		// after the ttl, and this loop asks again.
		l, err := c.c.Obtain(ctx, c.prefix+key, redisTTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})
		if err == nil {
			return keepAlive(redisTTL/2, func(ctx context.Context) error {
				return l.Refresh(ctx, redisTTL, nil)
			}, l.Release), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, redislock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
	}
}

// Close implements Client.
func (c *redislockClient) Close() error { return c.rdb.Close() }

// keepAlive returns a Lock that calls extend every period until Unlock,
// which stops it and then calls release: the documented way to keep a
// redsync or redislock lock while work runs.
func keepAlive(period time.Duration, extend, release func(ctx context.Context) error) Lock {
	k := &kept{release: release, stop: make(chan struct{})}
	k.wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-k.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), period)
				_ = extend(ctx) // a failed extension shows as a lost lock at Unlock
				cancel()
			}
		}
	})
	return k
}

type kept struct {
	release func(ctx context.Context) error
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// Unlock implements Lock.
func (k *kept) Unlock(ctx context.Context) error {
	k.once.Do(func() { close(k.stop) })
	k.wg.Wait()
	return k.release(ctx)
}
