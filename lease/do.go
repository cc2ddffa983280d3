package lease

import (
	"context"
	"errors"
	"fmt"
)

// Do acquires the lock name (waiting as [Manager.Acquire] does), runs fn
// while the lease is held, and releases it when fn returns, in one call:
// the acquire, deferred release and watch of the lease's context that a
// caller would otherwise write by hand.
//
// fn gets a context that is cancelled when ctx ends or the lease ends (lost,
// or released by fn itself), whichever comes first; context.Cause tells
// which ([ErrLost] for a loss). It also gets the Lease, whose Token is the
// fencing token to pass to every resource fn writes to. fn must stop when
// its context is cancelled: from then on, another contender may be granted
// the lock once the store's grant could have lapsed.
//
// Do returns fn's error joined with an error wrapping [ErrLost] when the
// lease was lost before fn returned (the work may not have been exclusive:
// errors.Is(err, ErrLost) tells). When the lock could not be acquired, fn
// is not run and Do returns Acquire's error. A release that fails after fn
// returned is not an error of fn's work: the grant lapses by itself, the
// Manager logs it, and Do returns fn's error alone.
func (m *Manager) Do(ctx context.Context, name string, fn func(ctx context.Context, l *Lease) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	l, err := m.Acquire(ctx, name)
	if err != nil {
		return err
	}
	return run(ctx, l, fn)
}

// TryDo is [Manager.Do] with one attempt to acquire, as
// [Manager.TryAcquire]: when someone else holds the lock, fn is not run
// and TryDo returns an error wrapping [ErrNotAcquired].
func (m *Manager) TryDo(ctx context.Context, name string, fn func(ctx context.Context, l *Lease) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	l, err := m.TryAcquire(ctx, name)
	if err != nil {
		return err
	}
	return run(ctx, l, fn)
}

// run runs fn under l and ctx, then releases l.
func run(ctx context.Context, l *Lease, fn func(context.Context, *Lease) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	err := callFn(fctx, l, fn)
	stop()
	cancel(nil)
	// The release runs even when ctx has ended (with its values, bounded
	// by the Manager's call timeout).
	if rerr := l.Release(context.WithoutCancel(ctx)); errors.Is(rerr, ErrLost) {
		err = errors.Join(err, fmt.Errorf("lease: %q was lost while the function ran: %w", l.name, ErrLost))
	}
	return err
}

// callFn calls fn, releasing the lease if fn panics before the panic
// goes on: a panicking holder must not keep the lock until its grant
// lapses.
func callFn(ctx context.Context, l *Lease, fn func(context.Context, *Lease) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			_ = l.Release(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	return fn(ctx, l)
}
