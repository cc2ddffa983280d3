package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/lease"
)

// Test hooks: injected faults, call counts and a look inside a lock. None
// of them is part of the lease.Store port.

// ErrInjected is wrapped by every error a [Fault] makes a call return.
var ErrInjected = errors.New("memstore: injected fault")

// Op names a Store operation, as seen by a fault function.
type Op string

// The operations a fault function can intercept.
const (
	OpAcquire   Op = "acquire"
	OpRenew     Op = "renew"
	OpRenewMany Op = "renewMany"
	OpRelease   Op = "release"
	OpGet       Op = "get"
	OpWatch     Op = "watch"
)

// Fault is what an intercepted call does instead of, or besides, its work.
type Fault int

// The faults. An unknown Fault value acts as FaultFail.
const (
	// FaultNone lets the call run normally.
	FaultNone Fault = iota
	// FaultHang blocks the call, ignoring its context, until the fault
	// function is replaced by SetFault, FailContender or Heal. The call then
	// asks the new fault function and, if let through, runs late, like a
	// request that was stuck on the network: a late Renew is refused, a late
	// Acquire may grant. It proves a caller's deadline fires even when a
	// store call never returns.
	FaultHang
	// FaultHangCtx blocks the call until its context ends and returns an
	// error wrapping ctx.Err(), without applying the operation.
	FaultHangCtx
	// FaultFail returns an error wrapping ErrInjected without applying the
	// operation.
	FaultFail
	// FaultLoseReply applies the operation, then returns an error wrapping
	// ErrInjected and a zero result, as if the reply was lost.
	FaultLoseReply
)

// String returns the fault's name.
func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultHang:
		return "hang"
	case FaultHangCtx:
		return "hang until ctx ends"
	case FaultFail:
		return "fail"
	case FaultLoseReply:
		return "lost reply"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// SetFault installs f, which every later call consults before it runs; nil
// removes it. f gets the operation, the lock and the contender ("" for Get
// and observer Watches). RenewMany asks f once per request (once with empty
// names for an empty batch), and the first answer other than FaultNone
// applies to the whole batch, which is one round trip. f runs without the
// Store's lock, possibly concurrently; it must not block.
//
// Replacing the fault function releases every call hung by FaultHang.
func (s *Store) SetFault(f func(op Op, name, contender string) Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
	if s.hangCh != nil {
		close(s.hangCh)
		s.hangCh = nil
	}
}

// Heal removes the fault function and releases every hung call, which then
// run normally. Tests that use FaultHang should defer it.
func (s *Store) Heal() { s.SetFault(nil) }

// FailContender makes every operation of contender id suffer fault, and a
// RenewMany suffer it when any of its requests is id's. It replaces any
// earlier fault function.
func (s *Store) FailContender(id string, fault Fault) {
	s.SetFault(func(_ Op, _, contender string) Fault {
		if contender == id {
			return fault
		}
		return FaultNone
	})
}

// target is the lock and contender of a call or of one batch request.
type target struct{ mutex, contender string }

// enter is the start of every operation after validation: it counts the
// call, refuses a done context, and applies the fault function. It reports
// whether the reply must be lost after the operation is applied, or the
// error the call returns without applying anything.
func (s *Store) enter(ctx context.Context, op Op, targets ...target) (loseReply bool, err error) {
	name := ""
	if len(targets) == 1 {
		name = targets[0].mutex
	}
	if ctx == nil {
		return false, fmt.Errorf("%s: nil context: %w", prefix(op, name), lease.ErrInvalidArgument)
	}
	s.mu.Lock()
	s.stats.count(op)
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%s: %w", prefix(op, name), err)
	}
	if len(targets) == 0 {
		targets = []target{{}}
	}
	for {
		s.mu.Lock()
		f := s.fault
		if f != nil && s.hangCh == nil {
			s.hangCh = make(chan struct{})
		}
		hang := s.hangCh
		s.mu.Unlock()

		fault := FaultNone
		for _, t := range targets {
			if f == nil || fault != FaultNone {
				break
			}
			fault = f(op, t.mutex, t.contender)
		}
		switch fault {
		case FaultNone:
			return false, nil
		case FaultLoseReply:
			return true, nil
		case FaultHang:
			<-hang // closed when f is replaced; then ask again
		case FaultHangCtx:
			<-ctx.Done()
			return false, fmt.Errorf("%s: %w", prefix(op, name), ctx.Err())
		default:
			return false, injected(op, name, fault)
		}
	}
}

