package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/simba-go/simba/lease"
)

// engine runs the statements of one dialect. Times are epoch ms on the
// server's clock.
type engine interface {
	// acquire runs the conditional upsert (queueing the loser when
	// a.waitMs > 0) and returns the row after it.
	acquire(ctx context.Context, a acquireArgs) (row, error)
	// renew extends owner's live grant with token; ok is false when that
	// grant is not the current one (then r is the current row).
	renew(ctx context.Context, mutex, owner string, token, ttlMs, transitionMs int64) (r row, ok bool, err error)
	// renewMany renews each request as renew would, in one statement per
	// chunk where the dialect allows: one result per request, in order.
	renewMany(ctx context.Context, reqs []renewArgs) ([]renewed, error)
	// release ends owner's live grant with token (none when token is 0)
	// and withdraws key from the queue in any case.
	release(ctx context.Context, a releaseArgs) (released bool, err error)
	// get reads the row; found is false for an unknown lock.
	get(ctx context.Context, mutex string) (row, error)
	// list reads every row with a live grant, by lock.
	list(ctx context.Context) ([]listed, error)
	// prune deletes at most maxRows rows free for retentionMs or longer,
	// raising the token floor above their tokens first; full is true when
	// more may be left.
	prune(ctx context.Context, retentionMs, maxRows int64) (deleted int64, full bool, err error)
}

// acquireArgs are the input of an acquire statement.
type acquireArgs struct {
	mutex, owner, key   string
	ttlMs, transitionMs int64
	waitMs              int64 // queue the loser with this expiry; 0: do not
	queued              bool  // an earlier acquire of this Store may have queued owner
}

// releaseArgs are the input of a release statement.
type releaseArgs struct {
	mutex, owner, key string
	token             int64 // 0: only withdraw from the queue
	windowMs          int64 // the hand-off window
	notify            bool  // PostgreSQL: NOTIFY the next waiter
	crowded           bool  // others were queued when the grant was made, or (PostgreSQL) it went to a waiter (PostgreSQL, MariaDB)
	on                dbtx  // the connection that holds owner's doorbell, to let it go too (see lender)
}

// renewArgs are the input of one renewal of a batch.
type renewArgs struct {
	mutex, owner        string
	token               int64
	ttlMs, transitionMs int64
}

// renewed is the outcome of one renewal of a batch.
type renewed struct {
	ok bool
	row
}

// listed is a row of a listing.
type listed struct {
	mutex string
	row
}

// row is one lock's row with the server's now.
type row struct {
	found        bool
	owner        string
	token        int64
	ttlAt        int64
	transitionAt int64
	now          int64
	queue        queued
	waited       bool // a renewal saw live entries in the queue
	crowd        bool // a grant to the head of the queue: others may wait (queue not read)
}

// record turns a row into remaining durations (see remaining) and the
// server's clock reading of the statement (now_ms), which decided them.
func (r row) record() lease.Record {
	rec := r.remaining()
	if r.now > 0 {
		rec.ServerTime = time.UnixMilli(r.now)
	}
	return rec
}

// remaining turns a row into remaining durations. A grant whose transition
// has ended is a free lock; a free lock whose transition_at is ahead is
// held back for the first waiter (empty OwnerID, positive Transition).
func (r row) remaining() lease.Record {
	if !r.found || r.transitionAt <= r.now {
		return lease.Record{}
	}
	if r.owner == "" {
		return lease.Record{Transition: msDuration(r.transitionAt - r.now)}
	}
	if r.token <= 0 {
		return lease.Record{}
	}
	ttl := max(r.ttlAt-r.now, 0)
	return lease.Record{
		OwnerID:    r.owner,
		Token:      uint64(r.token),
		TTL:        msDuration(ttl),
		Transition: msDuration(max(r.transitionAt-r.now, ttl)),
	}
}

// maxWaitMs bounds how long a queue entry lives without a renewed
// attempt, so that its expiry keeps 13 digits.
const maxWaitMs = int64(30 * 24 * time.Hour / time.Millisecond)

