package lease

import (
	"context"
	"time"
)

// Store is the port every storage backend implements. Each method is one
// atomic operation on the store's server, one round trip where the backend
// allows it. All protocol logic (timing, renewal, loss, callbacks, jitter)
// lives in this package; a Store only translates.
//
// Times are decided by the server's clock. A Store reports remaining
// durations, never absolute timestamps, so no client ever compares its own
// clock with the server's. A Store may also report its server's clock
// reading ([Record.ServerTime]); the lease only subtracts two readings of
// it, to detect steps of that clock (see the package documentation).
//
// Names reaching a Store have passed [ValidateName]; contender ids
// [ValidateContenderID] (non-empty valid UTF-8 without NUL, at most
// [MaxContenderIDLength] bytes). A Store must accept every such name and id
// and must never confuse two different names; it may check its input with
// [ValidateRequest].
//
// Contract, per method:
//
//   - Acquire grants the lock to contender when it is free, when the previous
//     grant's transition has ended on the server's clock, or when contender
//     already holds a live grant (then it extends that grant and keeps its
//     token, so a retried Acquire whose reply was lost is idempotent). A new
//     grant gets a token strictly greater than every earlier grant's token for
//     that lock, across server restarts. A new grant runs for ttl, then for
//     transition during which only its holder may renew. Acquire returns the
//     record after the attempt: the caller holds the lock exactly when
//     Record.OwnerID == contender. Losing is not an error. A store with a fair
//     wait queue may enqueue a losing contender (with an expiry, so a crashed
//     waiter does not absorb wake-ups) and may refuse a free lock to anyone
//     but the longest live waiter for a short hand-off window; it then reports
//     an empty OwnerID with a positive Transition, the time after which the
//     caller should try again.
//   - Renew extends the live grant identified by contender and token by ttl
//     and transition from the server's now. It fails with an error wrapping
//     [ErrNotHeld] when that grant is not the current one or its transition
//     has ended: a late renew never re-acquires. On ErrNotHeld the returned
//     Record describes the current owner when the store knows it.
//   - Release ends contender's interest in the lock. When contender holds the
//     grant with this token, the grant ends at once and the next waiter is
//     woken; otherwise it returns an error wrapping [ErrNotHeld] and leaves the
//     current owner alone. In both cases any wait-queue entry of contender is
//     removed. Token 0 (never a valid token) only withdraws from the queue.
//   - Get reads the current record without changing anything. An unknown or
//     free lock is a zero Owner, not an error.
//
// What a record promises. The record of the holder's own Acquire or Renew
// is what the lease relies on: nobody else is granted the lock until its
// Transition has passed since the call was sent (the holder's deadline
// counts from there, on the smaller of Transition and ttl + transition).
// A store reports the grant as asked (TTL ttl and Transition ttl +
// transition, from its server's now) unless it cannot be sure to keep it
// that long whatever happens to the holder's connection: a store whose
// grants end with the holder's session (ZooKeeper's ephemeral nodes)
// implements [GrantLimiter] and reports only what surely remains, at most
// MaxGrant: a Transition below ttl + transition, and a TTL of the smaller
// of ttl and Transition. Reporting less than the store keeps is safe (the
// holder renews sooner); reporting more is the mistake that makes two
// holders. Either way, while nothing fails, a grant runs for ttl, then
// transition, as asked (a GrantLimiter's may end once MaxGrant passed).
//
// The records others see (Get, a losing Acquire) tell when the lock may
// be free. A store whose holders renew without writing cannot see from
// another client how much of a grant is left: it reports the longest the
// grant can last without a call of its holder (its whole ttl and
// transition), so that waiters come back late, never early. Through the
// client that holds the grant, Get reports the time left, which shrinks
// as time passes: no read extends a grant.
//
// Errors other than ErrNotHeld mean the outcome is unknown (the request may
// or may not have been applied); the caller retries or gives up safely. A
// Store wraps [ErrStoreSetup] around errors that retrying cannot fix (a
// missing table, a missing privilege), so that callers fail fast.
type Store interface {
	Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (Record, error)
	Renew(ctx context.Context, name, contender string, token uint64, ttl, transition time.Duration) (Record, error)
	Release(ctx context.Context, name, contender string, token uint64) error
	Get(ctx context.Context, name string) (Record, error)
}

