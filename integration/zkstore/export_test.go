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

func loseCreateReply(ctx context.Context, s *zkstore.Store, name, contender string, ttl, transition time.Duration) error {
	return testhooks.ZKLoseCreateReply(ctx, s, name, contender, ttl, transition)
}

func dir(s *zkstore.Store, name string) string { return testhooks.ZKDir(s, name) }

func escape(name string) string { return testhooks.ZKEscape(name) }

func parseChild(name string) (string, bool) { return testhooks.ZKParseChild(name) }

func offlineSession() (*zkstore.Session, error) {
	s, err := testhooks.ZKOfflineSession()
	if err != nil {
		return nil, err
	}
	return s.(*zkstore.Session), nil
}

func subscribed(s *zkstore.Store, name, contender string) bool {
	return testhooks.ZKSubscribed(s, name, contender)
}

func afterQueueRead(s *zkstore.Store, f func()) { testhooks.ZKAfterQueueRead(s, f) }

func holdWatchdog(s *zkstore.Store) (release func()) { return testhooks.ZKHoldWatchdog(s) }

func holdRetire(s *zkstore.Store) (release func()) { return testhooks.ZKHoldRetire(s) }

func createAdopt(s *zkstore.Store, f func(adopt func())) { testhooks.ZKCreateAdopt(s, f) }

func beforeRequest(s *zkstore.Store, f func(start func() bool)) { testhooks.ZKBeforeRequest(s, f) }
