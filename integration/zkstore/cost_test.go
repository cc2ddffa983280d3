package zkstore_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

// TestWaitersCostNothing (issue 19): while a holder keeps a lock, it
// sends no request (renewals are local), the waiters behind the next in
// line send none either (their watches wait), and only the next in line
// polls, one listing per poll, at the owner's ttl + transition.
//
// Not parallel: it counts polls over a few seconds.
func TestWaitersCostNothing(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx := t.Context()
	const name = "cost/waiters"
	const ttl, transition = 2 * time.Second, time.Second
	opts := []lease.Option{lease.WithTTL(ttl), lease.WithTransition(transition)}
	var stores []*zkstore.Store
	var managers []*lease.Manager
	for range 5 {
		s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
		stores, managers = append(stores, s), append(managers, manager(t, s, opts...))
	}
	l, err := managers[0].Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(managers); i++ {
		_ = acquireAsync(ctx, managers[i], name)
		time.Sleep(100 * time.Millisecond) // in this order
	}
	settled(t, stores[2:])
	before := make([]int64, len(stores))
	for i, s := range stores {
		before[i] = trips(s)
	}
	const span = 6 * time.Second
	time.Sleep(span)
	polls := span/(ttl+transition-200*time.Millisecond) + 1
	for i, s := range stores {
		d := trips(s) - before[i]
		switch {
		case i == 0 && d != 0:
			t.Errorf("the holder sent %d requests in %v, want none", d, span)
		case i == 1 && d > int64(polls):
			t.Errorf("the next in line sent %d requests in %v, want at most %d polls of one", d, span, polls)
		case i > 1 && d != 0:
			t.Errorf("waiter %d sent %d requests in %v, want none", i, d, span)
		}
		t.Logf("store %d: %d requests in %v", i, d, span)
	}
	if !l.Held() {
		t.Errorf("the holder lost its lease: %v", l.Err())
	}
	_ = l.Release(ctx)
}
