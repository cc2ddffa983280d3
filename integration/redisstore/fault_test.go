package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// Manager timings of the fault tests.
const (
	mTTL = time.Second
	mTr  = 500 * time.Millisecond
	// takeover is the I5 bound: ttl + transition + the largest jitter
	// (1 s) + one more poll (ttl), with the store's latency.
	takeover = 2*mTTL + mTr + time.Second
)

// manager returns a Manager on s, closed when the test ends.
func manager(t testing.TB, s lease.Store) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(s, lease.WithTTL(mTTL), lease.WithTransition(mTr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}

// TestWatchClosesWhenSubscriptionBreaks: a killed subscription connection
// closes every Watch channel it carried, and a new Watch subscribes again.
func TestWatchClosesWhenSubscriptionBreaks(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	a, b := watch(t, s, "k", ""), watch(t, s, "k2", "w")
	if err := c.Do(bg, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan lease.Event{a, b} {
		select {
		case ev, ok := <-ch:
			if ok {
				t.Fatalf("event %+v, want the channel closed", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("channel still open after its subscription was killed")
		}
	}
	obs := watch(t, s, "k", "")
	tok := mustHold(t, s, "k", "a").Token
	wantEvent(t, "after a new Watch", obs, lease.Event{Name: "k", OwnerID: "a", Token: tok})
}

// TestSubscriberKilledWaiterStillAcquires: with the waiter's subscription
// killed mid-wait, a release still reaches it within the I5 bound, and
// once it polled (and watched again) a release wakes it at once.
func TestSubscriberKilledWaiterStillAcquires(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	holder := manager(t, newStore(t, dialNamed(t, srv.Addr(), "holder"), srv.KeyPrefix()))
	waiter := manager(t, newStore(t, dialNamed(t, srv.Addr(), "waiter"), srv.KeyPrefix()))
	l, err := holder.Acquire(bg, "job")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 1)
	go func() {
		wl, err := waiter.Acquire(bg, "job")
		if err != nil {
			t.Error(err)
		}
		got <- wl
	}()
	waitFor(t, "the waiter's subscription", func() bool { return pubsubConnsOf(t, c, "waiter") == 1 })
	if err := c.Do(bg, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
	var wl *lease.Lease
	select {
	case wl = <-got:
	case <-time.After(takeover):
		t.Fatalf("waiter not granted within the I5 bound %v", takeover)
	}
	t.Logf("granted %v after the release, without the wake-up", time.Since(start))

	// The roles swap: the waiter holds, the holder waits; after the old
	// subscription broke, the new one wakes the next waiter promptly.
	go func() {
		hl, err := holder.Acquire(bg, "job")
		if err != nil {
			t.Error(err)
		}
		got <- hl
	}()
	waitFor(t, "the holder's subscription", func() bool { return pubsubConnsOf(t, c, "holder") == 1 })
	time.Sleep(50 * time.Millisecond)
	start = time.Now()
	if err := wl.Release(bg); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(mTTL / 2):
		t.Fatalf("a release did not wake the waiter within ttl/2")
	}
	t.Logf("woken and granted %v after the release", time.Since(start))
}

// TestPartitionedHolderToldFirst: a holder cut off by a black-holing proxy
// sees Done() before another contender is granted the lock. The other
// contender asks every few milliseconds, so a grant that lapses on the
// server before the holder's deadline is caught.
func TestPartitionedHolderToldFirst(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	p := newProxy(t, srv.Addr())
	holder := manager(t, newStore(t, dial(t, p.Addr()), srv.KeyPrefix()))
	other := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix())
	l, err := holder.Acquire(bg, "cut")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(mTTL / 2) // let a renewal or two go through
	p.Blackhole()
	defer p.Heal()
	for deadline := time.Now().Add(2 * takeover); ; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("other not granted after the partition")
		}
		rec, err := other.Acquire(bg, "cut", "other", ttl, tr)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Held("other") {
			continue
		}
		select {
		case <-l.Done():
		default:
			t.Fatalf("other granted token %d while the cut-off holder's lease (token %d) was not done", rec.Token, l.Token())
		}
		if rec.Token <= l.Token() || !errors.Is(l.Err(), lease.ErrLost) {
			t.Fatalf("tokens %d then %d, holder's error %v; want a larger token and ErrLost", l.Token(), rec.Token, l.Err())
		}
		return
	}
}

