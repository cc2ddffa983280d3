// Package memstore is an in-process [lease.Store] for tests and
// single-process use.
//
// It keeps the whole Store contract, including the optional [lease.Watcher]
// and [lease.BatchRenewer] capabilities, a fair wait queue with a hand-off
// reservation, and fencing tokens that only grow. All state lives in memory:
// it is not shared between processes and does not survive the Store value,
// so it is no substitute for a real backend across processes.
//
// Fairness: a losing Acquire queues its contender (FIFO, kept for
// 2 × (ttl + transition) after its latest Acquire). A Release wakes only the
// longest live waiter and holds the lock for it for a short hand-off window
// ([WithHandoff]). When a grant's transition simply ends, nothing is held
// back and nobody is woken: waiters poll at that time anyway, and the first
// Acquire after it wins, which keeps the takeover bound after a crash at
// ttl + transition plus the caller's jitter and poll.
//
// State stays bounded however many names are used: reading or watching a
// lock creates no state, and the state of a free lock with nobody queued
// is forgotten after a retention ([WithRetention]). Its fencing counter is
// not lost: a lock used again after being forgotten counts on from a
// store-wide high-water mark, above every token any forgotten lock had.
//
// For tests it adds what a real backend cannot offer: a replaceable server
// clock ([WithClock], [Store.StepClock]), injected faults ([Store.SetFault],
// [Store.FailContender], [Store.Heal]), per-operation call counts
// ([Store.Stats]) and a look at a lock's internal state ([Store.Inspect]).
//
// The Store starts no goroutine when it is made. It uses the time package
// (time.Now, time.AfterFunc), so it works inside a testing/synctest bubble;
// create it inside the bubble that uses it. The only goroutines it causes are
// short-lived timer and context callbacks, none of which outlives the
// contexts and timers that start it.
package memstore

import (
	"math"
	"sync"
	"time"

	"github.com/simba-go/simba/lease"
)

// DefaultHandoff is the default hand-off window: how long a lock freed by a
// Release is held back for the longest live waiter.
const DefaultHandoff = time.Second

// DefaultRetention is how long the state of a free lock with nobody
// queued is kept after its last use by default (see [WithRetention]).
const DefaultRetention = time.Minute

// Compile-time checks that Store keeps the port and both capabilities.
var (
	_ lease.Store        = (*Store)(nil)
	_ lease.Watcher      = (*Store)(nil)
	_ lease.BatchRenewer = (*Store)(nil)
)

// Store is an in-process lease store. Make one with [New]; the zero value is
// not usable. All methods are safe for concurrent use.
type Store struct {
	now       func() time.Time // the "server" clock, before offset
	handoff   time.Duration
	retention time.Duration

	mu      sync.Mutex
	offset  time.Duration // added to now: StepClock
	mutexes map[string]*mutexState
	subs    map[string]map[*subscriber]struct{} // Watch subscriptions by lock
	floor   uint64                              // highest token of every forgotten lock
	calls   int                                 // calls since the last sweep
	swept   time.Time                           // when the last sweep ran
	stats   Stats

	fault  func(op Op, mutex, contender string) Fault
	hangCh chan struct{} // closed when fault is replaced; made lazily
}

// An Option configures a Store made by [New]. Unlike the other stores'
// options, memstore's cannot fail: every value has a meaning (a nil clock
// is time.Now, a duration <= 0 turns its feature off), so New returns no
// error and a test needs no error check to make a Store.
type Option func(*config)

// config is what the options set and [New] reads.
type config struct {
	now       func() time.Time
	handoff   time.Duration
	retention time.Duration
}

// WithClock replaces the server's clock, which decides every expiry. The
// default is time.Now. now must be safe for concurrent use; nil keeps the
// default. The hand-off timer (see [WithHandoff]) still waits on the time
// package: with a clock that does not follow it, a lapsed reservation is
// noticed at the next call on that lock instead.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithHandoff sets the hand-off window (default [DefaultHandoff]). When a
// Release frees a lock that has live waiters, only the longest waiter may
// take it during the window; others are told to retry when it ends. If that
// waiter does not come, it leaves the queue and the next one gets a window
// of its own and a wake-up.
//
// Each window is also capped at the waiter's own ttl + transition, so a
// crashed waiter never holds a lock back longer than its grant would have.
// Keep d well below ttl + transition, since every crashed waiter still in the
// queue delays the hand-off by up to one window. d <= 0 disables the
// reservation: a Release then only wakes the longest waiter, and whoever
// calls Acquire first wins.
func WithHandoff(d time.Duration) Option {
	return func(c *config) { c.handoff = max(d, 0) }
}

// WithRetention sets how long the state of a free lock with nobody queued
// is kept after its last use (default [DefaultRetention]); then it is
// forgotten, so that a service that locks one name per order id runs in
// bounded memory. A forgotten lock used again gets tokens above every
// token it had. d <= 0 forgets a lock as soon as it is free.
func WithRetention(d time.Duration) Option {
	return func(c *config) { c.retention = max(d, 0) }
}

// New returns an empty Store configured by opts; nil options are skipped.
func New(opts ...Option) *Store {
	c := config{now: time.Now, handoff: DefaultHandoff, retention: DefaultRetention}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	return &Store{
		now:       c.now,
		handoff:   c.handoff,
		retention: c.retention,
		mutexes:   make(map[string]*mutexState),
		subs:      make(map[string]map[*subscriber]struct{}),
	}
}

