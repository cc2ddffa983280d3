package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is the context of one store call: its parent's values and
// cancellation, and a deadline one call timeout after the call starts.
// Every store call gets one, so every call is bounded; it costs one small
// allocation where context.WithTimeout costs four, because its channel is
// made only when the store asks for Done. A store that only reads Deadline
// (to set socket deadlines) and Err, or that never blocks, pays nothing
// more.
//
// A call that asked for Done waits for its deadline in its Manager's
// callTimer, with every other such call of the Manager, rather than on a
// runtime timer of its own (see callTimer).
//
// The deadline is on the time package's clock, as a network client's
// socket deadline is, not on the Manager's Clock.
type callCtx struct {
	parent   context.Context
	deadline time.Time
	timers   *callTimer // the Manager's

	mu    sync.Mutex
	ended atomic.Bool   // err is set; read by the callTimer without mu
	done  chan struct{} // made by Done
	err   error
	// stop ends the watch on parent, once Done was asked, and stops the
	// call's own timer when it has one (see callTimer.add).
	stop func() bool
}

// startCall starts the context of one store call under parent in c, an
// unused callCtx (the zero value) made with what it serves, or in a new
// one when c is nil.
func (m *Manager) startCall(c *callCtx, parent context.Context) *callCtx {
	if c == nil {
		c = new(callCtx)
	}
	c.parent, c.deadline, c.timers = parent, time.Now().Add(m.cfg.callTimeout), &m.calls
	return c
}

// call runs f, the store call of op, with the per-call timeout, under
// parent, and records its outcome.
func (m *Manager) call(parent context.Context, op storeOp, f func(context.Context) error) error {
	return m.callIn(nil, parent, op, f)
}

// callIn is call with its context in c (see startCall).
func (m *Manager) callIn(c *callCtx, parent context.Context, op storeOp, f func(context.Context) error) error {
	ctx := m.startCall(c, parent)
	err := f(ctx)
	ctx.end()
	m.called(op, ctx, err)
	return err
}

// Deadline returns the earlier of the call's deadline and its parent's.
func (c *callCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Value returns the parent's value for key.
func (c *callCtx) Value(key any) any { return c.parent.Value(key) }

// Err returns nil until the parent ends, the deadline passes or the call
// returned; then context.Canceled or context.DeadlineExceeded.
func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.check()
	return c.err
}

// Done returns a channel closed when Err becomes non-nil. The first call
// makes it, puts the call in its Manager's callTimer and watches the
// parent.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err != nil { // ended before anyone asked
		close(c.done)
		return c.done
	}
	if c.check(); c.err != nil { // closed by fail
		return c.done
	}
	var own *time.Timer
	if !c.timers.add(c) {
		own = time.AfterFunc(time.Until(c.deadline), func() { c.cancel(context.DeadlineExceeded) })
		c.stop = own.Stop
	}
	if c.parent.Done() != nil {
		c.stop = context.AfterFunc(c.parent, func() { c.cancel(c.parent.Err()) })
		if own != nil {
			stop := c.stop
			c.stop = func() bool { own.Stop(); return stop() }
		}
	}
	return c.done
}

// String describes the context, as the standard ones do.
func (c *callCtx) String() string { return "lease.callCtx" }

// check ends the context if its parent ended or its deadline passed.
// c.mu is held.
func (c *callCtx) check() {
	if c.err != nil {
		return
	}
	if err := c.parent.Err(); err != nil {
		c.fail(err)
	} else if !time.Now().Before(c.deadline) {
		c.fail(context.DeadlineExceeded)
	}
}

// cancel ends the context with err, unless it has ended.
func (c *callCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.fail(err)
	}
}

// fail ends the context with err and ends its watch on the parent; the
// callTimer drops the call when it next looks. c.mu is held.
func (c *callCtx) fail(err error) {
	c.err = err
	c.ended.Store(true)
	if c.done != nil {
		close(c.done)
	}
	if c.stop != nil {
		c.stop()
	}
}

// end is the call's CancelFunc: it ends the context once the store call
// has returned.
func (c *callCtx) end() { c.cancel(context.Canceled) }

