// Package lease implements distributed locks, leases and leader election
// over a pluggable [Store]: one protocol, written once, for every backend.
//
// # Overview
//
// A [Manager] contends for locks on one store under one contender id.
// It offers three ways to use a lock:
//
//   - [Manager.Acquire] and [Manager.TryAcquire] return a held [Lease]:
//     mutual exclusion with a fencing token ([Lease.Token]), a context that is
//     cancelled the moment the lease is lost ([Lease.Context], [Lease.Done]),
//     and [Lease.Release].
//   - [Manager.Contend] elects a leader among processes and calls
//     [Callbacks] as leadership comes and goes; [Schedule] runs periodic work
//     only on the leader.
//   - [Manager.Watch] and [Manager.Get] observe the owner without contending.
//
// The model is Simba's: a grant is exclusive for ttl, then for a transition
// window in which only its owner may renew; after ttl + transition anyone
// may take it. The Manager renews held grants about every ttl/3 (at a
// third of the time left when a grant has less, but never sooner than a
// quarter of the lease's first step, ttl/12 for a full grant, after the
// last confirmed renewal was sent), retries failed renewals with short
// jittered back-off, and wakes waiters as soon as the store reports a
// release (Redis pub/sub, SQL doorbells, ZooKeeper watches),
// falling back to polling at the owner's transition end plus a jitter in
// [−200 ms, +1000 ms).
//
// Stores implement the small [Store] interface (plus the optional [Watcher],
// [BatchRenewer], [GrantLimiter] and [Lister]); package memstore is an in-process one
// for tests, and package tck checks any store against the contract.
//
// # Glossary
//
// The words of the protocol, as this package and its stores use them:
//
//   - lock: what is held, one per name on a store: at most one grant of
//     it is live at a time.
//   - name: what identifies a lock ([ValidateName]); two Managers that
//     use the same name on the same store contend for the same lock.
//   - contender: a party that wants locks, identified on the store by its
//     contender id ([WithContenderID]; one per Manager). Two Managers are two
//     contenders even in one process; the goroutines of one Manager share
//     its contender and queue locally.
//   - grant: the store's promise that one contender holds a lock, made by
//     a winning Acquire and extended by each Renew; it carries a token and
//     runs for ttl, then transition.
//   - owner, holder: the contender of the current grant ([Record.OwnerID],
//     [Owner]); the holder is the owner seen from its own side, the one
//     with the [Lease].
//   - lease: a grant held by this Manager ([Lease]): its token, a context
//     cancelled when it is lost, and its renewal and release. A lease ends
//     released, lost ([ErrLost]) or abandoned.
//   - token: the fencing token of a grant ([Lease.Token]), strictly
//     greater than every earlier grant's token of the lock; renewals keep
//     it. Pass it to the resource so it can refuse a stale holder.
//   - ttl: how long a grant is exclusive after it was written or renewed,
//     on the server's clock ([WithTTL]). The holder renews about every
//     ttl/3.
//   - transition: the window after ttl in which only the owner may still
//     renew ([WithTransition]); after ttl + transition anyone may take the
//     lock. It gives a slow holder time to renew before it is replaced.
//   - safety margin: what the holder takes off ttl + transition to set its
//     deadline, absorbing the rate difference of the clocks and its own
//     scheduling delay ([WithSafetyMargin], [DefaultSafetyMargin]).
//   - deadline: when the holder declares its lease lost unless a renewal
//     was confirmed: t_send + ttl + transition − safety, on its own
//     monotonic clock (see Guarantees).
//   - jitter: the random part of a waiter's poll (the owner's transition
//     end, −200 ms to +1000 ms) and of the back-off after a failed store
//     call, so that contenders do not retry in step.
//   - hand-off: after a Release, a store with a fair queue holds the free
//     lock back for the longest live waiter for a short window, reported
//     as an empty owner with a positive [Record.Transition]; the gap a
//     waiter sees between a lock freed and its own grant is
//     [MetricHandoffGap].
//   - record: the state of a lock as one store call saw it ([Record]).
//
// The words of the implementation (claim, slot, term, drain, abandon,
// refusals) are explained at the top of slot.go.
//
// # Observability
//
// [WithMeterProvider] records metrics through the OpenTelemetry metric API
// (a no-op that costs nothing without it; instruments from
// [MetricAcquireDuration] on), [Manager.HealthCheck] is a health check
// usable as an http.Handler, and [WithLogger] receives the lifecycle
// events, each with [LogKeyEvent] and the other stable keys.
//
// # Guarantees
//
// Token monotonicity. Every grant of a lock carries a token strictly
// greater than every earlier grant's token for that lock, on every store,
// across store restarts. Renewals keep the token. On Redis a token comes
// from the server's clock only after the lock's record is lost (unused for
// the store's retention, a restart without persistence, a flush, or a
// failover to a replica that lacked it); a server clock that stepped back
// by more than the record's age can then issue a smaller token, though
// never one below a token that a Redis Store of the same process had
// returned before the acquire (see package redisstore).
//
// Loss is told first. The holder keeps a deadline on its own monotonic
// clock:
//
//	deadline = t_send + ttl + transition − safety
//
// where t_send is when the last confirmed acquire or renew was sent (the
// server wrote the grant after that instant, so it cannot expire earlier)
// and safety defaults to max(transition/2, ttl/10). When the deadline passes
// without a confirmed renewal, Done closes and Context is cancelled with
// cause [ErrLost] — even while a store call hangs, because the deadline
// timer never waits on I/O. With the defaults (ttl 10 s, transition 6 s) the
// holder is told 3 s before anyone else could be granted the lock. A
// renewal the store refuses ([ErrNotHeld]) ends the lease at once. A
// released lease's context is cancelled before the store is asked to
// release it. A grant whose deadline has already passed when its reply
// arrives is never used: it is given back, and when the store cut it
// below the safety margin, Acquire fails with [ErrGrantTooShort] (a
// Contender backs off; nothing retries in a loop).
//
// Server clock steps are detected, within limits. The deadline assumes
// that the server's clock, which decides every expiry, runs at the rate
// of the Manager's monotonic clock (the safety margin absorbs a rate
// difference over ttl + transition, NTP's 500 ppm many times over) and is
// not stepped. A step forward by D ends every grant the server wrote
// before it D early; a step back keeps grants D longer (waiters wait
// longer: liveness only, never two holders). A store that reports its
// clock ([Record.ServerTime]: memstore, the SQL stores, Redis renewals
// outside Cluster and Ring; not ZooKeeper, whose expiry is its session's)
// lets the Manager see a step: between two replies the server's clock
// can only have advanced by as much as the Manager's own clock did from
// the first call's sending to the second's reply, and no less than from
// the first reply to the second sending. A reading beyond those bounds by
// more than a quarter of the safety margin (at least 5 ms) is a step:
// logged once ([EventClockStep]) and counted ([MetricClockSteps]). After
// a forward step, every other lease of the Manager whose last confirmed
// reply came from the same clock before the step has its deadline
// brought forward at once by as much as its grant now ends early (by the
// bound that a reply's reading came right at its sending), and is told
// as at its deadline if that has passed; the lease whose reply showed the
// step needs nothing, as that reply confirmed a grant written on the
// stepped clock — or refused one, and then the lease ends anyway. What
// the detector cannot see: a step after the last reply of every lease,
// until the next reply (a renewal every ttl/3, or a refusal). A single
// lease whose renewals still succeed after a step was never in danger
// (each renewal rewrites the grant on the stepped clock); one whose grant
// ends before its next renewal can reach the server (a step larger than
// ttl + transition less the time since its last confirmed call, at least
// 2·ttl/3 + transition) is unprotected until that renewal is refused, and
// the detector then shortens the others. Only the fencing token protects
// the resource in that window.
//
// Never lie. Renew and release are conditioned on the contender and the
// grant's token: a stale one returns [ErrNotHeld] and leaves the new owner
// alone. A late renew never re-acquires. A grant this Manager stopped
// standing behind — lost, abandoned by a Stop whose ctx ended, or not
// confirmed released — is never handed out again under the same token: if
// the store still has it, it is given back and a new grant taken. So is a
// grant it released that the store forgot it released (a Redis replica
// promoted before the release reached it, a restart from an older
// snapshot, a call delayed in the network that reached the store after
// the release, or a server clock that stepped back and kept a given-up
// grant alive): the newest token the Manager released or gave up of each
// name is refused whenever it comes back, an older one for ttl +
// transition after that (the Manager remembers the names it released
// last, 8 in each of 32 shards by name; a name it forgot is protected by
// the store alone).
//
// Callbacks are ordered. OnReleased follows its OnAcquired and never runs
// concurrently with it; no callback runs under a lock of this package.
// Contender.Stop waits for the callbacks before releasing the lock, so a
// voluntary hand-over never overlaps two leaders' work — within Stop's ctx:
// when ctx ends first, the grant is abandoned (no longer renewed, not
// released; it lapses on the store by itself), and a new leader may start
// while the abandoned callback still runs, as after a loss. Stop and Close
// called from inside a callback return at once; the lock is released once
// the callbacks return.
//
// Bounded state. A Manager keeps per-name state only while a name is held
// or awaited, and for at most ttl + transition after a grant it must refuse
// or leave to lapse, so a service that locks one name per order id runs in
// constant memory. Watching a lock costs the store about one Get per ttl
// (a free lock on a store that cannot push: one per ttl/4, at most a
// second apart).
//
// # What is not guaranteed
//
// No lease lock guarantees mutual exclusion by itself. A holder can be
// paused (GC, SIGSTOP, a slow disk, a VM migration) after checking that its
// lease is held and before it writes; by the time the write lands, another
// holder may exist. Pass [Lease.Token] to the resource and have it reject
// tokens lower than the highest it has accepted: that is the only protection
// against pauses.
//
// The deadline assumes that the client's and the server's clocks run at
// nearly the same rate (the safety margin absorbs the difference and the
// holder's scheduling delay). Steps of the client's wall clock do not
// matter: the client measures only monotonic time and every expiry is
// decided by the server. Steps of the server's clock do (see above).
// A store that loses acknowledged writes (Redis with asynchronous
// replication failing over) can grant a lock twice; tokens still never
// repeat where the store says so, and fencing still rejects the stale holder.
package lease
