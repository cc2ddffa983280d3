package lease

import "errors"

// Errors of this package. Every error a call returns wraps at most one of
// them; test with [errors.Is].
var (
	// ErrNotAcquired: TryAcquire found the lock held by someone else
	// (another process, or another goroutine of the same Manager).
	ErrNotAcquired = errors.New("lease: not acquired")

	// ErrNotHeld: a renew or release named a grant that is no longer the
	// current one. Stores return it too (see [Store]).
	ErrNotHeld = errors.New("lease: not held")

	// ErrLost is the cause of a Lease's context when the lease ended
	// without being released: its deadline passed without a confirmed
	// renewal, or the store reported another owner.
	ErrLost = errors.New("lease: lost")

	// ErrReleased is the cause of a Lease's context after Release, Stop or
	// Close ended it.
	ErrReleased = errors.New("lease: released")

	// ErrClosed: the Manager was closed.
	ErrClosed = errors.New("lease: manager closed")

	// ErrInvalidName: a lock name is empty, too long, not valid UTF-8 or
	// contains a NUL byte.
	ErrInvalidName = errors.New("lease: invalid name")

	// ErrInvalidArgument: an option, callback, store or other argument is
	// unusable (nil, non-positive duration, inconsistent timings, ...).
	ErrInvalidArgument = errors.New("lease: invalid argument")

	// ErrGrantTooShort: the store granted the lock for less than the
	// holder's safety margin (it caps grants below ttl + transition, as
	// ZooKeeper caps them at its session timeout), so the grant was dead
	// on arrival: its deadline had passed before its reply came. The
	// grant is given back at once. Acquire and TryAcquire return it
	// instead of retrying, since waiting cannot fix a store's limit; a
	// Contender keeps retrying with back-off, logging each failure. Lower
	// ttl and transition, or raise the store's limit. A store whose
	// [GrantLimiter] limit leaves room after the margin cut the grant for
	// a moment only: that Acquire retries after a back-off instead.
	ErrGrantTooShort = errors.New("lease: grant shorter than the safety margin")

	// ErrStoreSetup: the store refused a request for a reason that
	// retrying cannot fix — its table does not exist (the migrations were
	// not run), the client lacks a privilege, the database is unknown.
	// Stores wrap it around the server's error. Acquire and TryAcquire
	// return it at once instead of retrying until their context ends; a
	// Contender keeps retrying with back-off, logging each failure, so that
	// it recovers once the setup is fixed.
	ErrStoreSetup = errors.New("lease: store not set up")

	// ErrUnhealthy: a [HealthCheck] found a held lease whose renewals
	// are overdue, or a store that does not answer.
	ErrUnhealthy = errors.New("lease: unhealthy")
)
