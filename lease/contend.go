package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Callbacks are what a Contender calls as leadership comes and goes. They
// run in the Contender's own goroutines, never under a lock of this
// package, so they may call back into the Manager.
type Callbacks struct {
	// OnAcquired is called when this contender becomes the owner. It may
	// return at once or do the leader's work until ctx is done; ctx is
	// cancelled when leadership ends (lost, or Stop). Required.
	OnAcquired func(ctx context.Context, l *Lease)
	// OnReleased is called when leadership has ended and OnAcquired has
	// returned, with the grant that ended. It always follows its own
	// OnAcquired and never runs concurrently with it. Optional.
	OnReleased func(prev Owner)
	// OnOwner is called with the owner as this contender observes it,
	// leader or not, each time it changes. Calls are sequential; when one
	// is slow, intermediate owners may be skipped. Optional.
	OnOwner func(o Owner)
}

// A Contender takes part in the election of one lock: it contends while
// it is not the owner, holds and renews while it is, and contends again
// after losing, until Stop.
type Contender struct {
	m        *Manager
	name     string
	cb       Callbacks
	stopping chan struct{} // closed by Stop
	done     chan struct{} // closed when the term loop has ended
	ownerCh  chan struct{} // buffered: the observed owner changed
	// runG and notifyG are the ids of the goroutines that run the
	// callbacks (0 until they start): Stop and Close called from them
	// must not wait for the callback that calls them.
	runG, notifyG atomic.Uint64

	mu      sync.Mutex
	stopped bool
	lead    *Lease
	owner   Owner
	claim   *claim
	slot    *slot
	result  error // of the final release
}

// Contend starts contending for the lock name under this Manager's id and
// returns at once. Stop the Contender (or Close the Manager) to end it.
// Contenders and Acquire calls of one Manager on one name share its store
// contender and take turns.
func (m *Manager) Contend(name string, cb Callbacks) (*Contender, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if cb.OnAcquired == nil {
		return nil, fmt.Errorf("%w: Callbacks.OnAcquired is nil", ErrInvalidArgument)
	}
	c := &Contender{
		m: m, name: name, cb: cb,
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
		ownerCh:  make(chan struct{}, 1),
	}
	m.life.RLock()
	defer m.life.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	m.mu.Lock()
	m.contenders[c] = struct{}{}
	m.mu.Unlock()
	m.ncontenders.Add(1)
	m.wg.Add(1)
	go c.run()
	if cb.OnOwner != nil {
		m.wg.Add(1)
		go c.notify()
	}
	return c, nil
}

// Leading reports whether this Contender currently holds the lock.
func (c *Contender) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lead != nil && c.lead.Held()
}

// Owner returns the owner as last observed by this Contender.
func (c *Contender) Owner() Owner {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owner
}

