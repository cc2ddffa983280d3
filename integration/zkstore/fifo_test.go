package zkstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

// TestFIFONoHerd: waiters are granted in the order they queued, and a
// release wakes only the next one: a hand-off costs the release's delete
// alone when the next waiter watched the owner itself (the event says its
// node is first now), and one listing more when it watched a node that
// was a waiter then (it lists to find where it stands); the waiters behind
// send none.
func TestFIFONoHerd(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	ctx := t.Context()
	const name = "fifo"
	spy := connect(t, srv.Servers(), tckSession).Conn()
	newManager := func() (*lease.Manager, *zkstore.Store) {
		s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
		return manager(t, s, s.LeaseOptions()...), s
	}
	holder, hs := newManager()
	l, err := holder.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	var stores [n]*zkstore.Store
	var grants [n]<-chan grantAt
	for i := range n {
		var m *lease.Manager
		m, stores[i] = newManager()
		grants[i] = acquireAsync(ctx, m, name)
		for { // queued: its node is there
			names, _, err := spy.Children(dir(hs, name))
			if err != nil {
				t.Fatal(err)
			}
			if len(names) == i+2 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	settled(t, stores[:]) // every waiter has set its watch
	all := append([]*zkstore.Store{hs}, stores[:]...)
	total := func() (sum int64) {
		for _, s := range all {
			sum += trips(s)
		}
		return sum
	}
	for i := range n {
		var before [n]int64
		for j := range n {
			before[j] = trips(stores[j])
		}
		beforeAll := total()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		g := await(t, grants[i], tckSession/2, "the next waiter")
		l = g.l
		time.Sleep(100 * time.Millisecond) // a herd would be on its way by now
		// The delete, and the listing of a waiter that watched a waiter;
		// waiter 0 watched the owner: the delete alone.
		want := int64(2)
		if i == 0 {
			want = 1
		}
		if d := total() - beforeAll; d != want {
			t.Errorf("release %d: the hand-off cost %d requests, want %d", i, d, want)
		}
		for j := i + 1; j < n; j++ {
			if d := trips(stores[j]) - before[j]; d != 0 {
				t.Errorf("release %d: waiter %d sent %d requests, want none: a herd", i, j, d)
			}
		}
		for j := i + 1; j < n; j++ {
			select {
			case g := <-grants[j]:
				t.Fatalf("release %d: waiter %d granted (%v) before waiter %d", i, j, g.err, i+1)
			default:
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = l.Release(rctx)
}

// settled waits until none of stores has sent a request for 300 ms.
func settled(t *testing.T, stores []*zkstore.Store) {
	t.Helper()
	sum := func() (n int64) {
		for _, s := range stores {
			n += trips(s)
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for last, since := sum(), time.Now(); time.Since(since) < 300*time.Millisecond; {
		time.Sleep(20 * time.Millisecond)
		if n := sum(); n != last {
			last, since = n, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiters' stores never went quiet")
		}
	}
}
