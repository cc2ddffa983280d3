package lease

// Stable names for observing a Manager: the OpenTelemetry instruments it
// records into (see [WithMeterProvider]), their attribute keys and values,
// and the keys and event values of its log records (see [WithLogger]).
// They are part of the API: renaming one is a breaking change.

// Instrument names. Durations are histograms in seconds; counts are
// counters unless said otherwise. The meter's name is [MeterName].
const (
	// MeterName is the instrumentation scope of every instrument.
	MeterName = "github.com/simba-go/simba/lease"

	// MetricAcquireDuration: how long Acquire and TryAcquire calls took,
	// by [AttrKind] (acquire, try_acquire) and [AttrOutcome].
	MetricAcquireDuration = "simba.lease.acquire.duration"
	// MetricAcquireWait: how long a claim waited in line (behind another
	// owner, or behind a goroutine of this Manager) before it was granted
	// or gave up, by [AttrKind] (acquire, try_acquire, contend) and
	// [AttrOutcome]. An uncontended Acquire does not wait and records
	// nothing here.
	MetricAcquireWait = "simba.lease.acquire.wait"
	// MetricHeld: leases held now (an up-down counter).
	MetricHeld = "simba.lease.held"
	// MetricLeader: Contenders leading now (an up-down counter).
	MetricLeader = "simba.lease.leader"
	// MetricRenewals: renewals the store confirmed, one per lease.
	MetricRenewals = "simba.lease.renewals"
	// MetricRenewalFailures: renewals whose outcome is unknown (a store
	// error or timeout); each is retried until the lease's deadline. A
	// renewal the store refuses ends the lease: see MetricLosses.
	MetricRenewalFailures = "simba.lease.renewal.failures"
	// MetricLosses: leases that ended without a release, by [AttrCause].
	MetricLosses = "simba.lease.losses"
	// MetricHandoffGap: for a waiter that gets a lock, the time from
	// the moment it saw the lock free to the grant, by [AttrWake]: a
	// release event pushed by the store, a release by another goroutine
	// of this Manager, or the previous owner's transition end as the
	// waiter's last attempt reported it (when it polls).
	MetricHandoffGap = "simba.lease.handoff.gap"
	// MetricStoreDuration: how long store calls took, by [AttrOperation]
	// and [AttrOutcome] (ok, or error).
	MetricStoreDuration = "simba.lease.store.duration"
	// MetricStoreErrors: store calls that failed with an unknown outcome,
	// by [AttrOperation] and [AttrErrorType]. A store's "not held" answer
	// is an answer, not an error.
	MetricStoreErrors = "simba.lease.store.errors"
	// MetricClockSteps: steps of the store server's clock detected from
	// its replies, by [AttrDirection]. Reserved until the detector lands:
	// no Manager records it yet.
	MetricClockSteps = "simba.lease.server.clock.steps"
)

// Attribute keys of the instruments.
const (
	// AttrLock is the lock name. It is set only for names the user
	// listed with [WithMetricLockNames]: names are unbounded.
	AttrLock = "simba.lock"
	// AttrKind is what claimed the lock: [KindAcquire],
	// [KindTryAcquire] or [KindContend].
	AttrKind = "simba.kind"
	// AttrOutcome is how a call ended: [OutcomeAcquired],
	// [OutcomeNotAcquired], [OutcomeCanceled], [OutcomeClosed] or
	// [OutcomeError] for acquisitions; [OutcomeOK] or [OutcomeError] for
	// store calls.
	AttrOutcome = "simba.outcome"
	// AttrCause is why a lease was lost: [CauseDeadline],
	// [CauseNotHeld] or [CauseStopped].
	AttrCause = "simba.cause"
	// AttrWake is how a waiter learnt that a lock was free: [WakeEvent],
	// [WakeLocal] or [WakePoll].
	AttrWake = "simba.wake"
	// AttrOperation is the store operation: acquire, renew, renew_many,
	// release or get.
	AttrOperation = "simba.operation"
	// AttrErrorType classifies a failed store call: timeout (its call
	// timeout ran out), setup (the store is not set up, see
	// [ErrStoreSetup]) or other.
	AttrErrorType = "error.type"
	// AttrDirection is the direction of a server clock step: forward or
	// backward.
	AttrDirection = "simba.direction"
)

