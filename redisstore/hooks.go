package redisstore

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/internal/testhooks"
)

// The integration module's tests reach these internals through
// internal/testhooks (see there).
func init() {
	testhooks.RedisWithHealthCheck = func(d time.Duration) any {
		return Option(func(c *config) error {
			c.health = d
			return nil
		})
	}
	testhooks.RedisPinned = func(c any) (any, func()) { return pinned(c.(*redis.Client)) }
}
