package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// TestReleaseHandsOffInQueueOrder: a release holds the lock for the
// longest waiter; a later arrival is told to wait out the window.
func TestReleaseHandsOffInQueueOrder(t *testing.T) {
	t.Parallel()
	s := shared(t, redisstore.WithHandoff(time.Minute)) // capped at the waiter's span
	tok := mustHold(t, s, "q", "a").Token
	mustLose(t, s, "q", "b")
	mustLose(t, s, "q", "c")
	mustLose(t, s, "q", "b") // a refresh keeps b's place
	if err := s.Release(bg, "q", "a", tok); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(bg, "q")
	if err != nil || rec.OwnerID != "" || rec.Transition <= 0 || rec.Transition > ttl+tr {
		t.Fatalf("Get after release = %+v, %v; want free, held back for at most b's span", rec, err)
	}
	if rec := mustLose(t, s, "q", "c"); rec.OwnerID != "" || rec.Transition <= 0 {
		t.Fatalf("c during b's window: %+v, want an empty owner and a wait", rec)
	}
	b := mustHold(t, s, "q", "b")
	if b.Token <= tok {
		t.Fatalf("b's token %d after %d", b.Token, tok)
	}
	if err := s.Release(bg, "q", "b", b.Token); err != nil {
		t.Fatal(err)
	}
	mustLose(t, s, "q", "d") // not the head: c is
	mustHold(t, s, "q", "c")
}

// TestCrashedWaiterExpires: a waiter that stops asking leaves the queue
// after 2 × (ttl + transition) and is not handed the lock.
func TestCrashedWaiterExpires(t *testing.T) {
	t.Parallel()
	s := shared(t, redisstore.WithHandoff(time.Minute))
	rec, err := s.Renew(bg, "x", "a", mustHold(t, s, "x", "a").Token, time.Minute, tr)
	if err != nil {
		t.Fatal(err)
	}
	mustLose(t, s, "x", "crashed")
	for end := time.Now().Add(2*(ttl+tr) + 100*time.Millisecond); time.Now().Before(end); {
		mustLose(t, s, "x", "c") // a live waiter keeps asking, and the queue alive
		time.Sleep(ttl / 2)
	}
	if err := s.Release(bg, "x", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	mustLose(t, s, "x", "d")
	mustHold(t, s, "x", "c")
}

// TestNoShowPassesTheTurn: a head that does not come within its window
// leaves the queue; the next waiter is woken and may take the lock.
func TestNoShowPassesTheTurn(t *testing.T) {
	t.Parallel()
	s := shared(t, redisstore.WithHandoff(100*time.Millisecond))
	tok := mustHold(t, s, "n", "a").Token
	mustLose(t, s, "n", "noshow")
	mustLose(t, s, "n", "c")
	c := watch(t, s, "n", "c")
	if err := s.Release(bg, "n", "a", tok); err != nil {
		t.Fatal(err)
	}
	wantNoEvent(t, "c during noshow's window", c)
	time.Sleep(100 * time.Millisecond)
	mustLose(t, s, "n", "d") // notices the lapse: c's turn, c is woken
	wantEvent(t, "c after the lapse", c, lease.Event{Name: "n"})
	mustHold(t, s, "n", "c")
	if rec := mustLose(t, s, "n", "noshow"); rec.OwnerID != "c" {
		t.Fatalf("noshow came back to %+v", rec)
	}
}

// TestReleaseWithdraws: Release with token 0, or by a non-holder, only
// removes the caller's queue entry and reports ErrNotHeld.
func TestReleaseWithdraws(t *testing.T) {
	t.Parallel()
	s := shared(t, redisstore.WithHandoff(time.Minute))
	tok := mustHold(t, s, "w", "a").Token
	mustLose(t, s, "w", "b")
	mustLose(t, s, "w", "c")
	for _, who := range []struct {
		c   string
		tok uint64
	}{{"b", 0}, {"a", 0}, {"c", tok}} {
		if err := s.Release(bg, "w", who.c, who.tok); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Release(%s, %d) = %v, want ErrNotHeld", who.c, who.tok, err)
		}
	}
	if rec, err := s.Get(bg, "w"); err != nil || rec.OwnerID != "a" || rec.Token != tok {
		t.Fatalf("withdrawals disturbed the owner: %+v, %v", rec, err)
	}
	if err := s.Release(bg, "w", "a", tok); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Get(bg, "w"); err != nil || rec != (lease.Record{}) {
		t.Fatalf("after the release with nobody queued: %+v, %v; want free, nothing held back", rec, err)
	}
	if err := s.Release(bg, "w", "a", tok); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("second release = %v, want ErrNotHeld", err)
	}
}

// TestRenewNeverReacquires: renewals keep the token; a renewal after the
// transition, or with another token, is refused and changes nothing.
func TestRenewNeverReacquires(t *testing.T) {
	t.Parallel()
	s := shared(t)
	tok := mustHold(t, s, "r", "a").Token
	rec, err := s.Renew(bg, "r", "a", tok, 2*ttl, tr)
	if err != nil || rec.Token != tok || rec.TTL != 2*ttl || rec.Transition != 2*ttl+tr {
		t.Fatalf("Renew = %+v, %v", rec, err)
	}
	if _, err := s.Renew(bg, "r", "a", tok+1, ttl, tr); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Renew with another token: %v", err)
	}
	rec, err = s.Renew(bg, "r", "b", tok, ttl, tr)
	if !errors.Is(err, lease.ErrNotHeld) || rec.OwnerID != "a" || rec.Token != tok {
		t.Fatalf("Renew by b = %+v, %v; want ErrNotHeld and a's record", rec, err)
	}
	time.Sleep(2*ttl + tr + 20*time.Millisecond)
	if _, err := s.Renew(bg, "r", "a", tok, ttl, tr); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("late Renew: %v", err)
	}
	if rec, err := s.Get(bg, "r"); err != nil || rec.OwnerID != "" {
		t.Fatalf("late Renew re-acquired: %+v, %v", rec, err)
	}
}