// Attribute values.
const (
	KindAcquire    = "acquire"     // Manager.Acquire
	KindTryAcquire = "try_acquire" // Manager.TryAcquire
	KindContend    = "contend"     // a Contender's term (and so a Scheduler's)

	OutcomeAcquired    = "acquired"     // the lock was granted
	OutcomeNotAcquired = "not_acquired" // held elsewhere (TryAcquire)
	OutcomeCanceled    = "canceled"     // the caller's context ended first
	OutcomeClosed      = "closed"       // the Manager was closed
	OutcomeError       = "error"        // the store failed, or granted less than the safety margin
	OutcomeOK          = "ok"           // a store call that was answered

	CauseDeadline = "deadline" // no renewal was confirmed before the deadline
	CauseNotHeld  = "not_held" // a renewal found another grant current
	CauseStopped  = "stopped"  // a Stop whose context ended abandoned it

	WakeEvent = "event" // a release event from the store
	WakeLocal = "local" // a release by another goroutine of this Manager
	WakePoll  = "poll"  // the previous owner's transition end, by polling
)

// Log record keys. Every record of the Manager carries LogKeyEvent; the
// others appear where they apply. Messages are for people and may change;
// match on the event instead.
const (
	LogKeyEvent   = "event"    // what happened: one of the Event values
	LogKeyLock    = "lock"     // the lock's name
	LogKeyToken   = "token"    // the grant's fencing token
	LogKeyOwner   = "owner"    // the owner the store reported
	LogKeyCause   = "cause"    // why a lease was lost: a Cause value
	LogKeyError   = "error"    // the error
	LogKeyAttempt = "attempt"  // the number of the failed attempt in a row
	LogKeyRetryIn = "retry_in" // how long a waiter waits before it tries again

	LogKeyDirection = "direction" // a server clock step's direction: forward or backward
	LogKeyStep      = "step"      // the least size of a server clock step beyond the tolerance
	LogKeyShortened = "shortened" // how many other leases' deadlines a forward step brought forward
)

// Values of [LogKeyEvent], with their levels.
const (
	EventAcquired      = "acquired"       // Info: a lease was granted
	EventReleased      = "released"       // Info: a lease was released
	EventLost          = "lost"           // Warn: a lease ended without a release (LogKeyCause says why)
	EventLeaderGained  = "leader_gained"  // Info: a Contender became the leader
	EventLeaderLost    = "leader_lost"    // Info when it resigned, Warn when the lease was lost
	EventRenewed       = "renewed"        // Debug: a renewal was confirmed
	EventRenewFailed   = "renew_failed"   // Warn: a renewal failed; it is retried until the deadline
	EventWaiting       = "waiting"        // Debug: an attempt found the lock held; the waiter tries again later
	EventAcquireFailed = "acquire_failed" // Warn: an acquire attempt failed; a waiter retries
	EventReleaseFailed = "release_failed" // Warn: a release failed; the grant lapses by itself
	EventWatchFailed   = "watch_failed"   // Warn: Watch could not read the owner; it retries
	EventWorkFailed    = "work_failed"    // Warn: a Scheduler's work returned an error
	// EventClockStep (Warn): a store reply showed that the server's clock
	// stepped (LogKeyDirection, LogKeyStep); after a forward step the
	// deadlines of the leases the server confirmed before it were brought
	// forward (LogKeyShortened). Logged once per step and Manager, by the
	// first reply that shows it, with that reply's lock and token.
	EventClockStep = "clock_step"
)
