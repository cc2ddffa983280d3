package lease

import (
	"context"
	"sync"
	"time"
)

// callCtx is the context of one store call: its parent's values and
// cancellation, and a deadline one call timeout after the call starts.
// Every store call gets one, so every call is bounded; it costs one small
// allocation where context.WithTimeout costs four, because its channel and
// timers are made only when the store asks for Done. A store that only
// reads Deadline (to set socket deadlines) and Err, or that never blocks,
// pays nothing more.
//
// The deadline is on the time package's clock, as a network client's
// socket deadline is, not on the Manager's Clock.
type callCtx struct {
	parent   context.Context
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{} // made by Done
	err   error
	timer *time.Timer // closes done at the deadline, once Done was asked
	stop  func() bool // ends the watch on parent, once Done was asked
}

// newCall starts the context of one store call under parent.
func (m *Manager) newCall(parent context.Context) *callCtx {
	return &callCtx{parent: parent, deadline: time.Now().Add(m.cfg.callTimeout)}
}

// call runs f, the store call of op, with the per-call timeout, under
// parent, and records its outcome.
func (m *Manager) call(parent context.Context, op storeOp, f func(context.Context) error) error {
	ctx := m.newCall(parent)
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
// makes it, with a timer for the deadline and a watch on the parent.
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
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.cancel(context.DeadlineExceeded) })
	if c.parent.Done() != nil {
		c.stop = context.AfterFunc(c.parent, func() { c.cancel(c.parent.Err()) })
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

// fail ends the context with err and releases its timers. c.mu is held.
func (c *callCtx) fail(err error) {
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stop != nil {
		c.stop()
	}
}

// end is the call's CancelFunc: it ends the context once the store call
// has returned.
func (c *callCtx) end() { c.cancel(context.Canceled) }
