package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Owner describes who holds a mutex, as the store's server saw it.
type Owner struct {
	// Mutex is the mutex name.
	Mutex string
	// ID is the owner's contender id, or "" when the mutex is free.
	ID string
	// Token is the fencing token of the owner's grant (0 when free).
	Token uint64
	// TTL and Transition are the times that were left of the grant's ttl
	// and transition when it was observed, on the server's clock.
	TTL, Transition time.Duration
}

// Free reports whether no one held the mutex.
func (o Owner) Free() bool { return o.ID == "" }

func ownerOf(name string, rec Record) Owner {
	return Owner{Mutex: name, ID: rec.Owner, Token: rec.Token, TTL: rec.TTL, Transition: rec.Transition}
}

// A Lease is a held grant of a mutex. It stays held until it is released,
// or until its local deadline passes without a confirmed renewal; then Done
// closes and Context is cancelled, before the store could grant the mutex to
// anyone else (see the package documentation for the exact bound).
//
// Pass Token to every resource you write to under the lease, so that the
// resource can reject writes of a holder that was paused past its deadline.
//
// A Lease is safe for concurrent use.
type Lease struct {
	name    string
	owner   string
	token   uint64
	clock   Clock
	ctx     context.Context
	cancel  context.CancelCauseFunc
	ends    chan endRequest // to the goroutine that renews this lease
	stopped chan struct{}   // closed when that goroutine is done with it

	mu       sync.Mutex
	deadline time.Time
	rec      Record // last record confirmed by the store
	result   error  // outcome of the server-side end, once stopped
	released bool   // Release has succeeded once
}

// endRequest asks the renewing goroutine to end the lease.
type endRequest struct {
	// release the grant on the server; otherwise keep renewing it
	// (draining) until a later request says what to do.
	release bool
	// abandon stops renewing without a server-side release: the grant
	// lapses by itself.
	abandon bool
}

func newLease(name, owner string, rec Record, deadline time.Time, clock Clock) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lease{
		name: name, owner: owner, token: rec.Token, clock: clock,
		ctx: ctx, cancel: cancel,
		ends: make(chan endRequest), stopped: make(chan struct{}),
		deadline: deadline, rec: rec,
	}
}

// Name returns the mutex name.
func (l *Lease) Name() string { return l.name }

// Token returns the fencing token of this grant. It is strictly greater
// than the token of every earlier grant of the mutex and stays the same
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
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Context returns a context that is cancelled when the lease ends. Its
// cause ([context.Cause]) is [ErrLost] or [ErrReleased].
func (l *Lease) Context() context.Context { return l.ctx }

// Err returns nil while the lease is held, then [ErrLost] or [ErrReleased].
func (l *Lease) Err() error { return context.Cause(l.ctx) }

// Held reports whether the lease is still held: not ended, and its local
// deadline not passed.
func (l *Lease) Held() bool {
	if l.ctx.Err() != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.clock.Now().Before(l.deadline)
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
// If the store call fails, the grant lapses by itself after ttl +
// transition, and the error says so.
func (l *Lease) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	select {
	case l.ends <- endRequest{release: true}:
	case <-l.stopped:
	case <-ctx.Done():
		return fmt.Errorf("lease: release %q: %w", l.name, ctx.Err())
	}
	select {
	case <-l.stopped:
	case <-ctx.Done():
		return fmt.Errorf("lease: release %q: %w", l.name, ctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	if errors.Is(context.Cause(l.ctx), ErrLost) {
		return fmt.Errorf("lease: release %q: %w", l.name, ErrLost)
	}
	if l.result != nil {
		return fmt.Errorf("lease: release %q: %w", l.name, l.result)
	}
	l.released = true
	return nil
}

// end asks the renewing goroutine to end the lease, unless it already
// stopped. It does not wait for the server-side outcome.
func (l *Lease) end(ctx context.Context, req endRequest) bool {
	select {
	case l.ends <- req:
		return true
	case <-l.stopped:
		return false
	case <-ctx.Done():
		return false
	}
}

// confirm records a renewal confirmed by the store.
func (l *Lease) confirm(rec Record, deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = rec
	if deadline.After(l.deadline) {
		l.deadline = deadline
	}
}

// finish records the server-side outcome and marks the lease stopped.
func (l *Lease) finish(result error) {
	l.mu.Lock()
	l.result = result
	l.mu.Unlock()
	close(l.stopped)
}
