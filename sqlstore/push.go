package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/internal/backoff"
	"github.com/simba-go/simba/lease"
)

// Compile-time check that Store can push.
var _ lease.Watcher = (*Store)(nil)

// ErrNoPush is wrapped by the error of [Store.Watch] when this Store cannot
// push release notifications: push is off ([WithPush]), the *sql.DB's pool
// is too small to lend it a connection, or (PostgreSQL) the driver is not
// pgx. Waiters then poll, at the owner's transition end.
var ErrNoPush = errors.New("sqlstore: release notifications unavailable")

// minPushPool is the smallest connection limit (sql.DB.SetMaxOpenConns) with
// which a Store borrows connections for push: it never takes more than half
// of the pool, so the statements of the Managers always find one.
const minPushPool = 4

// Watch subscribes to release notifications of lock, as [lease.Watcher]
// describes: the channel receives an event (a hint to try again) when the
// lock is handed to contender — a release that leaves contender first in
// the wait queue, or, when the first waiter does not come within the
// hand-off window, second — and when the notification path (re)connects,
// since a release may have gone unseen before. It is closed when ctx ends.
// Events are never queued for a slow receiver: one pending event stands
// for all. While contender watches lock through this Store, an Acquire of
// it that loses puts contender in the lock's wait queue.
//
// An observer (contender "") hears the hand-offs to waiters of its own
// Store on PostgreSQL and every change of owner on SQLite; a release that
// leaves nobody waiting sends no notification (it would cost PostgreSQL a
// server-wide lock), so observers also poll. On MySQL an observer hears
// nothing and relies on polling.
func (s *Store) Watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, s.errorf("watch", name, err)
	}
	if ctx == nil {
		return nil, s.errorf("watch", name, fmt.Errorf("%w: nil context", lease.ErrInvalidArgument))
	}
	if s.hub == nil {
		return nil, s.errorf("watch", name, fmt.Errorf("%w: WithPush(false)", ErrNoPush))
	}
	if err := s.hub.usable(); err != nil {
		return nil, s.errorf("watch", name, err)
	}
	key := ""
	if contender != "" {
		key = s.key(contender)
	}
	return s.hub.watch(ctx, name, key), nil
}

// Close stops the Store's background work: it drops the MySQL doorbells of
// grants it still holds (the grants themselves stay until released or
// lapsed), ends every Watch channel and stops LISTEN, and waits until its
// goroutines have ended. The *sql.DB stays open: it is the caller's. Calls
// other than Watch keep working after Close; Watch fails with an error
// wrapping lease.ErrClosed. Close is idempotent. Without Close, the
// goroutines end by themselves once nothing is watched or held (on
// PostgreSQL, 30 s later: the LISTEN session lingers for the next waiter).
func (s *Store) Close() error {
	s.pruner.close()
	if s.stmts != nil {
		s.stmts.close() // prepared again if the Store is used after Close
	}
	if s.hub == nil {
		return nil
	}
	s.hub.giveUp(fmt.Errorf("%w: sqlstore: Store closed", lease.ErrClosed))
	s.hub.backend.close()
	return nil
}

// pushBackend is the notification path of one dialect. Its methods are
// called with the hub's mu held and must not block.
type pushBackend interface {
	// start begins delivering notifications (the first subscriber came).
	start()
	// stop ends it (the last subscriber left).
	stop()
	// close, called without the hub's mu after a final stop, releases
	// what the path holds and waits until its goroutines have ended.
	close()
}

// listenLinger is how long PostgreSQL's LISTEN session outlives its last
// subscriber. A lease.Manager subscribes before every attempt, and ending
// a session costs its connection (pgx closes a connection whose wait is
// cancelled): without the linger, every acquire would open a new server
// connection. With it, a store that acquires at least every half minute
// keeps one pooled connection in LISTEN.
const listenLinger = 30 * time.Second

// handoffMargin is how long after the end of a hand-off window the waiter
// after the first one is woken (the first one did not come).
const handoffMargin = 50 * time.Millisecond

// hub fans notifications out to the Watch channels of one Store. A
// subscription has the queue key of its contender ("" for an observer).
type hub struct {
	pool    *sql.DB // whose connection limit decides whether push may borrow
	backend pushBackend
	linger  time.Duration // how long the backend runs on without subscribers

	mu       sync.Mutex
	subs     map[string]map[chan lease.Event]string // lock → channel → key
	count    int
	running  bool                   // the backend was started and not stopped
	idle     *time.Timer            // stops the backend after linger; nil when none pending
	gen      int                    // invalidates an idle timer that fired too late
	dead     error                  // why push cannot work any more (ErrNoPush or ErrClosed)
	hearers  int                    // backend sessions that hear releases (LISTEN up); MySQL: always 1
	deferred map[string]*time.Timer // lock → the pending wake of its second waiter
}

// usable returns nil when push can work, else why not: the backend gave
// up, the Store is closed, or the pool is too small to lend connections.
func (h *hub) usable() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead != nil {
		return h.dead
	}
	if n := h.pool.Stats().MaxOpenConnections; n > 0 && n < minPushPool {
		return fmt.Errorf("%w: the pool allows %d connections, fewer than %d", ErrNoPush, n, minPushPool)
	}
	return nil
}

