package redisstore_test

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testhooks"
	"github.com/simba-go/simba/redisstore"
)

// The internals these tests use, through internal/testhooks (what
// redisstore's export_test.go and internal_test.go reached when these
// tests lived beside them).

// withHealthCheck sets how long a subscription may stay silent before the
// reader pings it, so tests need not wait 20 s for a black-holed
// subscription to break.
func withHealthCheck(d time.Duration) redisstore.Option {
	return testhooks.RedisWithHealthCheck(d).(redisstore.Option)
}

// pinned returns a connection of c that never dials again once it broke.
func pinned(c *redis.Client) (*redis.Conn, func()) {
	conn, done := testhooks.RedisPinned(c)
	return conn.(*redis.Conn), done
}