// callTimer ends the store calls of one Manager that asked for Done at
// their deadlines, with one runtime timer for all of them. A runtime timer
// per call (time.AfterFunc, then Stop when the call returns) cost a few
// percent of CPU and a futex wake-up per call on stores that ask for Done
// on every request (go-redis's pool, zkstore).
//
// Every call of a Manager gets the same timeout, so deadlines come in
// nearly the order the calls ask for Done: the pending calls wait in a
// FIFO sorted by deadline (a call that asks late is slid back past the
// few later ones), and the timer is armed for the head. A call that
// returns is only marked ended; ended calls are dropped as they reach the
// head, when a call is added or the timer fires, and all at once whenever
// the FIFO doubled since it was last compacted, so it holds about twice
// the calls in flight at most. The timer stays armed for a head that has
// ended: a stream of short calls re-arms it about once per call timeout,
// not once per call.
//
// A timer made in a testing/synctest bubble may only be used from that
// bubble, so a call made in or out of a bubble where the timer was not
// made gets a timer of its own (see add); the Manager's calls normally
// all come from one side.
type callTimer struct {
	mu      sync.Mutex
	q       []*callCtx // pending calls in q[head:], by deadline
	head    int
	compact int         // compact q once it holds this many; 0: minCompact
	timer   *time.Timer // made by the first add
	bubbled bool        // timer was made in a synctest bubble
	armed   time.Time   // when timer fires; zero: stopped or fired
	arms    int         // timers made or reset, for the tests
}

// minCompact is the least length of the FIFO that makes add compact it.
const minCompact = 64

// add puts c, whose mu is held, in the FIFO, and arms the timer if c's
// deadline comes before it fires. It returns false, and leaves c out,
// when c comes from the other side of a synctest bubble than the timer.
func (t *callTimer) add(c *callCtx) bool {
	bubbled := c.deadline == c.deadline.Round(0) // no monotonic reading: in a bubble
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil && bubbled != t.bubbled {
		return false
	}
	t.popEnded()
	n := len(t.q) - t.head
	switch {
	case n == 0:
		t.q, t.head, t.compact = t.q[:0], 0, 0
	case n >= max(t.compact, minCompact):
		t.compactQ()
	case t.head > 0 && len(t.q) == cap(t.q):
		copy(t.q, t.q[t.head:])
		clear(t.q[n:])
		t.q, t.head = t.q[:n], 0
	}
	t.q = append(t.q, c)
	for i := len(t.q) - 1; i > t.head && t.q[i-1].deadline.After(c.deadline); i-- {
		t.q[i], t.q[i-1] = t.q[i-1], c
	}
	if t.armed.IsZero() || c.deadline.Before(t.armed) {
		if t.timer == nil {
			t.bubbled = bubbled
		}
		t.arm(c.deadline)
	}
	return true
}

// popEnded drops the ended calls at the head of the FIFO. t.mu is held.
func (t *callTimer) popEnded() {
	for t.head < len(t.q) && t.q[t.head].ended.Load() {
		t.q[t.head] = nil
		t.head++
	}
}

// compactQ drops every ended call from the FIFO. t.mu is held.
func (t *callTimer) compactQ() {
	n := 0
	for _, c := range t.q[t.head:] {
		if !c.ended.Load() {
			t.q[n] = c
			n++
		}
	}
	clear(t.q[n:])
	t.q, t.head = t.q[:n], 0
	t.compact = 2 * n
}

// arm makes the timer fire at at. t.mu is held.
func (t *callTimer) arm(at time.Time) {
	if t.timer == nil {
		t.timer = time.AfterFunc(time.Until(at), t.fire)
	} else {
		t.timer.Reset(time.Until(at))
	}
	t.armed = at
	t.arms++
}

// fire is the timer's function: it ends the calls whose deadline passed,
// drops the ended ones at the head, and arms the timer for the next call
// still pending.
func (t *callTimer) fire() {
	now := time.Now()
	var expired []*callCtx
	t.mu.Lock()
	t.armed = time.Time{}
	for ; t.head < len(t.q); t.head++ {
		c := t.q[t.head]
		if !c.ended.Load() {
			if c.deadline.After(now) {
				break
			}
			expired = append(expired, c)
		}
		t.q[t.head] = nil
	}
	if t.head < len(t.q) {
		t.arm(t.q[t.head].deadline)
	} else {
		t.q, t.head, t.compact = t.q[:0], 0, 0
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.cancel(context.DeadlineExceeded)
	}
}

// idle stops the timer once no call is pending: Close calls it, so that a
// closed Manager holds no runtime timer. A call made later arms it again.
func (t *callTimer) idle() {
	now := time.Now()
	bubbled := now == now.Round(0)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.popEnded()
	if t.head < len(t.q) || t.timer == nil || t.bubbled != bubbled {
		return
	}
	t.q, t.head = t.q[:0], 0
	t.timer.Stop()
	t.armed = time.Time{}
}
