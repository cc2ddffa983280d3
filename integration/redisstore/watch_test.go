package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// watch subscribes for the rest of the test.
func watch(t testing.TB, s *redisstore.Store, name, contender string) <-chan lease.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	t.Cleanup(cancel)
	ch, err := s.Watch(ctx, name, contender)
	if err != nil {
		t.Fatalf("Watch(%q, %q): %v", name, contender, err)
	}
	return ch
}

// wantEvent waits (an order of magnitude: a pushed event takes
// milliseconds) for ev on ch.
func wantEvent(t testing.TB, what string, ch <-chan lease.Event, ev lease.Event) {
	t.Helper()
	select {
	case got, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed, want %+v", what, ev)
		}
		if got != ev {
			t.Fatalf("%s: event %+v, want %+v", what, got, ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no event, want %+v", what, ev)
	}
}

// wantNoEvent checks that nothing arrives on ch for a while.
func wantNoEvent(t testing.TB, what string, ch <-chan lease.Event) {
	t.Helper()
	select {
	case got, ok := <-ch:
		t.Fatalf("%s: got %+v (open %v), want nothing", what, got, ok)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestWatchWakesOnlyTheHead: a release wakes the longest waiter only (the
// next one would be woken when the head's window ends, but the head's
// grant cancels that); an observer hears every grant and release. On Redis
// Cluster too, after idle channels of many slots were swept off the
// subscriptions.
func TestWatchWakesOnlyTheHead(t *testing.T) {
	t.Parallel()
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		testWakesOnlyTheHead(t, shared(t, redisstore.WithHandoff(window)))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		srv := sharedCluster(t)
		testWakesOnlyTheHead(t, newStore(t, dialCluster(t, srv.Addrs()), srv.KeyPrefix(), redisstore.WithHandoff(window)))
	})
}

// window is the hand-off window of TestWatchWakesOnlyTheHead.
const window = 200 * time.Millisecond

func testWakesOnlyTheHead(t *testing.T, s *redisstore.Store) {
	ctx, cancel := context.WithCancel(bg)
	for i := range 20 { // channels on every node, idle and swept in batches
		if _, err := s.Watch(ctx, fmt.Sprintf("idle/%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	obs := watch(t, s, "h", "")
	cancel()
	time.Sleep(300 * time.Millisecond)
	tok := mustHold(t, s, "h", "a").Token
	wantEvent(t, "observer on a's grant", obs, lease.Event{Name: "h", OwnerID: "a", Token: tok})
	mustLose(t, s, "h", "b")
	mustLose(t, s, "h", "c")
	b1, b2, c := watch(t, s, "h", "b"), watch(t, s, "h", "b"), watch(t, s, "h", "c")
	other := watch(t, s, "other", "b")
	if err := s.Release(bg, "h", "a", tok); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, "observer on the release", obs, lease.Event{Name: "h"})
	wantEvent(t, "head", b1, lease.Event{Name: "h"})
	wantEvent(t, "head's second watch", b2, lease.Event{Name: "h"})
	wantNoEvent(t, "second waiter", c)
	wantNoEvent(t, "another mutex", other)
	tok = mustHold(t, s, "h", "b").Token
	wantEvent(t, "observer on b's grant", obs, lease.Event{Name: "h", OwnerID: "b", Token: tok})
	time.Sleep(window) // past the window: c's wake-up was cancelled by b's grant
	wantNoEvent(t, "c after b's grant", c)
}

// TestOneSubscriptionPerStore: many watches share one connection, which
// closes with the last watch.
func TestOneSubscriptionPerStore(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	c := dial(t, srv.Addr())
	s := newStore(t, c, srv.KeyPrefix())
	ctx, cancel := context.WithCancel(bg)
	var chans []<-chan lease.Event
	for _, m := range []string{"m1", "m2", "m3", "m4", "m5"} {
		for _, who := range []string{"", "a", "b"} {
			ch, err := s.Watch(ctx, m, who)
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
	}
	if n := pubsubConns(t, c); n != 1 {
		t.Fatalf("%d subscription connections for 15 watches, want 1", n)
	}
	cancel()
	for _, ch := range chans {
		if _, ok := <-ch; ok {
			t.Fatal("event after the context ended")
		}
	}
	waitFor(t, "the subscription to close", func() bool { return pubsubConns(t, c) == 0 })
}

// pubsubConns counts the server's subscription connections.
func pubsubConns(t testing.TB, c *redis.Client) int {
	t.Helper()
	list, err := c.Do(bg, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "\n")
}

// pubsubConnsOf counts the subscription connections of clients named name.
func pubsubConnsOf(t testing.TB, c *redis.Client, name string) int {
	t.Helper()
	list, err := c.Do(bg, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, " name="+name+" ")
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
