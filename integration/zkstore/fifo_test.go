package zkstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

// quietSession is the session timeout of tests that count a waiter's
// requests. A waiter polls (its Acquire lists the queue) once the owner's
// ttl + transition, as the owner's node says, have passed since it
// looked: with tckSession's 5 s + 3 s, a run slowed by a loaded machine
// saw a poll land between a release and the next grant ("listed the
// queue 1 times"). A 40 s session (LeaseOptions 25 s + 15 s) puts the
// polls past any run.
const quietSession = 40 * time.Second

// TestFIFONoHerd: waiters are granted in the order they queued, and a
// release wakes only the next one: a hand-off costs the release's delete
// on its way (the next waiter watched the owner itself, from the start or
// since the owner announced its turn: the event says its node is first
// now); the new owner announces its turn (it writes its node's data
// again), which only the waiter right behind it sees: that one lists the
// queue and watches the new owner; the waiters further back send none.
func TestFIFONoHerd(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	ctx := t.Context()
	const name = "fifo"
	spy := connect(t, srv.Servers(), tckSession).Conn()
	newManager := func() (*lease.Manager, *zkstore.Store) {
		s := newStore(t, connect(t, srv.Servers(), quietSession), srv.Root())
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
		// The delete, the new owner's announcement of its turn, and the
		// listing and the watch on the new owner of the waiter right
		// behind it; the last waiter has none behind it.
		want := int64(4)
		if i == n-1 {
			want = 2
		}
		for end := time.Now().Add(10 * time.Second); total()-beforeAll < want && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // a herd would be on its way by now
		if d := total() - beforeAll; d != want {
			t.Errorf("release %d: the hand-off cost %d requests, want %d", i, d, want)
		}
		for j := i + 1; j < n; j++ {
			mine := int64(0)
			if j == i+1 {
				mine = 2
			}
			if d := trips(stores[j]) - before[j]; d != mine {
				t.Errorf("release %d: waiter %d sent %d requests, want %d (none further back: a herd)", i, j, d, mine)
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

// TestHandoffBehindAWaiterOnlyDeletes (issue 19): with three contenders
// in line (a holder, a waiter next in line, one behind it), the waiter
// next in line announces that its turn came when it does (it rewrites
// its node's data, which fires the watch of the waiter behind it); the
// waiter behind then looks at the queue and watches the new owner while
// the lock is held, so that when the new owner releases, the hand-off
// costs its successor no listing: the delete's event says its turn came.
// Without the announcement it lists the queue after the release.
func TestHandoffBehindAWaiterOnlyDeletes(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const name = "fifo/announce"
	var stores [3]*zkstore.Store
	var ms [3]*lease.Manager
	log := &wireLog{} // the last waiter's
	for i := range stores {
		sess := connect(t, srv.Servers(), quietSession)
		if i == 2 {
			sess = loggedSessionOf(t, srv.Servers(), log, quietSession)
		}
		stores[i] = newStore(t, sess, srv.Root())
		ms[i] = manager(t, stores[i], stores[i].LeaseOptions()...)
	}
	first, err := ms[0].Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// sent waits (10 s at most) until s has sent at least n requests.
	sent := func(s *zkstore.Store, n int64) bool {
		for end := time.Now().Add(10 * time.Second); trips(s) < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				return false
			}
		}
		return true
	}
	leases := [3]chan *lease.Lease{nil, make(chan *lease.Lease, 1), make(chan *lease.Lease, 1)}
	for i := 1; i < 3; i++ {
		go func() {
			l, err := ms[i].Acquire(ctx, name)
			if err != nil {
				t.Error(err)
			}
			leases[i] <- l
		}()
		// Queued and watching: create, list, read and watch what is ahead.
		if !sent(stores[i], int64(2+i)) {
			t.Fatalf("contender %d did not queue", i)
		}
	}
	behind := trips(stores[2])
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-leases[1]
	if second == nil {
		t.FailNow()
	}
	// The waiter behind lists the queue and watches the new owner.
	if !sent(stores[2], behind+2) {
		t.Errorf("the last waiter sent %d requests in 10 s after the waiter ahead of it got the lock, "+
			"want 2 (list, watch the new owner)", trips(stores[2])-behind)
	}
	from := len(log.snapshot())
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	third := <-leases[2]
	if third == nil {
		t.FailNow()
	}
	if f := countFrames(log.snapshot()[from:]); f.requests[wireChildren] != 0 {
		t.Errorf("the last waiter listed the queue %d times from the release ahead of it to its grant, want 0 "+
			"(it watched the owner since the owner's turn came: the delete's event says its turn came)", f.requests[wireChildren])
	}
	_ = third.Release(ctx)
}
