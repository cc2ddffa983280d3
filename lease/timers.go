package lease

import (
	"sync"
	"time"
)

// timers drives the renewals and deadlines of every lease a Manager holds
// from one goroutine and one Clock timer, instead of a goroutine per lease.
// Leases wait in a min-heap ordered by their next event (the next renewal,
// or the deadline while a renewal is in flight).
//
// The goroutine never does I/O: at a deadline it ends the lease (its
// context is cancelled first), and due renewals are sent from goroutines of
// their own (one per call, or one per batch), so a hung store call delays
// no deadline. It starts with the first lease and ends once the Manager is
// closing and no lease is left.
type timers struct {
	m *Manager

	mu      sync.Mutex
	heap    []*Lease
	armed   time.Time     // when the goroutine's Clock timer fires; zero: none
	running bool          // the goroutine runs
	wake    chan struct{} // buffered: an earlier event was scheduled
	// hint is the latest time a lease was scheduled for. With no lease
	// left, the goroutine stays armed for it: the next lease of an
	// acquire-and-release loop, scheduled at or after it, then needs no
	// wake-up. Disarmed whenever the heap was empty, every cycle woke the
	// goroutine (a futex wake-up, a few µs of CPU on either side), which
	// mostly found the lease released already and stayed disarmed.
	hint  time.Time
	wakes int      // wake-ups asked by schedule, for the tests
	due   []*Lease // scratch of the goroutine
}

// schedule puts l at time at in the heap (moving it if it is there). The
// caller holds l.mu and is a goroutine the Manager's WaitGroup counts, so
// that starting the timers' goroutine cannot race Close's Wait.
func (t *timers) schedule(l *Lease, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.next = at
	if at.After(t.hint) {
		t.hint = at
	}
	if l.hidx >= 0 {
		t.fix(l.hidx)
	} else {
		l.hidx = len(t.heap)
		t.heap = append(t.heap, l)
		t.up(l.hidx)
	}
	switch {
	case !t.running:
		t.running = true
		t.m.wg.Add(1)
		go t.run()
	case t.armed.IsZero() || at.Before(t.armed):
		t.wakes++
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// unschedule takes l out of the heap. The caller holds l.mu. The last
// lease out of a closing Manager's heap wakes the goroutine, which ends.
func (t *timers) unschedule(l *Lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := l.hidx; i >= 0 {
		t.remove(i)
		if len(t.heap) == 0 && t.running && t.m.isClosing() {
			select {
			case t.wake <- struct{}{}:
			default:
			}
		}
	}
}

// run is the timers' goroutine.
func (t *timers) run() {
	defer t.m.wg.Done()
	clk := t.m.cfg.clock
	closing := t.m.closing
	var timer Timer
	var fired <-chan time.Time
	var reached time.Time // the time a timer that fired was armed for
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		t.mu.Lock()
		now := clk.Now()
		if now.Before(reached) {
			// The timer fired a hair before the clock says its time came
			// (a Clock's timers and readings may round apart): its time
			// has come, or the goroutine would spin on tiny timers.
			now = reached
		}
		reached = time.Time{}
		due := t.due[:0]
		for len(t.heap) > 0 && !t.heap[0].next.After(now) {
			due = append(due, t.remove(0))
		}
		t.due = due
		if len(due) > 0 {
			t.mu.Unlock()
			t.fire(due, now)
			clear(due)
			continue
		}
		if len(t.heap) == 0 && closing == nil {
			t.running, t.armed = false, time.Time{}
			t.mu.Unlock()
			return
		}
		var next time.Time
		if len(t.heap) > 0 {
			next = t.heap[0].next
		} else if closing != nil && t.hint.After(now) {
			next = t.hint // see hint
		}
		if !next.Equal(t.armed) || fired == nil && !next.IsZero() {
			if timer != nil {
				timer.Stop()
			}
			timer, fired = nil, nil
			if !next.IsZero() {
				timer = clk.NewTimer(next.Sub(now))
				fired = timer.C()
			}
			t.armed = next
		}
		armed := t.armed
		t.mu.Unlock()
		select {
		case <-fired:
			fired, reached = nil, armed
		case <-t.wake:
		case <-closing:
			closing = nil // from now on, end once no lease is left
		}
	}
}

// fire handles the leases whose next event is due: a deadline passed
// ends the lease; a renewal due is sent; anything else is rescheduled.
func (t *timers) fire(due []*Lease, now time.Time) {
	var renew []*Lease
	for _, l := range due {
		l.mu.Lock()
		switch {
		case l.state >= leaseEnding:
		case !now.Before(l.deadline):
			l.mu.Unlock()
			l.lose(now)
			continue
		case !l.inflight && !now.Before(l.renewAt):
			l.inflight = true
			renew = append(renew, l)
			t.schedule(l, l.deadline)
		default:
			t.schedule(l, l.nextEvent())
		}
		l.mu.Unlock()
	}
	if len(renew) > 0 {
		t.m.sendRenewals(renew)
	}
}

// The heap, by Lease.next; Lease.hidx is each lease's index (-1: out).

func (t *timers) less(i, j int) bool { return t.heap[i].next.Before(t.heap[j].next) }

func (t *timers) swap(i, j int) {
	h := t.heap
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (t *timers) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *timers) down(i int) {
	n := len(t.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && t.less(r, c) {
			c = r
		}
		if !t.less(c, i) {
			return
		}
		t.swap(i, c)
		i = c
	}
}

func (t *timers) fix(i int) {
	t.up(i)
	t.down(i)
}

// remove takes the lease at index i out of the heap and returns it.
func (t *timers) remove(i int) *Lease {
	last := len(t.heap) - 1
	l := t.heap[i]
	if i != last {
		t.swap(i, last)
	}
	t.heap[last] = nil
	t.heap = t.heap[:last]
	if i != last {
		t.fix(i)
	}
	l.hidx = -1
	return l
}
