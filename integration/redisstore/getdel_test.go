package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// A Store releases a grant its acquire's fast path made by one GETDEL of
// the grant key, which works while the key is a string: a waiter or an
// observer that comes makes it a hash, so the GETDEL fails and the release
// script runs and tells them. These tests pin that conversion.

// fastGrant returns a's grant of name on s from the acquire script's fast
// path: the lock was used before (its record is of this server life), and
// nobody waits for or observes it.
func fastGrant(t *testing.T, s *redisstore.Store, name string) uint64 {
	t.Helper()
	warm := mustHold(t, s, name, "a").Token
	if err := s.Release(bg, name, "a", warm); err != nil {
		t.Fatal(err)
	}
	return mustHold(t, s, name, "a").Token
}

// TestWaiterOfAFastGrantIsWoken: a waiter that comes while a grant of the
// fast path is held is woken by that grant's release, and its turn is
// kept from others.
func TestWaiterOfAFastGrantIsWoken(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithHandoff(time.Minute))
	w := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithHandoff(time.Minute))
	tok := fastGrant(t, s, "f")
	if rec, err := w.Acquire(bg, "f", "b", long, long); err != nil || rec.Held("b") {
		t.Fatalf("b's acquire while a holds: %+v, %v", rec, err)
	}
	woken := watch(t, w, "f", "b")
	if err := s.Release(bg, "f", "a", tok); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, "the waiter", woken, lease.Event{Name: "f"})
	mustLose(t, s, "f", "c")
	if rec, err := w.Acquire(bg, "f", "b", long, long); err != nil || !rec.Held("b") {
		t.Fatalf("b's acquire in its turn: %+v, %v", rec, err)
	}
}

// TestObserverOfAFastGrantHearsTheRelease: an observer that comes while a
// grant of the fast path is held hears its release.
func TestObserverOfAFastGrantHearsTheRelease(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix())
	o := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix())
	tok := fastGrant(t, s, "o")
	obs := watch(t, o, "o", "")
	if err := s.Release(bg, "o", "a", tok); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, "the observer", obs, lease.Event{Name: "o"})
}

// TestHandedOffGrantReleasesInOneRoundTrip: a grant the full acquire
// script made (here a hand-off) is released by the release script at
// once, without a GETDEL first; a grant of the fast path by one GETDEL.
func TestHandedOffGrantReleasesInOneRoundTrip(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	n := &counter{}
	c := dial(t, srv.Addr())
	c.AddHook(n)
	s := newStore(t, c, srv.KeyPrefix(), redisstore.WithHandoff(time.Minute))
	other := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithHandoff(time.Minute))
	tok := mustHold(t, other, "h", "a").Token
	mustLose(t, s, "h", "b")
	if err := other.Release(bg, "h", "a", tok); err != nil {
		t.Fatal(err)
	}
	tok = mustHold(t, s, "h", "b").Token
	n.reset()
	if err := s.Release(bg, "h", "b", tok); err != nil {
		t.Fatal(err)
	}
	if calls, _, trips := n.get(); trips != 1 || calls != 1 {
		t.Errorf("%d round trips, %d scripts to release a handed-off grant, want one script", trips, calls)
	}

	tok = fastGrant(t, s, "g")
	n.reset()
	if err := s.Release(bg, "g", "a", tok); err != nil {
		t.Fatal(err)
	}
	if calls, _, trips := n.get(); trips != 1 || calls != 0 {
		t.Errorf("%d round trips, %d scripts to release a grant of the fast path, want one GETDEL", trips, calls)
	}
	if err := s.Release(bg, "g", "a", tok); err == nil { // the GETDEL found nothing: the script says not held
		t.Error("a second release of the same grant: nil error, want ErrNotHeld")
	}
}

// TestPreviousVersionWaiterOfAFastGrant: during a rolling upgrade, a
// waiter queued by the previous version's script (which leaves the grant
// key a string) is not woken by a GETDEL release, but its next attempt,
// when it polls, gets the lock: the release left the lock free.
func TestPreviousVersionWaiterOfAFastGrant(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithHandoff(time.Minute))
	old := newPreviousStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), time.Minute)
	tok := fastGrant(t, s, "p")
	if owner, _ := old.Acquire(t, "p", "b"); owner != "a" {
		t.Fatalf("previous version's acquire while a holds: owner %q", owner)
	}
	if err := s.Release(bg, "p", "a", tok); err != nil {
		t.Fatal(err)
	}
	if owner, next := old.Acquire(t, "p", "b"); owner != "b" || next <= tok {
		t.Fatalf("previous version's waiter polling after the release: owner %q token %d (after %d)", owner, next, tok)
	}
}

// TestWaiterKeepsTheGrantsExpiry: the conversion of a fast grant's key
// into a hash, when a waiter comes, keeps the key's expiry to the
// millisecond. Giving it back the time left read earlier in the script
// moved it on by the time between the two (the server's clock runs on
// during a script), by a millisecond in a few arrivals in a hundred here,
// and by 4.5 ms on a loaded machine (TCK TakeoverAfterAbandon). 300
// arrivals, each on a fresh fast grant.
func TestWaiterKeepsTheGrantsExpiry(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	w := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix())
	moved := 0
	for i := range 300 {
		name := fmt.Sprint("x", i)
		tok := fastGrant(t, s, name)
		gk := grantKeyOf(t, c, srv.KeyPrefix(), tok)
		before, err := c.PExpireTime(bg, gk).Result()
		if err != nil {
			t.Fatal(err)
		}
		mustLoseFor(t, w, name, "b") // queues b: the grant's key becomes a hash
		after, err := c.PExpireTime(bg, gk).Result()
		if err != nil {
			t.Fatal(err)
		}
		if typ := c.Type(bg, gk).Val(); typ != "hash" {
			t.Fatalf("grant key of %q after a waiter came: type %q, want hash", name, typ)
		}
		if after != before {
			moved++
			if moved <= 3 {
				t.Errorf("grant of %q expired at epoch ms %d before a waiter came, at %d after", name, before.Milliseconds(), after.Milliseconds())
			}
		}
		if err := s.Release(bg, name, "a", tok); err != nil {
			t.Fatal(err)
		}
	}
	if moved > 0 {
		t.Errorf("%d of 300 waiters moved the grant's expiry", moved)
	}
}