// watch adds a subscriber of lock with key until ctx ends.
func (h *hub) watch(ctx context.Context, name, key string) <-chan lease.Event {
	ch := make(chan lease.Event, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[chan lease.Event]string{}
	}
	set := h.subs[name]
	if set == nil {
		set = map[chan lease.Event]string{}
		h.subs[name] = set
	}
	set[ch] = key
	h.count++
	h.gen++ // a pending idle stop no longer applies
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if !h.running {
		h.running = true
		h.backend.start()
	}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() { h.remove(name, ch) })
	return ch
}

func (h *hub) remove(name string, ch chan lease.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.subs[name]
	if _, ok := set[ch]; !ok {
		return
	}
	delete(set, ch)
	if len(set) == 0 {
		delete(h.subs, name)
		h.undefer(name)
	}
	close(ch)
	h.count--
	if h.count > 0 {
		return
	}
	if h.linger <= 0 {
		h.running = false
		h.backend.stop()
		return
	}
	h.gen++
	gen := h.gen
	h.idle = time.AfterFunc(h.linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.gen == gen && h.running {
			h.running, h.idle = false, nil
			h.backend.stop()
		}
	})
}

// notify wakes every subscriber of lock.
func (h *hub) notify(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.undefer(name)
	for ch := range h.subs[name] {
		send(ch, lease.Event{Name: name})
	}
}

// handoff wakes the subscribers of lock with key head, and observers, at
// once; those with key next (if any) when window (plus a margin) has
// passed without another hand-off of lock: the head did not come.
func (h *hub) handoff(name, head, next string, window time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.undefer(name)
	set := h.subs[name]
	for ch, key := range set {
		if key == "" || key == head {
			send(ch, lease.Event{Name: name})
		}
	}
	if next == "" || !hasKey(set, next) {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(window+handoffMargin, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.deferred[name] != t {
			return // superseded
		}
		delete(h.deferred, name)
		for ch, key := range h.subs[name] {
			if key == next {
				send(ch, lease.Event{Name: name})
			}
		}
	})
	if h.deferred == nil {
		h.deferred = map[string]*time.Timer{}
	}
	h.deferred[name] = t
}

// wakeKey wakes the subscribers of lock with key.
func (h *hub) wakeKey(name, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch, k := range h.subs[name] {
		if k == key {
			send(ch, lease.Event{Name: name})
		}
	}
}

// undefer stops the pending wake of lock's second waiter. Called with mu
// held.
func (h *hub) undefer(name string) {
	if t := h.deferred[name]; t != nil {
		t.Stop()
		delete(h.deferred, name)
	}
}

func hasKey(set map[chan lease.Event]string, key string) bool {
	for _, k := range set {
		if k == key {
			return true
		}
	}
	return false
}

// locks returns the watched locks.
func (h *hub) mutexes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := make([]string, 0, len(h.subs))
	for m := range h.subs {
		ms = append(ms, m)
	}
	return ms
}

// keys returns the keys of the subscribers of lock ("" for observers).
func (h *hub) keys(name string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ks := make([]string, 0, len(h.subs[name]))
	for _, k := range h.subs[name] {
		ks = append(ks, k)
	}
	return ks
}

// recheck wakes every subscriber: notifications may have been missed.
func (h *hub) recheck() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, set := range h.subs {
		for ch := range set {
			send(ch, lease.Event{Name: name})
		}
	}
}

// subscribed reports whether lock has a subscriber with key and the
// backend hears releases: only then may key join the queue (a waiter that
// cannot be woken would hold every hand-off back for a window).
func (h *hub) subscribed(name, key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hearers > 0 && hasKey(h.subs[name], key)
}

// hearing tells the hub that a session of its backend began (on) or
// stopped hearing releases. Sessions may overlap: one that was stopped
// ends while the next one runs.
func (h *hub) hearing(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.hearers++
	} else {
		h.hearers--
	}
}

// giveUp marks push as impossible for this database (why is nil) or
// closed, and closes every subscription, so waiters poll and Watch fails
// from now on.
func (h *hub) giveUp(why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if why == nil {
		why = ErrNoPush
	}
	if h.dead == nil {
		h.dead = why
	}
	for name, set := range h.subs {
		for ch := range set {
			close(ch)
		}
		delete(h.subs, name)
		h.undefer(name)
	}
	h.count = 0
	h.gen++
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.running {
		h.running = false
		h.backend.stop()
	}
}

// send delivers ev unless ch already holds a pending event.
func send(ch chan lease.Event, ev lease.Event) {
	select {
	case ch <- ev:
	default:
	}
}

// reconnectBackoff is the pause before the n-th (from 0) attempt to
// reconnect a notification path: 50 ms doubling to 2 s.
func reconnectBackoff(n int) time.Duration {
	return backoff.Exp(50*time.Millisecond, 2*time.Second, n)
}

// sleepCtx waits d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