// Acquire grants lock to contender when it is free (and not held back
// for another waiter), when the previous grant's transition has ended on
// the server's clock (a new token), or when contender already holds the
// live grant (extended, token kept). Losing is not an error: the caller
// holds the lock exactly when the returned Record's Owner is contender.
// A contender that loses while it watches the lock through this Store
// (as a lease.Manager's waiter does) joins the lock's wait queue; a
// lock held back for the first waiter is an empty OwnerID with a positive
// Transition: the rest of the hand-off window, and for a waiter queued
// behind the first two, one grant of ttl + transition more (the soonest
// it can expect the lock: its Manager does not poll before). See
// [lease.Store].
func (s *Store) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	ttlMs, trMs, err := checkRequest(name, contender, ttl, transition)
	if err != nil {
		return lease.Record{}, s.errorf("acquire", name, err)
	}
	a := acquireArgs{mutex: name, owner: contender, key: s.key(contender), ttlMs: ttlMs, transitionMs: trMs,
		queued: s.waits.has(name, contender)}
	if s.hub != nil && s.hub.subscribed(name, a.key) && s.hooks.canWait(name, a.key) && s.waits.add(name, contender) {
		a.waitMs = min(2*(ttlMs+trMs), maxWaitMs)
	}
	var r row
	pushed := false
	if p, ok := s.hooks.(pusher); ok {
		if g, ok := p.takePush(bellID{name, a.key}, contender); ok {
			r, pushed = g.row(ttlMs, trMs, time.Now())
		}
	}
	if !pushed {
		err = s.retry(ctx, func() (err error) {
			r, err = s.eng.acquire(ctx, a)
			return err
		})
	}
	if err != nil {
		return lease.Record{}, s.errorf("acquire", name, err)
	}
	rec := r.record()
	switch {
	case rec.Held(contender):
		s.waits.remove(name, contender)
		crowded := r.crowd || r.queue.live(r.now)
		// A contender that waited for its grant took it from someone
		// who, under contention, queues again while it holds (two
		// contenders alternating): its release goes straight to the
		// statement that hands over, instead of one that would only
		// find the queue first.
		if crowded || s.waitedCrowds && a.waitMs > 0 {
			s.crowded.add(name, contender)
		} else {
			s.crowded.remove(name, contender)
		}
		s.hooks.granted(name, a.key, rec.Transition, crowded)
	case a.waitMs > 0:
		if pred, ok := r.queue.pred(a.key, r.owner); ok {
			s.hooks.waiting(name, a.key, pred, grantReq{owner: contender, ttlMs: ttlMs, transitionMs: trMs, windowMs: ceilMs(s.handoff)})
		}
		if rec.OwnerID == "" && rec.Transition > 0 && r.queue.index(a.key) >= 2 {
			// Held back for the first waiter, and the second one comes
			// next: this waiter cannot have the lock before the first
			// one's grant ends (its wake-up comes with the release before
			// it), so its Manager is told to poll no sooner than a grant
			// as long as its own after the window, as behind an owner.
			rec.Transition += msDuration(ttlMs + trMs)
		}
	}
	s.pruner.tick()
	return rec, nil
}

// Renew extends the live grant of contender with token by ttl, then
// transition, from the server's now, keeping the token. When that grant is
// not the current one or its transition has ended, it changes nothing and
// returns the current record with an error wrapping [lease.ErrNotHeld].
func (s *Store) Renew(ctx context.Context, name, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	ttlMs, trMs, err := checkRequest(name, contender, ttl, transition)
	if err != nil {
		return lease.Record{}, s.errorf("renew", name, err)
	}
	if token == 0 || token > math.MaxInt64 { // never granted
		r, err := s.Get(ctx, name)
		if err != nil {
			return lease.Record{}, err
		}
		return r, s.errorf("renew", name, lease.ErrNotHeld)
	}
	var r row
	var ok bool
	err = s.retry(ctx, func() (err error) {
		r, ok, err = s.eng.renew(ctx, name, contender, int64(token), ttlMs, trMs)
		return err
	})
	if err != nil {
		return lease.Record{}, s.errorf("renew", name, err)
	}
	key := s.key(contender)
	if !ok {
		s.hooks.ended(name, key)
		return r.record(), s.errorf("renew", name, lease.ErrNotHeld)
	}
	rec := r.record()
	s.hooks.granted(name, key, rec.Transition, r.waited)
	return rec, nil
}

