package sqlstore

import (
	"time"

	"github.com/simba-go/simba/internal/testhooks"
)

// The integration module's tests reach these internals through
// internal/testhooks (see there).
func init() {
	testhooks.SQLMySQLWithoutReturning = func(s any) {
		if e, ok := s.(*Store).eng.(myEngine); ok {
			e.flavor.Store(flavorPlain)
		}
	}
	testhooks.SQLLitePollEvery = func(s any, every time.Duration) {
		if p, ok := s.(*Store).hooks.(*poller); ok {
			p.every = every
		}
	}
	testhooks.SQLBusyRetries = func(s any) int64 { return s.(*Store).busy.Load() }
	testhooks.SQLLitePolls = func(s any) int64 {
		if p, ok := s.(*Store).hooks.(*poller); ok {
			return p.polls.Load()
		}
		return -1
	}
}
