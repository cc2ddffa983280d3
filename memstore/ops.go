package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/lease"
)

// The operations of the lease.Store port. Each one validates its input,
// passes the fault hook (see SetFault), then runs as one atomic step under
// the Store's lock on the server clock.

// Acquire grants lock to contender when it is free (and not reserved for
// another waiter), when the previous grant's transition has ended, or when
// contender already holds the live grant; then the grant runs for ttl, then
// for transition. A new grant gets the lock's next fencing token, even when
// it goes to the contender whose earlier grant ended; extending a live grant
// keeps the token. A losing contender joins the wait queue. Losing is not an
// error: the caller holds the lock exactly when the returned Record's Owner
// is contender.
func (s *Store) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	if err := lease.ValidateRequest(name, contender, ttl, transition); err != nil {
		return lease.Record{}, fmt.Errorf("memstore: acquire %q: %w", name, err)
	}
	lost, err := s.enter(ctx, OpAcquire, target{name, contender})
	if err != nil {
		return lease.Record{}, err
	}
	var rec lease.Record
	s.do(name, true, func(m *mutexState, now time.Time) {
		switch {
		case m.owner == contender:
			m.extend(now, ttl, transition)
		case m.owner == "" && m.mayTake(contender):
			m.grant(contender, now, ttl, transition)
			m.dequeue(contender)
			m.reserved = ""
			s.granted(m)
		default:
			m.enqueue(contender, now, ttl, transition)
		}
		rec = m.record(now)
	})
	if lost {
		return lease.Record{}, injected(OpAcquire, name, FaultLoseReply)
	}
	return rec, nil
}

// Renew extends the grant of contender with token by ttl, then transition,
// from the server's now, keeping the token. It fails with an error wrapping
// [lease.ErrNotHeld], and returns the current record, when that grant is not
// the current one or its transition has ended; it never re-acquires.
func (s *Store) Renew(ctx context.Context, name, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	if err := lease.ValidateRequest(name, contender, ttl, transition); err != nil {
		return lease.Record{}, fmt.Errorf("memstore: renew %q: %w", name, err)
	}
	lost, err := s.enter(ctx, OpRenew, target{name, contender})
	if err != nil {
		return lease.Record{}, err
	}
	var rec lease.Record
	s.do(name, false, func(m *mutexState, now time.Time) {
		rec, err = m.renew(name, contender, token, ttl, transition, now)
	})
	if lost {
		return lease.Record{}, injected(OpRenew, name, FaultLoseReply)
	}
	return rec, err
}

// renew is one Renew on settled state (nil: an unknown lock). s.mu is
// held.
func (m *mutexState) renew(name, contender string, token uint64, ttl, transition time.Duration, now time.Time) (lease.Record, error) {
	if m == nil || m.owner != contender || m.token != token {
		return m.record(now), fmt.Errorf("memstore: renew %q: %w", name, lease.ErrNotHeld)
	}
	m.extend(now, ttl, transition)
	return m.record(now), nil
}

// RenewMany renews each request as [Store.Renew] would, in one step that
// counts as one round trip, and returns one result per request in order. An
// invalid request gets its own error; the batch error is for faults and a
// done context, when nothing is known about any request.
func (s *Store) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	results := make([]lease.RenewResult, len(reqs))
	targets := make([]target, len(reqs))
	for i, r := range reqs {
		if err := lease.ValidateRequest(r.Name, r.Contender, r.TTL, r.Transition); err != nil {
			results[i].Err = fmt.Errorf("memstore: renew %q: %w", r.Name, err)
		}
		targets[i] = target{r.Name, r.Contender}
	}
	lost, err := s.enter(ctx, OpRenewMany, targets...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	now := s.clock()
	for i, r := range reqs {
		if results[i].Err != nil {
			continue
		}
		s.apply(r.Name, false, now, func(m *mutexState, now time.Time) {
			results[i].Record, results[i].Err = m.renew(r.Name, r.Contender, r.Token, r.TTL, r.Transition, now)
		})
	}
	s.mu.Unlock()
	if lost {
		return nil, injected(OpRenewMany, "", FaultLoseReply)
	}
	return results, nil
}

// Release ends contender's interest in lock. When contender holds the
// current grant with token, the lock is freed at once, observers are told,
// and the longest live waiter is woken and gets the hand-off window (see
// [WithHandoff]). Otherwise it returns an error wrapping [lease.ErrNotHeld]
// and leaves the owner alone; token 0, never a valid token, always takes
// this path and so only withdraws from the queue. In both cases contender's
// wait-queue entry is removed.
func (s *Store) Release(ctx context.Context, name, contender string, token uint64) error {
	if err := checkNameContender(name, contender); err != nil {
		return fmt.Errorf("memstore: release %q: %w", name, err)
	}
	lost, err := s.enter(ctx, OpRelease, target{name, contender})
	if err != nil {
		return err
	}
	s.do(name, false, func(m *mutexState, now time.Time) {
		if m == nil {
			err = fmt.Errorf("memstore: release %q: %w", name, lease.ErrNotHeld)
			return
		}
		m.dequeue(contender)
		if token != 0 && m.owner == contender && m.token == token {
			m.free()
			s.released(m, now)
			return
		}
		s.settleReservation(m, now) // contender may have been the reserved waiter
		err = fmt.Errorf("memstore: release %q: %w", name, lease.ErrNotHeld)
	})
	if lost {
		return injected(OpRelease, name, FaultLoseReply)
	}
	return err
}

// Get returns the current record of lock without changing it. A free or
// unknown lock has an empty Owner; a free lock held back for a waiter has
// a positive Transition (the rest of the hand-off window).
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	if err := lease.ValidateName(name); err != nil {
		return lease.Record{}, fmt.Errorf("memstore: get: %w", err)
	}
	lost, err := s.enter(ctx, OpGet, target{name, ""})
	if err != nil {
		return lease.Record{}, err
	}
	var rec lease.Record
	s.do(name, false, func(m *mutexState, now time.Time) { rec = m.record(now) })
	if lost {
		return lease.Record{}, injected(OpGet, name, FaultLoseReply)
	}
	return rec, nil
}

// checkNameContender validates a lock name and a contender id.
func checkNameContender(name, contender string) error {
	if err := lease.ValidateName(name); err != nil {
		return err
	}
	return lease.ValidateContenderID(contender)
}