// Release ends contender's grant with token at once: the lock is free
// (or, when others wait, reserved for the first of them for the hand-off
// window, see [WithHandoff]) and the next grant gets a greater token. It
// also withdraws contender from the lock's wait queue; token 0 only
// withdraws. When that grant is not the current one (token 0 never is),
// it changes no grant and returns an error wrapping [lease.ErrNotHeld].
func (s *Store) Release(ctx context.Context, name, contender string, token uint64) error {
	if err := checkNameContender(name, contender); err != nil {
		return s.errorf("release", name, err)
	}
	if token > math.MaxInt64 {
		return s.errorf("release", name, lease.ErrNotHeld)
	}
	queued := s.waits.take(name, contender)
	if token == 0 && !queued { // nothing to end, nothing to withdraw
		return s.errorf("release", name, lease.ErrNotHeld)
	}
	a := releaseArgs{mutex: name, owner: contender, key: s.key(contender), token: int64(token),
		windowMs: ceilMs(s.handoff), notify: s.hub != nil, crowded: s.crowded.take(name, contender) || queued}
	lend, _ := s.hooks.(lender)
	if lend != nil {
		a.on = lend.lend(name, a.key)
	}
	var released bool
	err := s.retry(ctx, func() (err error) {
		released, err = s.eng.release(ctx, a)
		if a.on != nil { // once: a failed connection is the doorbell's to replace
			lend.giveBack(name, a.key, err == nil && released)
			a.on = nil
		}
		return err
	})
	if err != nil {
		if queued {
			s.waits.add(name, contender) // maybe still queued: withdraw again
		}
		return s.errorf("release", name, err)
	}
	s.hooks.ended(name, a.key) // after the row: a doorbell rings for a free lock
	if !released {
		return s.errorf("release", name, lease.ErrNotHeld)
	}
	return nil
}

// Get returns the current record of lock without changing it. An unknown
// or free lock has an empty OwnerID.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	if err := lease.ValidateName(name); err != nil {
		return lease.Record{}, s.errorf("get", name, err)
	}
	var r row
	err := s.retry(ctx, func() (err error) {
		r, err = s.eng.get(ctx, name)
		return err
	})
	if err != nil {
		return lease.Record{}, s.errorf("get", name, err)
	}
	return r.record(), nil
}

// Grant is a live grant as [Store.List] reports it.
type Grant struct {
	// Lock is the name of the lock.
	Mutex string
	lease.Record
}

// List returns every lock with a live grant, ordered by name, with
// remaining durations on the server's clock — for status pages and the
// simba CLI. It reads the whole table: keep it off hot paths.
func (s *Store) List(ctx context.Context) ([]Grant, error) {
	var ls []listed
	err := s.retry(ctx, func() (err error) {
		ls, err = s.eng.list(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s list: %w", s.dialect, err)
	}
	out := make([]Grant, 0, len(ls))
	for _, l := range ls {
		if rec := l.record(); rec.OwnerID != "" {
			out = append(out, Grant{Mutex: l.mutex, Record: rec})
		}
	}
	return out, nil
}

func (s *Store) errorf(op, name string, err error) error {
	return fmt.Errorf("sqlstore: %s %s %q: %w", s.dialect, op, name, err)
}

// maxMs bounds ttl + transition so that now + it cannot overflow a bigint
// (about 292 million years).
const maxMs = math.MaxInt64 / 4

// checkRequest validates the input of Acquire and Renew and converts the
// durations to milliseconds, rounded up: the server's grant is never
// shorter than the one the caller's deadline assumes.
func checkRequest(name, contender string, ttl, transition time.Duration) (ttlMs, trMs int64, err error) {
	if err := lease.ValidateRequest(name, contender, ttl, transition); err != nil {
		return 0, 0, err
	}
	ttlMs, trMs = ceilMs(ttl), ceilMs(transition)
	if ttlMs > maxMs-trMs {
		return 0, 0, fmt.Errorf("%w: ttl %v + transition %v is too long", lease.ErrInvalidArgument, ttl, transition)
	}
	return ttlMs, trMs, nil
}

// checkNameContender accepts what the Store contract promises: a valid name
// and contender id.
func checkNameContender(name, contender string) error {
	if err := lease.ValidateName(name); err != nil {
		return err
	}
	return lease.ValidateContenderID(contender)
}

func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// errNoRow is what an engine returns when a statement that must produce a
// row produced none (a table changed under the Store).
var errNoRow = errors.New("sqlstore: statement returned no row")
