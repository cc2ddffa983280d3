package redisstore_test

import (
	"context"
	"errors"
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

// window is the hand-off window of TestWatchWakesOnlyTheHead. The test
// is about who is woken, not how fast: b's Acquire must come within the
// window (or c is woken when it ends, rightly), and on a loaded machine the
// steps between the release and that Acquire can take a second, so the
// window is an order of magnitude longer than a prompt hand-off needs.
const window = 3 * time.Second

// windowMargin is how long after the window's end, counted from the
// release, c's wake-up (due window + 5 ms after its Watch heard the
// release) has surely fired if b's grant did not cancel it.
const windowMargin = time.Second

// The waiters' attempts in testWakesOnlyTheHead span the whole window (a
// waiter's window is at most its ttl + transition), and b's grant lasts
// until the end of the test.
const headTTL, headTr = 3 * window, time.Second

// acquireHead makes who's Acquire of "h" with the span of the window, and
// fails t unless it won (hold) or lost (!hold).
func acquireHead(t testing.TB, s *redisstore.Store, who string, hold bool) lease.Record {
	t.Helper()
	rec, err := s.Acquire(bg, "h", who, headTTL, headTr)
	if err != nil || rec.Held(who) != hold {
		t.Fatalf("Acquire(h, %q) = %+v, %v; want held %v", who, rec, err, hold)
	}
	return rec
}

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
	acquireHead(t, s, "b", false)
	acquireHead(t, s, "c", false)
	b1, b2, c := watch(t, s, "h", "b"), watch(t, s, "h", "b"), watch(t, s, "h", "c")
	other := watch(t, s, "other", "b")
	released := time.Now()
	if err := s.Release(bg, "h", "a", tok); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, "observer on the release", obs, lease.Event{Name: "h"})
	wantEvent(t, "head", b1, lease.Event{Name: "h"})
	wantEvent(t, "head's second watch", b2, lease.Event{Name: "h"})
	wantNoEvent(t, "second waiter", c)
	wantNoEvent(t, "another mutex", other)
	tok = acquireHead(t, s, "b", true).Token
	if d := time.Since(released); d >= window {
		// c is woken rightly then: this run cannot judge the cancellation.
		t.Fatalf("b's grant came %v after the release, past the %v hand-off window (a machine too slow for this test)", d, window)
	}
	wantEvent(t, "observer on b's grant", obs, lease.Event{Name: "h", OwnerID: "b", Token: tok})
	// Past the window: c's wake-up was cancelled by b's grant.
	time.Sleep(time.Until(released.Add(window + windowMargin)))
	wantNoEvent(t, "c after b's grant", c)
	// Leave "h" free for the next run on this server: c withdraws, b releases.
	if err := s.Release(bg, "h", "c", 0); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("c withdraws: %v, want ErrNotHeld", err)
	}
	if err := s.Release(bg, "h", "b", tok); err != nil {
		t.Fatal(err)
	}
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
