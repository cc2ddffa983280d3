package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/lease"
)

// The fair wait queue.
//
// A contender whose Acquire loses joins the tail of the lock's queue; a
// later losing Acquire refreshes its entry's expiry but keeps its place. An
// entry expires 2 × (ttl + transition) of the contender's latest request
// after that request, so a crashed waiter stops absorbing wake-ups. The
// winner of a grant leaves the queue, and Release by a contender removes its
// entry whatever the token.
//
// When a Release frees the lock, the longest live waiter (the head) is
// woken through Watch and, unless the hand-off is disabled, the lock is
// reserved for it for one window (see WithHandoff): during the window only
// its Acquire succeeds; anyone else gets an empty Owner with Transition set
// to what is left of the window, and is queued. A head that does not come in
// time, or withdraws, leaves the queue, and the next live waiter is reserved
// and woken in turn.
//
// When a grant's transition simply ends (its holder crashed or stopped
// renewing), nothing is reserved and nobody is woken: every waiter polls at
// the owner's transition end anyway, and the first Acquire after it wins.
// Holding the lock back there would lengthen the takeover bound (ttl +
// transition + jitter + one poll) by a window per crashed waiter.

// waiter is one wait-queue entry.
type waiter struct {
	contender string
	expiresAt time.Time     // server clock
	span      time.Duration // ttl + transition of its latest request
}

// enqueue adds contender at the tail of the queue, or refreshes the expiry
// of its entry without moving it.
func (m *mutexState) enqueue(contender string, now time.Time, ttl, transition time.Duration) {
	span := addSat(ttl, transition)
	expiresAt := now.Add(addSat(span, span))
	if i := m.waiterIndex(contender); i >= 0 {
		m.queue[i].expiresAt, m.queue[i].span = expiresAt, span
		return
	}
	m.queue = append(m.queue, waiter{contender: contender, expiresAt: expiresAt, span: span})
}

// dequeue removes contender's entry, if any.
func (m *mutexState) dequeue(contender string) {
	if i := m.waiterIndex(contender); i >= 0 {
		m.queue = append(m.queue[:i], m.queue[i+1:]...)
	}
}

// waiterIndex is the position of contender in the queue, or -1.
func (m *mutexState) waiterIndex(contender string) int {
	for i, w := range m.queue {
		if w.contender == contender {
			return i
		}
	}
	return -1
}

// pruneQueue drops expired entries.
func (m *mutexState) pruneQueue(now time.Time) {
	live := m.queue[:0]
	for _, w := range m.queue {
		if now.Before(w.expiresAt) {
			live = append(live, w)
		}
	}
	clear(m.queue[len(live):])
	m.queue = live
}

// mayTake reports whether contender may take the free lock now: there is
// no reservation, or it is the reserved waiter.
func (m *mutexState) mayTake(contender string) bool {
	return m.reserved == "" || m.reserved == contender
}

// handOff runs when a Release freed the lock: it reserves the lock for the
// head of the queue and wakes it. The queue has been pruned.
func (s *Store) handOff(m *mutexState, now time.Time) {
	m.reserved = ""
	if len(m.queue) == 0 {
		return
	}
	head := m.queue[0]
	if s.handoff > 0 {
		m.reserved = head.contender
		m.reservedUntil = now.Add(min(s.handoff, head.span))
	}
	s.notify(head.contender, lease.Event{Name: m.name})
}

// settleReservation ends a reservation whose window has passed or whose
// waiter left the queue, and hands the lock to the next live waiter. The
// queue has been pruned, so the loop ends: each lapse removes an entry.
func (s *Store) settleReservation(m *mutexState, now time.Time) {
	for m.reserved != "" {
		if m.owner != "" { // cannot happen: a grant clears the reservation
			m.reserved = ""
			return
		}
		i := m.waiterIndex(m.reserved)
		if i >= 0 && now.Before(m.reservedUntil) {
			return
		}
		if i >= 0 {
			m.queue = append(m.queue[:i], m.queue[i+1:]...) // a no-show
		}
		s.handOff(m, now)
	}
}

// Push notifications ([lease.Watcher]).
//
// A waiter subscribes with its contender id and hears only about its own
// turn: the Release that makes it the head of the queue, or the lapse of the
// reservation before it. Other waiters hear nothing, so a release wakes one
// waiter, not the herd. An observer (contender "") hears every change of
// owner: each new grant and each Release. A grant's transition ending is
// not announced; waiters poll for it, as the protocol requires.
//
// Each subscription has its own channel with a buffer of one. A send never
// blocks: when the buffer is full the event is dropped, which loses nothing
// a waiter needs, since it still holds an unread event that makes it try
// again. The channel is closed, and the subscription removed, when the
// Watch context ends; no goroutine waits for that in between.

// subscriber is one Watch subscription.
type subscriber struct {
	contender string // "" for an observer
	ch        chan lease.Event
}

// Watch subscribes to events of lock for contender, or for every change of
// owner when contender is "". The channel has a buffer of one, drops events
// the receiver has no room for, and is closed when ctx ends. A subscription
// does not enqueue the contender: only a losing Acquire does.
func (s *Store) Watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, fmt.Errorf("memstore: watch: %w", err)
	}
	if contender != "" {
		if err := lease.ValidateContenderID(contender); err != nil {
			return nil, fmt.Errorf("memstore: watch %q: %w", name, err)
		}
	}
	lost, err := s.enter(ctx, OpWatch, target{name, contender})
	if err != nil {
		return nil, err
	}
	sub := &subscriber{contender: contender, ch: make(chan lease.Event, 1)}
	s.mu.Lock()
	subs := s.subs[name]
	if subs == nil {
		subs = make(map[*subscriber]struct{})
		s.subs[name] = subs
	}
	subs[sub] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		subs := s.subs[name] // the same map: it holds sub until now
		delete(subs, sub)
		if len(subs) == 0 {
			delete(s.subs, name)
		}
		close(sub.ch)
	})
	if lost {
		return nil, injected(OpWatch, name, FaultLoseReply)
	}
	return sub.ch, nil
}

// notify sends ev to the subscriptions of contender to ev's lock without
// blocking. s.mu is held.
func (s *Store) notify(contender string, ev lease.Event) {
	for sub := range s.subs[ev.Name] {
		if sub.contender == contender {
			sub.send(ev)
		}
	}
}

// send delivers ev unless the buffer is full.
func (sub *subscriber) send(ev lease.Event) {
	select {
	case sub.ch <- ev:
	default:
	}
}

// released announces a Release: to observers, and to the new head of the
// queue through the hand-off.
func (s *Store) released(m *mutexState, now time.Time) {
	s.notify("", lease.Event{Name: m.name})
	s.handOff(m, now)
}

// granted announces a new grant to observers.
func (s *Store) granted(m *mutexState) {
	s.notify("", lease.Event{Name: m.name, OwnerID: m.owner, Token: m.token})
}