// mutexState is the server-side state of one lock. Times are on the
// server's clock and never leave the Store.
type mutexState struct {
	name string

	owner        string // "" when free
	token        uint64 // current grant's token, 0 when free
	counter      uint64 // highest token ever granted; never goes down
	ttlAt        time.Time
	transitionAt time.Time
	used         time.Time // the last call that changed or read it

	queue         []waiter // FIFO by first arrival
	reserved      string   // waiter the free lock is held back for, or ""
	reservedUntil time.Time
	timer         *time.Timer // fires when the reservation lapses
	timerAt       time.Time   // the reservedUntil timer was armed for
}

// do runs fn on the settled state of lock under the lock, then arms the
// hand-off timer for whatever reservation fn left behind. Only when create
// is set does an unknown lock get a state (counting on from the
// store-wide high-water mark); otherwise fn gets nil for it.
func (s *Store) do(name string, create bool, fn func(m *mutexState, now time.Time)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apply(name, create, s.clock(), fn)
}

// apply is do with s.mu held, at now.
func (s *Store) apply(mutex string, create bool, now time.Time, fn func(m *mutexState, now time.Time)) {
	m := s.mutexes[mutex]
	if m == nil && create {
		m = &mutexState{name: mutex, counter: s.floor}
		s.mutexes[mutex] = m
	}
	if m != nil {
		m.used = now
		s.settle(m, now)
	}
	fn(m, now)
	if m != nil {
		s.arm(m, now)
	}
	s.sweep(now)
}

// sweep forgets the locks that have been free, with nobody queued, for
// the retention. It runs once there have been as many calls since the last
// sweep as there are locks (each call pays for one lock), or a
// retention (at least a second) after the last sweep, so a name that is
// never used again goes too. Locks are created only by calls, so either
// way the cost per call stays constant. s.mu is held.
func (s *Store) sweep(now time.Time) {
	if s.calls++; s.calls < len(s.mutexes) && now.Sub(s.swept) < max(s.retention, time.Second) {
		return
	}
	s.calls, s.swept = 0, now
	for name, m := range s.mutexes {
		s.settle(m, now)
		s.arm(m, now)
		if m.owner == "" && len(m.queue) == 0 && m.reserved == "" && m.timer == nil &&
			now.Sub(m.used) >= s.retention {
			s.floor = max(s.floor, m.counter)
			delete(s.mutexes, name)
		}
	}
}

// settle brings m up to date with now: an ended grant frees the lock,
// expired waiters leave the queue, and a lapsed reservation moves on to the
// next waiter. Settling is what time does; it changes no observable outcome.
func (s *Store) settle(m *mutexState, now time.Time) {
	if m.owner != "" && !now.Before(m.transitionAt) {
		m.free()
	}
	m.pruneQueue(now)
	s.settleReservation(m, now)
}

// free ends the current grant. The fencing counter is kept.
func (m *mutexState) free() {
	m.owner, m.token = "", 0
	m.ttlAt, m.transitionAt = time.Time{}, time.Time{}
}

// grant makes contender the owner with a new token.
func (m *mutexState) grant(contender string, now time.Time, ttl, transition time.Duration) {
	m.counter++
	m.owner, m.token = contender, m.counter
	m.extend(now, ttl, transition)
}

// extend runs the current grant for ttl, then transition, from now.
func (m *mutexState) extend(now time.Time, ttl, transition time.Duration) {
	m.ttlAt = now.Add(ttl)
	m.transitionAt = now.Add(addSat(ttl, transition))
}

// record describes m at now with remaining durations and the server's
// clock reading; a nil m is an unknown lock.
func (m *mutexState) record(now time.Time) lease.Record {
	if m == nil {
		return lease.Record{ServerTime: now}
	}
	if m.owner == "" {
		var hold time.Duration
		if m.reserved != "" {
			hold = max(m.reservedUntil.Sub(now), 0)
		}
		return lease.Record{Transition: hold, ServerTime: now}
	}
	ttl := max(m.ttlAt.Sub(now), 0)
	return lease.Record{
		OwnerID:    m.owner,
		Token:      m.token,
		TTL:        ttl,
		Transition: max(m.transitionAt.Sub(now), ttl),
		ServerTime: now,
	}
}

// clock reads the server's clock: now, stepped by StepClock. s.mu is
// held.
func (s *Store) clock() time.Time { return s.now().Add(s.offset) }

// StepClock steps the server's clock by d (forward when d > 0, back when
// d < 0) from now on, as an operator or a broken time daemon stepping a
// real server's clock would: every live grant, reservation and queue entry
// keeps its expiry instant on the stepped clock, so a forward step ends
// them d early and a backward step keeps them d longer. Steps add up. It is
// a test hook: the records report the stepped clock in
// [lease.Record.ServerTime], which is how a Manager detects the step.
func (s *Store) StepClock(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset += d
}

// arm keeps exactly one timer pending for the current reservation, so the
// next waiter is woken when it lapses even if nobody calls the Store.
func (s *Store) arm(m *mutexState, now time.Time) {
	if m.timer != nil && (m.reserved == "" || !m.timerAt.Equal(m.reservedUntil)) {
		m.timer.Stop()
		m.timer = nil
	}
	if m.reserved == "" || m.timer != nil {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(max(m.reservedUntil.Sub(now), 0), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if m.timer != t {
			return // stopped or replaced while this callback waited
		}
		m.timer = nil
		now := s.clock()
		s.settle(m, now)
		s.arm(m, now) // the next reservation, or this one if the clock lags
	})
	m.timer, m.timerAt = t, m.reservedUntil
}

// addSat adds two non-negative durations, saturating instead of wrapping.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