// TestWaitReplicas: with WithWaitReplicas, a grant is reported only once a
// replica acknowledged it; without a replica the outcome is unknown.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	primary := privateRedis(t)
	c := dial(t, primary.Addr())
	s := newStore(t, c, primary.KeyPrefix(), redisstore.WithWaitReplicas(1, 100*time.Millisecond))
	_, err := s.Acquire(bg, "r", "a", ttl, tr)
	if !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("Acquire without a replica: %v, want ErrNotReplicated", err)
	}
	if rec, err := s.Get(bg, "r"); err != nil || rec.OwnerID != "a" {
		t.Fatalf("the unconfirmed grant: %+v, %v; want it applied on the primary", rec, err)
	}
	mustLose(t, s, "r", "b") // a loser is not waited for

	replica := privateRedis(t)
	if err := c.ConfigSet(bg, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	host, port := splitHostPort(t, primary.Addr())
	if err := dial(t, replica.Addr()).ReplicaOf(bg, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replica to sync", func() bool {
		info, err := dial(t, replica.Addr()).Info(bg, "replication").Result()
		return err == nil && containsLine(info, "master_link_status:up")
	})
	s = newStore(t, c, primary.KeyPrefix(), redisstore.WithWaitReplicas(1, time.Second))
	// A first, short grant gives "r2" its counter, so the restart guard
	// lets the minute-long one below through at once.
	plain := newStore(t, c, primary.KeyPrefix())
	if err := plain.Release(bg, "r2", "x", mustHold(t, plain, "r2", "x").Token); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Acquire(bg, "r2", "a", time.Minute, tr) // outlives the check
	if err != nil || !rec.Held("a") {
		t.Fatalf("Acquire with a replica = %+v, %v", rec, err)
	}
	if n, err := dial(t, replica.Addr()).Exists(bg, grantKeyOf(t, c, primary.KeyPrefix(), rec.Token)).Result(); err != nil || n != 1 {
		t.Fatalf("replica's copy of the grant: %d, %v", n, err)
	}
}

// TestRestartEmptyMidHold: Redis restarts empty while a Manager holds a
// lease. The holder loses it (its renewal finds no grant), and the next
// grant, to another Manager, has a larger token.
func TestRestartEmptyMidHold(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	holder := manager(t, newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()))
	other := manager(t, newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()))
	l, err := holder.Acquire(bg, "restart")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 2*takeover)
	defer cancel()
	ol, err := other.Acquire(ctx, "restart")
	if err != nil {
		t.Fatalf("other not granted after the restart: %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("other granted while the holder's lease was not done")
	}
	if ol.Token() <= l.Token() {
		t.Fatalf("token %d after the restart, %d before", ol.Token(), l.Token())
	}
}

// TestServerDownIsUnknownOutcome: with the server stopped or paused, every
// call fails with an error that is not ErrNotHeld (the outcome is unknown),
// and none reports a grant; after a restart the store works again.
func TestServerDownIsUnknownOutcome(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix())
	tok := mustHold(t, s, "down", "a").Token
	calls := func(what string) {
		ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
		defer cancel()
		rec, err := s.Acquire(ctx, "down", "b", ttl, tr)
		if err == nil || rec.Held("b") {
			t.Errorf("%s: Acquire = %+v, %v; want an error", what, rec, err)
		}
		for name, err := range map[string]error{
			"Renew":   func() error { _, err := s.Renew(ctx, "down", "a", tok, ttl, tr); return err }(),
			"Release": s.Release(ctx, "down", "a", tok),
			"Get":     func() error { _, err := s.Get(ctx, "down"); return err }(),
			"Watch":   func() error { _, err := s.Watch(ctx, "down", "b"); return err }(),
		} {
			if err == nil || errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("%s: %s error %v, want one of unknown outcome", what, name, err)
			}
		}
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	calls("paused")
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	calls("stopped")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if rec := mustLose(t, s, "down", "b"); rec.OwnerID != "" || rec.Transition <= 0 {
		t.Fatalf("a new lock on a server just started: %+v, want it held back by the restart guard", rec)
	}
	settled(t, srv.Addr())
	mustHold(t, s, "down", "b")
}

// TestSilentSubscriptionBreaks: a subscription connection that stops
// answering (black-holed, nothing reset) is found by the health check's
// ping and closes its Watch channels, so waiters fall back to polling.
func TestSilentSubscriptionBreaks(t *testing.T) {
	t.Parallel()
	srv := sharedRedis(t)
	p := newProxy(t, srv.Addr())
	s := newStore(t, dial(t, p.Addr()), srv.KeyPrefix(), withHealthCheck(100*time.Millisecond))
	ch := watch(t, s, "silent", "w")
	time.Sleep(300 * time.Millisecond) // healthy: pings are answered
	select {
	case _, ok := <-ch:
		t.Fatalf("a healthy subscription ended (open %v)", ok)
	default:
	}
	p.Blackhole()
	defer p.Heal()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("event through a black hole")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a black-holed subscription still open after 5 s (health check 100 ms)")
	}
}