// Record is the state of one lock as the store's server saw it during a
// call.
type Record struct {
	// OwnerID is the contender id of the current grant, or "" when the lock
	// is free.
	OwnerID string
	// Token is the fencing token of the current grant (0 when free).
	Token uint64
	// TTL is the time left, on the server's clock, until the grant's ttl
	// ends. It is never negative.
	TTL time.Duration
	// Transition is the time left until the grant's transition ends, after
	// which any contender may take the lock. It is never less than TTL.
	// With an empty OwnerID, a positive Transition means the store holds the
	// lock back (a fair hand-off) for that long. How exact both are
	// depends on who reads them: see what a record promises at [Store].
	Transition time.Duration
	// ServerTime is the reading of the clock that decides the grant's
	// expiry (the server's), taken during the call, or zero when the store
	// does not report one. Only differences between two readings of one
	// store matter: the lease compares them with its own monotonic time
	// between the calls to detect steps of the server's clock. A store
	// reports it only when the reading comes from the clock its expiries
	// run on, in the same atomic step as the rest of the record.
	ServerTime time.Time
}

// Held reports whether the record names contender as the owner.
func (r Record) Held(contender string) bool { return r.OwnerID != "" && r.OwnerID == contender }

// Watcher is an optional Store capability: push notifications that let
// waiters try again at once instead of at the owner's transition end.
//
// Events are hints only. Acquisition is always the atomic Acquire; a lost
// event delays a waiter but never blocks it, because waiters also poll.
type Watcher interface {
	// Watch subscribes to events of lock. contender is the id of the
	// waiting contender, so a store with a fair queue can wake only the
	// next waiter; "" subscribes an observer that wants every change.
	// The channel is closed when ctx ends or the subscription breaks; the
	// caller then falls back to polling and may call Watch again. A store
	// may drop events for a slow receiver; it never blocks on one.
	Watch(ctx context.Context, name, contender string) (<-chan Event, error)
}

// Event is a hint that the owner of a lock changed.
type Event struct {
	// Name is the name the event is about.
	Name string
	// OwnerID is the new owner, or "" when the lock was released.
	OwnerID string
	// Token is the new grant's token, or 0 after a release.
	Token uint64
}

// GrantLimiter is an optional Store capability: the longest grant (ttl +
// transition) the store honours now; 0 means no known limit.
//
// A store that cannot keep a grant for as long as it is asked (ZooKeeper
// keeps one no longer than its session timeout) implements it, and
// reports that limit in the Records it returns too: [NewManager] then
// refuses timings whose grants would leave nothing after the safety
// margin, instead of failing every Acquire with [ErrGrantTooShort].
// Only a GrantLimiter may tell its holder less than it asked for (see
// [Store], what a record promises): the Transition of the record of the
// holder's Acquire or Renew is then at most MaxGrant, and no more than
// the store surely keeps the grant.
type GrantLimiter interface {
	MaxGrant() time.Duration
}

// BatchRenewer is an optional Store capability: renewing many grants held
// by one Manager in one round trip (per server or slot, as the store can).
type BatchRenewer interface {
	// RenewMany renews each request as Renew would and returns one result
	// per request, in order. The error is for the batch as a whole (the
	// outcome of every request is unknown); per-request failures, such as
	// ErrNotHeld, are in the results.
	RenewMany(ctx context.Context, reqs []RenewRequest) ([]RenewResult, error)
}

// RenewRequest is one grant to renew in a [BatchRenewer.RenewMany] call.
type RenewRequest struct {
	Name       string
	Contender  string
	Token      uint64
	TTL        time.Duration
	Transition time.Duration
}

// RenewResult is the outcome of one [RenewRequest].
type RenewResult struct {
	Record Record
	Err    error
}
