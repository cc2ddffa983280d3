package sqlstore

import "github.com/simba-go/simba/internal/testhooks"

// The integration module's tests reach these internals through
// internal/testhooks (see there).
func init() {
	testhooks.SQLMySQLWithoutReturning = func(s any) {
		if e, ok := s.(*Store).eng.(myEngine); ok {
			e.flavor.Store(flavorPlain)
		}
	}
}
