package zkstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/tck"
)

// TestHungHolder (I3, I5, S1): the holder's Manager hangs in its store
// calls (every call blocks before it reaches the Store) while its process,
// its session and the session's heartbeats live on. Renewals send nothing
// to ZooKeeper, so only the Store's watchdog can end the grant: it deletes
// the node once ttl + transition passed without a renewal. The holder's
// own deadline passed before the waiter's winning Acquire was sent, and
// the takeover comes long before the 8 s session could expire.
func TestHungHolder(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	hung, part := tck.Cuttable(newStore(t, connect(t, srv.Servers(), tckSession), srv.Root()))
	ws := observe(newStore(t, connect(t, srv.Servers(), tckSession), srv.Root()))
	opts := []lease.Option{lease.WithTTL(tckTTL), lease.WithTransition(tckTransition)}
	hm, wm := manager(t, hung, opts...), manager(t, ws, opts...)
	t.Cleanup(part.Heal) // before the Managers close
	ctx := t.Context()
	const name = "s1/hung"

	l1, err := hm.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(ctx, wm, name)
	time.Sleep(200 * time.Millisecond)
	cut := time.Now()
	part.Cut()

	g := await(t, waiter, 4*tckSession, "takeover from a hung holder")
	if !closed(l1.Done()) {
		t.Fatalf("the waiter was granted %v after the hang while the hung holder's lease is live: two holders", g.at.Sub(cut))
	}
	if sent := ws.sentAt(g.l.Token()); !l1.Deadline().Before(sent) {
		t.Errorf("the hung holder's deadline %v after the hang, the winning Acquire was sent %v after it: the holder must be told first",
			l1.Deadline().Sub(cut), sent.Sub(cut))
	}
	t.Logf("hung holder told %v after the hang, takeover %v after it", l1.Deadline().Sub(cut), g.at.Sub(cut))
	if took := g.at.Sub(cut); took >= tckSession {
		t.Errorf("takeover %v after the hang: not the watchdog (ttl + transition = %v) but the session's expiry", took, tckTTL+tckTransition)
	}
	if g.l.Token() <= l1.Token() {
		t.Errorf("token %d after %d", g.l.Token(), l1.Token())
	}
	part.Heal() // the hung renewals land late: they must change nothing
	time.Sleep(tckTTL)
	if !g.l.Held() || g.l.Err() != nil {
		t.Errorf("after the hung holder woke: new lease Held() = %v, Err() = %v", g.l.Held(), g.l.Err())
	}
	if err := l1.Release(ctx); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Release of the hung holder's lease: %v, want ErrLost", err)
	}
	_ = g.l.Release(ctx)
}

// TestStalledWaiterSkipped (I5, S17): the waiter next in line hangs in
// its store calls when its turn comes. Its Watch subscription sees the
// turn and starts a hand-off window of its ttl + transition; when no
// Acquire comes in that window, the watchdog withdraws its node and the
// waiter behind it gets the lock: long before the stalled waiter would
// have come back (its poll, after the holder's 16 s ttl + transition).
func TestStalledWaiterSkipped(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	slow := []lease.Option{lease.WithTTL(10 * time.Second), lease.WithTransition(6 * time.Second)}
	fast := []lease.Option{lease.WithTTL(tckTTL), lease.WithTransition(tckTransition)}
	hs := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	hm := manager(t, hs, slow...)
	ss := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	stalled, part := tck.Cuttable(ss)
	sm := manager(t, stalled, fast...)
	t.Cleanup(part.Heal)
	nm := manager(t, newStore(t, connect(t, srv.Servers(), tckSession), srv.Root()), fast...)
	ctx := t.Context()
	const name = "s17/stalled"

	l, err := hm.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	spy := connect(t, srv.Servers(), tckSession).Conn()
	queued := func(n int) { // n nodes in the queue, in the order they came
		deadline := time.Now().Add(10 * time.Second)
		for {
			names, _, err := spy.Children(dir(hs, name))
			if err == nil && len(names) == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the queue has %v, want %d nodes", names, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	stalledGrant := acquireAsync(sctx, sm, name)
	queued(2)
	for !subscribed(ss, name, sm.ID()) { // its turn will be seen
		time.Sleep(5 * time.Millisecond)
	}
	next := acquireAsync(ctx, nm, name)
	queued(3)
	part.Cut()
	released := time.Now()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g := await(t, next, 4*tckSession, "the waiter behind the stalled one")
	t.Logf("the waiter behind the stalled one got the lock %v after the release", g.at.Sub(released))
	if took := g.at.Sub(released); took >= 8*time.Second {
		t.Errorf("took %v: the stalled waiter's hand-off window (%v) was not kept", took, tckTTL+tckTransition)
	}
	select {
	case s := <-stalledGrant:
		t.Errorf("the stalled waiter was granted (%v)", s.err)
	default:
	}
	_ = g.l.Release(ctx)
}