// Stop ends the Contender. When it leads, Stop cancels the leader's
// context, waits for OnAcquired and OnReleased to return, and only then
// releases the lock, so the next leader's work cannot overlap this one's.
// The grant stays renewed while the callbacks finish.
//
// If ctx ends first, Stop abandons the grant and returns ctx's error: it
// stops renewing without releasing, so the grant lapses by itself on the
// store (after ttl + transition from the last renewal that reached it),
// and the abandoned callback's context stays cancelled. Like a lost
// grant, an abandoned one is never handed out again by this Manager: a
// later Acquire waits until it could have lapsed, and if the store still
// has it (a renewal whose reply was lost), gives it up and takes a new
// grant with a greater token.
//
// Called from inside one of this Contender's own callbacks (or from a
// Scheduler's work), Stop returns at once without waiting for them: the
// leader's context is cancelled, and the lock is released once the
// callbacks have returned. Stop is idempotent.
func (c *Contender) Stop(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	c.mu.Lock()
	first := !c.stopped
	c.stopped = true
	l, cl, s := c.lead, c.claim, c.slot
	c.mu.Unlock()
	if first {
		close(c.stopping)
		if cl != nil {
			s.cancel(cl)
		}
	}
	if c.inside(goid()) {
		// Waiting for the callback that called us would never end: the
		// term loop releases once the callbacks return.
		if first && l != nil {
			l.drain()
		}
		return nil
	}
	if first && l != nil {
		l.drain() // cancel the leader's ctx, keep renewing
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		if l != nil {
			l.abandon()
		}
		return fmt.Errorf("lease: stop %q: %w", c.name, ctx.Err())
	}
	c.m.forget(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.result
}

// inside reports whether goroutine g runs this Contender's callbacks.
func (c *Contender) inside(g uint64) bool {
	return g == c.runG.Load() || g == c.notifyG.Load()
}

// run is the term loop: claim, lead, hand back, and claim again.
func (c *Contender) run() {
	c.runG.Store(goid())
	defer c.m.wg.Done()
	defer close(c.done)
	defer c.m.forget(c)
	for {
		cl := c.m.newClaim(claimContend)
		s, err := c.m.enqueue(c.name, cl)
		if err != nil {
			return // closed
		}
		c.mu.Lock()
		if c.stopped {
			c.mu.Unlock()
			s.cancel(cl)
			drop(cl)
			return
		}
		c.claim, c.slot = cl, s
		c.mu.Unlock()

		var l *Lease
		select {
		case l = <-cl.lease:
			c.m.obs.waited(c.name, cl, outAcquired)
		case err := <-cl.fail:
			c.m.obs.waited(c.name, cl, outcomeOf(nil, err))
			return
		case <-c.stopping:
			c.m.obs.waited(c.name, cl, outCanceled)
			if s.cancel(cl) {
				return
			}
			drop(cl)
			return
		}
		if !c.term(l) {
			return
		}
	}
}

// drop hands back a grant that arrived after its claim was given up.
func drop(cl *claim) {
	select {
	case l := <-cl.lease:
		_ = l.stop(context.Background())
	case <-cl.fail:
	default:
	}
}

// term runs one leadership term and reports whether to contend again.
func (c *Contender) term(l *Lease) bool {
	c.mu.Lock()
	c.claim = nil
	if c.stopped {
		c.mu.Unlock()
		_ = l.stop(context.Background())
		return false
	}
	c.lead = l
	c.mu.Unlock()

	c.m.obs.leading(c.name, 1)
	c.m.logLeader(l, true, false)
	c.cb.OnAcquired(l.Context(), l)
	<-l.Done() // OnAcquired may return early; leadership lasts until the lease ends
	c.m.obs.leading(c.name, -1)
	c.m.logLeader(l, false, errors.Is(context.Cause(l.Context()), ErrLost))
	prev := l.Owner()
	if c.cb.OnReleased != nil {
		c.cb.OnReleased(prev)
	}

	c.mu.Lock()
	c.lead = nil
	stopped := c.stopped
	c.mu.Unlock()
	if !stopped {
		return true // lost, or released by the leader itself: contend again
	}
	// Stop is waiting for us: the callbacks are done, release now.
	if err := l.stop(context.Background()); err != nil && !errors.Is(err, ErrNotHeld) {
		c.mu.Lock()
		c.result = fmt.Errorf("lease: stop %q: release: %w", c.name, err)
		c.mu.Unlock()
	}
	return false
}

// setOwner records an observed owner and wakes the OnOwner goroutine.
func (c *Contender) setOwner(o Owner) {
	c.mu.Lock()
	changed := o.ID != c.owner.ID || o.Token != c.owner.Token || c.owner.Name == ""
	c.owner = o
	c.mu.Unlock()
	if changed && c.cb.OnOwner != nil {
		select {
		case c.ownerCh <- struct{}{}:
		default:
		}
	}
}

// notify delivers owner changes to OnOwner, one at a time, until Stop.
func (c *Contender) notify() {
	c.notifyG.Store(goid())
	defer c.m.wg.Done()
	for {
		select {
		case <-c.ownerCh:
			c.cb.OnOwner(c.Owner())
		case <-c.stopping:
			return
		case <-c.m.closing:
			return
		}
	}
}