// injected is the error of an injected fault.
func injected(op Op, name string, fault Fault) error {
	return fmt.Errorf("%s: %v: %w", prefix(op, name), fault, ErrInjected)
}

// prefix starts an error message about op on lock ("" for a batch).
func prefix(op Op, name string) string {
	if name == "" {
		return "memstore: " + string(op)
	}
	return fmt.Sprintf("memstore: %s %q", op, name)
}

// Stats, ResetStats, Inspect and Locks are back doors: they count as no
// call and do not pass the fault hook.

// Stats counts calls per operation, one per round trip: a call is counted
// once its input is valid, whether or not a fault then fails it. A
// RenewMany counts once in RenewMany, however many requests it carries.
type Stats struct {
	Acquire   int
	Renew     int
	RenewMany int
	Release   int
	Get       int
	Watch     int
}

// Total is the number of round trips of all operations.
func (st Stats) Total() int {
	return st.Acquire + st.Renew + st.RenewMany + st.Release + st.Get + st.Watch
}

// count adds one call of op.
func (st *Stats) count(op Op) {
	switch op {
	case OpAcquire:
		st.Acquire++
	case OpRenew:
		st.Renew++
	case OpRenewMany:
		st.RenewMany++
	case OpRelease:
		st.Release++
	case OpGet:
		st.Get++
	case OpWatch:
		st.Watch++
	}
}

// Stats returns the call counts since New or the last ResetStats.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// ResetStats sets every call count to zero.
func (s *Store) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = Stats{}
}

// State is a snapshot of one lock's server-side state, for invariant checks
// such as "no orphans": after every contender is gone and its ttl and
// transition have passed, Owner is "" and Queue is empty.
type State struct {
	// Owner and Token describe the live grant; both are zero when the
	// lock is free.
	Owner string
	Token uint64
	// Counter is the highest token ever granted for the lock (0 if none);
	// its next grant's token is greater. It never goes down, not even on
	// release; for a lock the Store forgot (see [WithRetention]) it is the
	// store-wide high-water mark, at least the lock's own last token.
	Counter uint64
	// TTL and Transition are what a Record would report now.
	TTL, Transition time.Duration
	// Queue lists the live waiters, longest waiting first.
	Queue []string
	// Reserved is the waiter a freed lock is held back for, or "".
	Reserved string
	// Watchers is the number of open Watch subscriptions, waiters' and
	// observers' together.
	Watchers int
}

// Inspect returns the state of lock as the server sees it now, after
// ending what the clock has ended (grants, queue entries, reservations). An
// unknown or forgotten lock is free with an empty queue. The name is not
// validated.
func (s *Store) Inspect(name string) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mutexes[name]
	if m == nil {
		// Unknown or forgotten: its next grant's token exceeds the floor.
		return State{Counter: s.floor, Watchers: len(s.subs[name])}
	}
	now := s.clock()
	s.settle(m, now)
	s.arm(m, now)
	rec := m.record(now)
	st := State{
		Owner:      m.owner,
		Token:      m.token,
		Counter:    m.counter,
		TTL:        rec.TTL,
		Transition: rec.Transition,
		Reserved:   m.reserved,
		Watchers:   len(s.subs[name]),
	}
	for _, w := range m.queue {
		st.Queue = append(st.Queue, w.contender)
	}
	return st
}

// Locks returns the names of every lock the Store has state for, sorted:
// held, with waiters, or used within the retention (see [WithRetention]).
// Reading or watching a lock creates no state.
func (s *Store) Mutexes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.mutexes))
	for name := range s.mutexes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
