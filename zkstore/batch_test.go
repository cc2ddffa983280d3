package zkstore_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/lease"
)

// TestBatchRenew: a Manager holding eight mutexes renews them together,
// one multi request per round instead of eight requests, and keeps them.
func TestBatchRenew(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), tckSession, srv.Root())
	const ttl = 600 * time.Millisecond // a renewal round about every 200 ms
	m := manager(t, s, lease.WithTTL(ttl), lease.WithTransition(ttl/2))
	ctx := t.Context()
	const n = 8
	var held []*lease.Lease
	for i := range n {
		l, err := m.Acquire(ctx, "batch/"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	before := s.Trips()
	const span = 2 * time.Second
	time.Sleep(span)
	trips := s.Trips() - before
	rounds := int64(span / (ttl / 3))
	t.Logf("%d requests in %v for %d leases (%d renewal rounds)", trips, span, n, rounds)
	if trips > n*rounds/2 {
		t.Errorf("%d requests in %v: renewals of %d leases are not batched (%d each would be %d)", trips, span, n, rounds, n*rounds)
	}
	for _, l := range held {
		if !l.Held() {
			t.Errorf("lease %s lost: %v", l.Name(), l.Err())
		}
		_ = l.Release(ctx)
	}
}
