package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// deafStore can push in principle (it implements lease.Watcher) but every
// Watch fails, as a store with push off, a driver without LISTEN or a pool
// too small for a doorbell does; it counts Acquire calls.
type deafStore struct {
	*memstore.Store
	acquires atomic.Int64
}

func (s *deafStore) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	if s.acquires.Add(1) > 1000 { // spinning: end it (in a bubble it never would)
		return lease.Record{}, fmt.Errorf("deafStore: 1000 acquires: %w", lease.ErrStoreSetup)
	}
	return s.Store.Acquire(ctx, name, contender, ttl, transition)
}

func (s *deafStore) Watch(context.Context, string, string) (<-chan lease.Event, error) {
	return nil, errors.New("test: no push")
}

// TestWaiterPollsWhenWatchFails: a waiter whose store refuses every Watch
// polls at the owner's transition end, as without a Watcher; it never
// re-attempts at once in a loop (it did: a lost attempt with no
// subscription meant "subscribe and try again at once", and the failed
// subscription left it unsubscribed, every time).
func TestWaiterPollsWhenWatchFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &deafStore{Store: memstore.New()}
		holder := newMgr(t, st, "holder")
		if _, err := holder.Acquire(bg, "job"); err != nil {
			t.Fatal(err)
		}
		waiter := newMgr(t, st, "waiter")
		ctx, cancel := context.WithTimeout(bg, 3*tTTL)
		defer cancel()
		st.acquires.Store(0)
		if _, err := waiter.Acquire(ctx, "job"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("Acquire of a held lock: %v, want ErrNotAcquired when ctx ends", err)
		}
		// The holder renews every ttl/3 and the waiter polls at each
		// transition end it is told: a handful of attempts over 3 ttl.
		if n := st.acquires.Load(); n > 20 {
			t.Errorf("the waiter made %d Acquire calls in 3 ttl with Watch failing: it spins", n)
		}
	})
}
