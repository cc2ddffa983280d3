package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/memstore"
)

// TestGetAndWatchCreateNoState (issue 14 item 9, S18): reading or watching
// a lock nobody ever acquired leaves nothing behind.
func TestGetAndWatchCreateNoState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		get(t, s, "never/got")
		ctx, cancel := context.WithCancel(bg)
		if _, err := s.Watch(ctx, "never/watched", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Watch(ctx, "never/waited", "w"); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(bg, "never/released", "w", 0); err == nil {
			t.Fatal("withdrawing from a lock nobody used: no error")
		}
		if _, err := s.Renew(bg, "never/renewed", "w", 1, ttl, tr); err == nil {
			t.Fatal("renewing a lock nobody used: no error")
		}
		cancel()
		synctest.Wait()
		if got := s.Mutexes(); len(got) != 0 {
			t.Errorf("state for %q after only reading, watching and stale calls", got)
		}
	})
}

// TestStateIsBounded (issue 14 item 9, S18): a service that locks one
// name per order id, and reads and watches others, keeps a bounded number
// of lock states: a free, unwatched lock is forgotten after the
// retention, and a name that comes back still gets a greater token.
func TestStateIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const names = 30_000
		s := memstore.New(memstore.WithRetention(time.Second))
		most := 0
		for i := range names {
			name := fmt.Sprintf("orders/%d", i)
			rec := mustHold(t, s, name, "a")
			if err := s.Release(bg, name, "a", rec.Token); err != nil {
				t.Fatal(err)
			}
			get(t, s, fmt.Sprintf("read/%d", i))
			ctx, cancel := context.WithCancel(bg)
			if _, err := s.Watch(ctx, fmt.Sprintf("watched/%d", i), ""); err != nil {
				t.Fatal(err)
			}
			cancel()
			time.Sleep(time.Millisecond) // 1,000 names per second of retention
			if i%1000 == 0 {
				most = max(most, len(s.Mutexes()))
			}
		}
		// At most the names used within about two retentions (the sweep
		// is amortized over the calls).
		if most > 2500 {
			t.Errorf("%d lock states at most over %d names used 1ms apart with a 1s retention", most, names)
		}
		time.Sleep(2 * time.Second)
		get(t, s, "read/again")
		mustHold(t, s, "orders/last", "a")
		if got := len(s.Mutexes()); got > 2 {
			t.Errorf("%d lock states after every name went quiet, want at most 2", got)
		}
		// orders/0 was forgotten long ago; its next token is still greater.
		if rec := mustHold(t, s, "orders/0", "b"); rec.Token <= 1 {
			t.Errorf("orders/0 came back with token %d, not greater than its earlier 1", rec.Token)
		}
	})
}

// TestForgottenMutexKeepsTokensIncreasing: a name used, forgotten after
// the retention and used again gets a token greater than all its earlier
// ones, and Inspect reports a Counter its next grant exceeds.
func TestForgottenMutexKeepsTokensIncreasing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.WithRetention(time.Minute))
		var last uint64
		for range 3 {
			rec := mustHold(t, s, mx, "a")
			last = rec.Token
			if err := s.Release(bg, mx, "a", rec.Token); err != nil {
				t.Fatal(err)
			}
		}
		mustHold(t, s, "other", "a") // other's counter: 1
		time.Sleep(2 * time.Minute)
		get(t, s, "x") // a call that lets the store sweep
		mustHold(t, s, "another", "a")
		if got := s.Mutexes(); len(got) != 1 || got[0] != "another" {
			t.Fatalf("Locks() = %q after 2 minutes, want only the lock used since", got)
		}
		if c := s.Inspect(mx).Counter; c < last {
			t.Errorf("Inspect of a forgotten lock: Counter %d, below its last token %d", c, last)
		}
		if rec := mustHold(t, s, mx, "b"); rec.Token <= last {
			t.Errorf("token %d after the lock was forgotten, not greater than its last %d", rec.Token, last)
		}
	})
}
