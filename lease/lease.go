package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Owner describes who holds a lock, as the store's server saw it.
type Owner struct {
	// Name is the lock name.
	Name string
	// ID is the owner's contender id, or "" when the lock is free.
	ID string
	// Token is the fencing token of the owner's grant (0 when free).
	Token uint64
	// TTL and Transition are the times that were left of the grant's ttl
	// and transition when it was observed, on the server's clock.
	TTL, Transition time.Duration
}

// Free reports whether no one held the lock.
func (o Owner) Free() bool { return o.ID == "" }

func ownerOf(name string, rec Record) Owner {
	return Owner{Name: name, ID: rec.OwnerID, Token: rec.Token, TTL: rec.TTL, Transition: rec.Transition}
}

// A Lease is a held grant of a lock. It stays held until it is released,
// or until its local deadline passes without a confirmed renewal; then Done
// closes and Context is cancelled, before the store could grant the lock to
// anyone else (see the package documentation for the exact bound).
//
// Pass Token to every resource you write to under the lease, so that the
// resource can reject writes of a holder that was paused past its deadline.
//
// A Lease is safe for concurrent use.
type Lease struct {
	name   string
	token  uint64
	s      *slot         // the Manager's slot for the lock, which holds the lease
	gap    time.Duration // least time from a confirmed renewal's sending to the next
	waited bool          // the grant came after a lost attempt: others contended

	// The lease's context is made only when Context or Done first asks
	// for it (most holders of a short lock never do): two allocations
	// fewer per cycle, and a Release under a context that cannot derive
	// from it needs no guard (releaseContext). cmu is a leaf lock: it may
	// be taken with mu held.
	cmu      sync.Mutex
	cause    error                   // why the lease ended (ErrLost, ErrReleased); nil while held
	ctx      context.Context         // made on demand; cancelled with cause
	cancelFn context.CancelCauseFunc // ctx's, while cause is nil

	mu       sync.Mutex
	state    leaseState
	released bool // Release has succeeded once
	inflight bool // a renewal is in flight
	deadline time.Time
	rec      Record        // last record confirmed by the store
	result   error         // outcome of the server-side end, once ended
	stopped  chan struct{} // made on demand; closed once ended
	renewAt  time.Time     // when the next renewal is due
	due      time.Duration // renewAt as of the last confirmation, from the Manager's start (HealthCheck)
	attempt  int           // failed renewals in a row
	sentAt   time.Duration // when the call that confirmed rec was sent, from the Manager's start
	rtt      time.Duration // and how long its reply took (see sample)
	stepSeen bool          // a step since rec was acted on; cleared by the next confirmation

	// Guarded by the Manager's timers.
	next time.Time // when the timers look at the lease next
	hidx int       // index in the timers' heap, -1 when out

	// The contexts of the store calls that made the grant, when the
	// caller's Acquire did (acquireNow), and of its first release, made
	// with the lease in one allocation rather than one each. They stay
	// valid, and ended, for as long as the lease lives: a store may keep
	// a call's context past its return.
	acquireCall, releaseCall callCtx
}

// leaseState is where a lease is in its life. Ordered: every state from
// leaseEnding on is no longer renewed.
type leaseState uint8

const (
	leaseHeld     leaseState = iota
	leaseDraining            // its Contender winds down: ctx cancelled, still renewed
	leaseEnding              // a release is under way
	leaseEnded               // released, lost or abandoned
)

// closedCh is a closed channel, for leases that ended before anyone waited.
var closedCh = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// newLease returns a held lease of s for a grant confirmed by an acquire
// sent at sent whose reply came at recv, and schedules its first renewal.
// It fills in l, made before the acquire to hold its call's context
// (acquireNow), or makes a lease when l is nil. It runs in a goroutine
// the Manager's WaitGroup counts.
func newLease(l *Lease, s *slot, rec Record, sent, recv, deadline time.Time) *Lease {
	cfg := &s.m.cfg
	if l == nil {
		l = new(Lease)
	}
	l.name, l.token, l.s = s.name, rec.Token, s
	l.deadline, l.rec, l.hidx, l.gap = deadline, rec, -1, cfg.renewGap(sent, deadline)
	l.sentAt, l.rtt = sent.Sub(s.m.started), recv.Sub(sent)
	l.renewAt = cfg.renewAt(sent, deadline, s.m.started, s.m.batch != nil, l.gap)
	l.due = l.renewAt.Sub(s.m.started)
	l.mu.Lock()
	s.m.timers.schedule(l, l.nextEvent())
	l.mu.Unlock()
	return l
}

// Name returns the lock name.
func (l *Lease) Name() string { return l.name }

// Token returns the fencing token of this grant. It is strictly greater
// than the token of every earlier grant of the lock and stays the same
// across renewals.
func (l *Lease) Token() uint64 { return l.token }

// Owner returns the grant as last confirmed by the store.
func (l *Lease) Owner() Owner {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ownerOf(l.name, l.rec)
}

// Done returns a channel that is closed when the lease ends: lost, or
// released.
func (l *Lease) Done() <-chan struct{} {
	l.cmu.Lock()
	if l.ctx == nil && l.cause != nil {
		l.cmu.Unlock()
		return closedCh
	}
	l.cmu.Unlock()
	return l.Context().Done()
}

// Context returns a context that is cancelled when the lease ends. Its
// cause ([context.Cause]) is [ErrLost] or [ErrReleased].
func (l *Lease) Context() context.Context {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if l.ctx == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		if l.cause != nil { // ended before anyone asked
			cancel(l.cause)
		} else {
			l.cancelFn = cancel
		}
		l.ctx = ctx
	}
	return l.ctx
}

