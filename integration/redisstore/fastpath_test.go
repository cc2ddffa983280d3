package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// The acquire and release scripts take a fast path for a lock nobody
// waits for or observes (acquirefast.lua, releasefast.lua). These tests
// pin what that path must leave to the full scripts: a lock that is
// observed, or whose queue may hold waiters, after the record was written
// by a grant of this server life (the only records the fast path reads).

// TestFastPathLeavesObservedMutexes: an observer hears every grant and
// release of a lock, also after the first grant and release made its
// record one the fast path could read.
func TestFastPathLeavesObservedMutexes(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix())
	obs := watch(t, s, "o", "")
	for i := range 3 {
		tok := mustHold(t, s, "o", "a").Token
		wantEvent(t, fmt.Sprint("grant ", i+1), obs, lease.Event{Name: "o", OwnerID: "a", Token: tok})
		if err := s.Release(bg, "o", "a", tok); err != nil {
			t.Fatal(err)
		}
		wantEvent(t, fmt.Sprint("release ", i+1), obs, lease.Event{Name: "o"})
	}
}

// TestFastPathLeavesQueuedMutexes: a waiter stays queued while a
// contender takes the lock after the previous grant lapsed (no hand-off
// reserved it), and that contender's release reserves the lock for the
// waiter: a third contender is refused.
func TestFastPathLeavesQueuedMutexes(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithHandoff(time.Minute))
	const long = 20 * time.Second
	mustHold(t, s, "q", "a")
	if rec, err := s.Acquire(bg, "q", "b", long, long); err != nil || rec.Held("b") {
		t.Fatalf("b's Acquire while a holds: %+v, %v", rec, err)
	}
	for { // a's grant lapses (ttl + transition): no reservation follows
		rec, err := s.Get(bg, "q")
		if err != nil {
			t.Fatal(err)
		}
		if rec.OwnerID == "" {
			break
		}
		time.Sleep(ttl / 10)
	}
	tok := mustHold(t, s, "q", "c").Token
	if err := s.Release(bg, "q", "c", tok); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Acquire(bg, "q", "d", ttl, tr); err != nil || rec.Held("d") {
		t.Fatalf("d's Acquire while the lock is reserved for the waiter b: %+v, %v", rec, err)
	}
	if rec, err := s.Acquire(bg, "q", "b", long, long); err != nil || !rec.Held("b") {
		t.Fatalf("b's Acquire in its turn: %+v, %v", rec, err)
	}
}
