package redisstore

import "time"

// WithHealthCheck sets how long a subscription may stay silent before the
// reader pings it (default healthCheck), so tests need not wait 20 s for a
// black-holed subscription to break.
func WithHealthCheck(d time.Duration) Option {
	return func(c *config) error {
		c.health = d
		return nil
	}
}
