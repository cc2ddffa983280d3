package lease

import (
	"math/rand/v2"
	"time"

	"github.com/simba-go/simba/internal/backoff"
)

// Jitter bounds for waiters, as in Simba's ContendPeriod: a waiter retries
// between 200 ms before and 1 s after the owner's transition ends.
const (
	jitterEarly = 200 * time.Millisecond
	jitterLate  = 1000 * time.Millisecond
	// minRetry is the shortest pause between two acquire attempts of one
	// waiter, so a near-expired owner cannot make a waiter spin.
	minRetry = 5 * time.Millisecond
)

// deadline returns when a holder must consider its lease lost: t_send plus
// the grant's remaining transition (as the server reported it, never more
// than ttl + transition) minus the safety margin.
//
// The server wrote the grant at some instant after sent, so on a clock that
// runs at the server's rate nobody else can be granted the lock before
// sent + ttl + transition; firing safety earlier absorbs rate differences
// and the holder's own scheduling delay.
func (c *config) deadline(sent time.Time, rec Record) time.Time {
	left := min(rec.Transition, c.ttl+c.transition)
	return sent.Add(left - c.safety)
}

// renewAt returns when to send the next renewal of a grant confirmed by a
// call sent at sent: about a third of ttl later, and never later than a
// third of the time left before the deadline, but never sooner than gap
// after sent (see renewGap). With a batch store all renewals of one
// Manager are aligned on a common grid (period ttl/6), so they share round
// trips; each is then sent between ttl/6 and ttl/3 after its last
// confirmation.
func (c *config) renewAt(sent, deadline time.Time, grid time.Time, aligned bool, gap time.Duration) time.Time {
	step := min(c.ttl, deadline.Sub(sent)) / 3
	at := sent.Add(step)
	if aligned && c.ttl >= 6*time.Millisecond {
		period := c.ttl / 6
		// The last grid point at or before at, but not before sent+step/2.
		n := at.Sub(grid) / period
		if g := grid.Add(n * period); !g.Before(sent.Add(step / 2)) {
			at = g
		}
	}
	if least := sent.Add(gap); at.Before(least) {
		at = least
	}
	return at
}

// renewGap returns the least time from the sending of a confirmed acquire
// or renewal to the next renewal, for a lease whose first grant, asked for
// at sent, lasts until deadline: a quarter of that grant's renewal step
// (ttl/12 for a full grant). A store that confirms renewals without
// extending the grant leaves less time each time; renewing at a third of
// it would bunch renewals up toward the deadline, without end on a clock
// that stands still. Spaced, a few are sent, and the lease ends at its
// deadline. A fraction of the lease's own grant, not of ttl, it never
// delays the renewals of a store that grants less than asked, as much
// each time: each then comes at a third of what is left, four times the
// gap.
func (c *config) renewGap(sent, deadline time.Time) time.Duration {
	return min(c.ttl, deadline.Sub(sent)) / 12
}

// waitDelay returns how long a waiter sleeps after losing an attempt that
// returned rec: until the owner's transition ends, plus a jitter in
// [−200 ms, +1000 ms) (no early part when transition is zero, as in Simba).
func (c *config) waitDelay(rec Record) time.Duration {
	lo := -jitterEarly
	if c.transition == 0 {
		lo = 0
	}
	d := rec.Transition + lo + rand.N(jitterLate-lo)
	return max(d, minRetry)
}

// backoff returns the pause before retry number attempt (0-based) of a
// failed store call: exponential from ttl/50 (10–200 ms), capped at ttl/5,
// with full jitter in its upper half.
func (c *config) backoff(attempt int) time.Duration {
	base := min(max(c.ttl/50, 10*time.Millisecond), 200*time.Millisecond)
	return backoff.UpperHalf(backoff.Exp(base, max(c.ttl/5, base), attempt))
}

// pause waits for d on clk, or until an event arrives on *events, wake
// fires, or one of the stop channels fires (nil channels never do). A
// closed events channel is set to nil: the subscription broke, and the
// caller falls back to polling. It reports false when a stop channel fired.
func pause(clk Clock, d time.Duration, events *<-chan Event, wake, stop1, stop2 <-chan struct{}) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			return true
		case <-wake:
			return true
		case _, ok := <-*events:
			if ok {
				return true
			}
			*events = nil // a nil channel never fires: keep polling
		case <-stop1:
			return false
		case <-stop2:
			return false
		}
	}
}
