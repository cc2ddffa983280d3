package zkstore_test

import (
	"context"
	"time"

	"github.com/simba-go/simba/internal/testhooks"
	"github.com/simba-go/simba/zkstore"
)

// The internals these tests use, through internal/testhooks (what
// zkstore's export_test.go exposed when these tests lived beside it).

func trips(s *zkstore.Store) int64 { return testhooks.ZKTrips(s) }

func loseCreateReply(ctx context.Context, s *zkstore.Store, mutex, contender string, ttl, transition time.Duration) error {
	return testhooks.ZKLoseCreateReply(ctx, s, mutex, contender, ttl, transition)
}

func dir(s *zkstore.Store, mutex string) string { return testhooks.ZKDir(s, mutex) }

func escape(name string) string { return testhooks.ZKEscape(name) }

func parseChild(name string) (string, bool) { return testhooks.ZKParseChild(name) }

func offlineSession() (*zkstore.Session, error) {
	s, err := testhooks.ZKOfflineSession()
	if err != nil {
		return nil, err
	}
	return s.(*zkstore.Session), nil
}

func subscribed(s *zkstore.Store, mutex, contender string) bool {
	return testhooks.ZKSubscribed(s, mutex, contender)
}