// cancel ends the lease's context with cause, unless it has ended: the
// context Context handed out, or the one it will hand out.
func (l *Lease) cancel(cause error) {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if l.cause != nil {
		return
	}
	l.cause = cause
	if l.cancelFn != nil {
		l.cancelFn(cause)
		l.cancelFn = nil
	}
}

// lapsed turns the cause ErrReleased into ErrLost, unless the lease's
// context was made (it told ErrReleased already), and reports whether it
// did: the release found the grant lapsed.
func (l *Lease) lapsed() bool {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if l.ctx != nil || l.cause != ErrReleased {
		return false
	}
	l.cause = ErrLost
	return true
}

// Err returns nil while the lease is held, then [ErrLost] or [ErrReleased].
func (l *Lease) Err() error {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	return l.cause
}

// contextMade reports whether Context has handed out the lease's context.
func (l *Lease) contextMade() bool {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	return l.ctx != nil
}

// Held reports whether the lease is still held: not ended, and its local
// deadline not passed.
func (l *Lease) Held() bool {
	if l.Err() != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.m.cfg.clock.Now().Before(l.deadline)
}

// Deadline returns the instant, on the Manager's clock, at which the lease
// will be considered lost unless a renewal is confirmed before.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Release ends the lease and releases the grant on the store, waking the
// next waiter. The lease's context is cancelled before the store is asked,
// so the holder stops believing before anyone else can be granted.
//
// Release is idempotent: once it has succeeded, later calls return nil. If
// the lease had been lost before Release was called, it returns an error
// wrapping [ErrLost]: the work done under it may not have been exclusive.
// That includes a lease whose deadline had passed, even if the Manager had
// not yet noticed and the store still had the grant (which Release then
// gives back all the same), and one whose store answered, only after the
// deadline, that the grant was gone (the process stalled while the release
// was on its way, and the grant lapsed), unless the lease's context had
// been made: that context already told [ErrReleased].
// If the store call fails, the grant lapses by itself after ttl +
// transition (or is released in the background), and the error says so.
// A call whose outcome is unknown (a timeout, a lost connection) is
// retried while the lease's deadline lasts; a retry that finds the grant
// already ended before that deadline counts as the release (the earlier
// attempt ended it and its reply was lost), so Release returns nil.
func (l *Lease) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	rctx, done := l.releaseContext(ctx)
	err := l.stop(rctx)
	done()
	if errors.Is(err, rctx.Err()) && rctx.Err() != nil {
		return fmt.Errorf("lease: release %q: %w", l.name, rctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	if errors.Is(l.Err(), ErrLost) {
		return fmt.Errorf("lease: release %q: %w", l.name, ErrLost)
	}
	if l.result != nil {
		return fmt.Errorf("lease: release %q: %w", l.name, l.result)
	}
	l.released = true
	return nil
}

// releaseContext returns the context a Release under ctx runs with: ctx,
// except that an end of ctx caused by the end of l itself does not stop
// the release. A callback's natural context is the lease's own (or one
// derived from it), and the release cancels that before it asks the store;
// obeying it would fail every such release and leave the grant to lapse.
// ctx's deadline, values and any other cancellation still bound the call.
// done releases what the returned context holds. A ctx that cannot end,
// or that cannot derive from l's context because l never made it, is
// used as it is.
func (l *Lease) releaseContext(ctx context.Context) (rctx context.Context, done func()) {
	if ctx.Done() == nil || !l.contextMade() {
		return ctx, func() {}
	}
	if ctx.Err() != nil && !l.endedBy(ctx) {
		return ctx, func() {}
	}
	c, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	rctx = c
	cancelDeadline := context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		rctx, cancelDeadline = context.WithDeadline(c, d)
	}
	stop := context.AfterFunc(ctx, func() {
		if !l.endedBy(ctx) {
			cancel(context.Cause(ctx))
		}
	})
	return rctx, func() {
		stop()
		cancelDeadline()
		cancel(nil)
	}
}

// endedBy reports whether ctx ended because l did: l's context is done
// and ctx carries the same cause (a context derived from l's).
func (l *Lease) endedBy(ctx context.Context) bool {
	lc := l.Err()
	if lc == nil {
		return false
	}
	c := context.Cause(ctx)
	return c != nil && c == lc && ctx.Err() == context.Canceled
}

// stop releases the lease if it is held (or draining), or waits, bounded
// by ctx, for the release another goroutine makes. It returns the outcome
// of the server-side end, or ctx's error.
func (l *Lease) stop(ctx context.Context) error {
	l.mu.Lock()
	switch l.state {
	case leaseHeld, leaseDraining:
		l.state = leaseEnding
		late := !l.s.m.cfg.clock.Now().Before(l.deadline)
		l.s.m.timers.unschedule(l)
		l.mu.Unlock()
		return l.s.releaseLease(ctx, l, late)
	case leaseEnding:
		ch := l.stoppedCh()
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	return l.result
}

// stoppedCh returns a channel closed once the lease has ended. l.mu is
// held.
func (l *Lease) stoppedCh() chan struct{} {
	if l.stopped == nil {
		if l.state == leaseEnded {
			return closedCh
		}
		l.stopped = make(chan struct{})
	}
	return l.stopped
}

// ended marks the lease ended with the outcome of its server-side end.
// l.mu is held.
func (l *Lease) ended(result error) {
	l.state, l.result = leaseEnded, result
	if l.stopped != nil {
		close(l.stopped)
	}
}

// drain cancels the lease's context for a Contender that winds down, and
// keeps renewing it until its release.
func (l *Lease) drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == leaseHeld {
		l.state = leaseDraining
		l.cancel(ErrReleased)
	}
}
