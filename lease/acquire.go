package lease

import (
	"context"
	"errors"
	"fmt"
)

// Acquire blocks until this Manager holds the mutex name for the caller,
// then returns the held Lease. Waiters of one Manager are served in order.
//
// When ctx ends first, Acquire returns an error that wraps both
// [ErrNotAcquired] and ctx.Err(). After Close it returns [ErrClosed].
func (m *Manager) Acquire(ctx context.Context, name string) (*Lease, error) {
	return m.claimLease(ctx, name, claimAcquire)
}

// TryAcquire makes one attempt to acquire the mutex name. When someone
// else holds it (another process, or another goroutine of this Manager, or
// when goroutines of this Manager already wait for it), it returns an error
// wrapping [ErrNotAcquired]. Other errors mean the store could not be asked;
// the outcome is then cleaned up in the background.
func (m *Manager) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return m.claimLease(ctx, name, claimTry)
}

func (m *Manager) claimLease(ctx context.Context, name string, kind claimKind) (*Lease, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(ErrNotAcquired, err)
	}
	c := newClaim(kind)
	s, err := m.enqueue(name, c)
	if err != nil {
		return nil, err
	}
	return s.waitClaim(ctx, c)
}

// enqueue adds c to the local queue of name, making sure a worker serves
// it.
func (m *Manager) enqueue(name string, c *claim) (*slot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	m.sweep()
	s := m.slotLocked(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.kind == claimTry && (s.lease != nil || len(s.claims) > 0 || s.acquiring) {
		return nil, fmt.Errorf("%w: %q is held or awaited by this manager", ErrNotAcquired, name)
	}
	s.add(c)
	return s, nil
}

// slotLocked returns the slot of name, making it if needed; a new slot
// starts by refusing a grant an earlier one could not release. m.mu is
// held.
func (m *Manager) slotLocked(name string) *slot {
	s := m.slots[name]
	if s == nil {
		s = &slot{m: m, name: name}
		s.p.lostToken = m.refusedLocked(name)
		m.slots[name] = s
	}
	return s
}

// waitClaim waits for c to be granted or failed, or for ctx to end.
func (s *slot) waitClaim(ctx context.Context, c *claim) (*Lease, error) {
	select {
	case l := <-c.lease:
		return l, nil
	case err := <-c.fail:
		return nil, err
	case <-ctx.Done():
	}
	if s.cancel(c) {
		return nil, errors.Join(ErrNotAcquired, ctx.Err())
	}
	// Granted (or failed) at the same moment: give a grant straight back.
	select {
	case l := <-c.lease:
		_ = l.stop(context.Background())
	case <-c.fail:
	}
	return nil, errors.Join(ErrNotAcquired, ctx.Err())
}
