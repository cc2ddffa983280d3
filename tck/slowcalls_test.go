package tck_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
	"github.com/simba-go/simba/tck"
)

// slowCalls is memstore behind calls that each take d before they reach
// it, as on a loaded server: correct, only slow.
type slowCalls struct {
	s *memstore.Store
	d time.Duration
}

func (c slowCalls) wait(ctx context.Context) error {
	t := time.NewTimer(c.d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Acquire implements lease.Store.
func (c slowCalls) Acquire(ctx context.Context, name, id string, ttl, tr time.Duration) (lease.Record, error) {
	if err := c.wait(ctx); err != nil {
		return lease.Record{}, err
	}
	return c.s.Acquire(ctx, name, id, ttl, tr)
}

// Renew implements lease.Store.
func (c slowCalls) Renew(ctx context.Context, name, id string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
	if err := c.wait(ctx); err != nil {
		return lease.Record{}, err
	}
	return c.s.Renew(ctx, name, id, token, ttl, tr)
}

// Release implements lease.Store.
func (c slowCalls) Release(ctx context.Context, name, id string, token uint64) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.s.Release(ctx, name, id, token)
}

// Get implements lease.Store.
func (c slowCalls) Get(ctx context.Context, name string) (lease.Record, error) {
	if err := c.wait(ctx); err != nil {
		return lease.Record{}, err
	}
	return c.s.Get(ctx, name)
}

// Watch implements lease.Watcher.
func (c slowCalls) Watch(ctx context.Context, name, id string) (<-chan lease.Event, error) {
	return c.s.Watch(ctx, name, id)
}

// TestSlowCalls runs the suite against a correct store whose every call
// takes ttl/20 (50 ms), in a synctest bubble: a slow store is not judged
// wrong. Thirty Acquires and Gets then take 3 s, past the ttl +
// transition of a grant nobody renews.
func TestSlowCalls(t *testing.T) {
	tck.Run(t, tck.Harness{
		Open:     memBackend(func(s *memstore.Store) lease.Store { return slowCalls{s, 50 * time.Millisecond} }),
		Synctest: true,
		Fair:     true,
	})
}
