package lease

import (
	"testing"
	"time"
)

func mustConfig(t *testing.T, opts ...Option) config {
	t.Helper()
	c, err := newConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDeadlineFormula(t *testing.T) {
	for _, tc := range []struct {
		ttl, transition, want time.Duration // want: deadline − t_send
	}{
		{10 * time.Second, 6 * time.Second, 13 * time.Second}, // safety = transition/2 = 3s
		{10 * time.Second, 0, 9 * time.Second},                // safety = ttl/10: never zero
		{time.Second, 100 * time.Millisecond, 1000 * time.Millisecond},
	} {
		c := mustConfig(t, WithTTL(tc.ttl), WithTransition(tc.transition))
		sent := time.Unix(1000, 0)
		full := Record{OwnerID: "me", Token: 1, TTL: tc.ttl, Transition: tc.ttl + tc.transition}
		if got := c.deadline(sent, full).Sub(sent); got != tc.want {
			t.Errorf("ttl %v transition %v: deadline − t_send = %v, want %v", tc.ttl, tc.transition, got, tc.want)
		}
		if c.safety <= 0 {
			t.Errorf("ttl %v transition %v: safety %v is not positive", tc.ttl, tc.transition, c.safety)
		}
		// A store that reports less time left shortens the deadline; one
		// that reports more never lengthens it past ttl + transition.
		short := full
		short.Transition = tc.ttl / 2
		if got := c.deadline(sent, short).Sub(sent); got != tc.ttl/2-c.safety {
			t.Errorf("short record: deadline − t_send = %v, want %v", got, tc.ttl/2-c.safety)
		}
		long := full
		long.Transition = time.Hour
		if got := c.deadline(sent, long).Sub(sent); got != tc.want {
			t.Errorf("long record: deadline − t_send = %v, want %v", got, tc.want)
		}
	}
}

func TestRenewAt(t *testing.T) {
	c := mustConfig(t, WithTTL(9*time.Second), WithTransition(3*time.Second))
	grid := time.Unix(0, 0)
	sent := time.Unix(100, 123)
	deadline := c.deadline(sent, Record{Transition: 12 * time.Second})
	gap := c.renewGap(sent, deadline)
	if gap != 750*time.Millisecond {
		t.Errorf("gap between renewals of a full grant %v, want ttl/12 = 750ms", gap)
	}
	if got := c.renewAt(sent, deadline, grid, false, gap).Sub(sent); got != 3*time.Second {
		t.Errorf("renewal %v after t_send, want ttl/3 = 3s", got)
	}
	// Aligned (batch store): on the ttl/6 grid, between ttl/6 and ttl/3.
	at := c.renewAt(sent, deadline, grid, true, gap)
	if d := at.Sub(sent); d < 1500*time.Millisecond || d > 3*time.Second {
		t.Errorf("aligned renewal %v after t_send, want within [ttl/6, ttl/3]", d)
	}
	if at.Sub(grid)%(1500*time.Millisecond) != 0 {
		t.Errorf("aligned renewal %v is off the ttl/6 grid", at.Sub(grid))
	}
	// A lease whose grants leave less than ttl renews at a third of the
	// time left: its gap is a quarter of that.
	near := sent.Add(600 * time.Millisecond)
	if got := c.renewAt(sent, near, grid, false, c.renewGap(sent, near)).Sub(sent); got != 200*time.Millisecond {
		t.Errorf("renewal %v after t_send with 600ms left, want 200ms", got)
	}
	// A lease granted in full whose renewal left it little time (the store
	// did not extend the grant) waits the gap of its full grant.
	if got := c.renewAt(sent, near, grid, false, gap).Sub(sent); got != gap {
		t.Errorf("renewal %v after t_send with 600ms left of a full grant, want the gap %v", got, gap)
	}
	if got := c.renewAt(sent, near, grid, true, gap).Sub(sent); got != gap {
		t.Errorf("aligned renewal %v after t_send with 600ms left of a full grant, want the gap %v", got, gap)
	}
}

func TestWaitDelayJitterBounds(t *testing.T) {
	c := mustConfig(t, WithTTL(time.Second), WithTransition(500*time.Millisecond))
	rec := Record{OwnerID: "other", TTL: 700 * time.Millisecond, Transition: 1200 * time.Millisecond}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 20000 {
		d := c.waitDelay(rec)
		lo, hi = min(lo, d), max(hi, d)
		if d < rec.Transition-200*time.Millisecond || d >= rec.Transition+time.Second {
			t.Fatalf("wait %v outside [transition−200ms, transition+1s) = [%v, %v)",
				d, rec.Transition-200*time.Millisecond, rec.Transition+time.Second)
		}
	}
	// Both ends of the range are used: the jitter is not a constant.
	if lo > rec.Transition-150*time.Millisecond || hi < rec.Transition+950*time.Millisecond {
		t.Errorf("jitter range [%v, %v] does not span [−200ms, +1000ms) around %v", lo, hi, rec.Transition)
	}
	// Without transition, Simba has no early part; a free lock is retried
	// soon, but never in a busy loop.
	c0 := mustConfig(t, WithTTL(time.Second), WithTransition(0))
	for range 2000 {
		if d := c0.waitDelay(Record{}); d < minRetry || d >= time.Second {
			t.Fatalf("free lock, zero transition: wait %v outside [%v, 1s)", d, minRetry)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	c := mustConfig(t, WithTTL(10*time.Second))
	prevMax := time.Duration(0)
	for attempt := range 12 {
		hi := time.Duration(0)
		for range 500 {
			d := c.backoff(attempt)
			if d <= 0 || d > 2*time.Second {
				t.Fatalf("attempt %d: backoff %v outside (0, ttl/5]", attempt, d)
			}
			hi = max(hi, d)
		}
		if hi < prevMax/2 {
			t.Fatalf("attempt %d: backoff shrank (%v after %v)", attempt, hi, prevMax)
		}
		prevMax = hi
	}
	if first := c.backoff(0); first > 200*time.Millisecond {
		t.Errorf("first retry after %v: renewals must retry fast", first)
	}
}
