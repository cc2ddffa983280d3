// Package tck is the conformance suite (technology compatibility kit) that
// every [lease.Store] must pass: the five cases of Simba's TCK (start,
// restart, guard, multiContend, schedule) and the protocol guarantees of
// simba-go on top of them — TryAcquire, cancellation while waiting, fencing
// tokens, prompt and fair hand-off on release, bounded takeover, a grant's
// ttl and transition, stale and revoked grants, loss told before another
// grant (also after a renewal, and on a slow store), odd names and contender
// ids, Close, and no leaked goroutine. The cases drive the store through
// [lease.Manager] exactly as an application does, plus raw Store calls
// where the contract itself is under test.
//
// A store runs it from a test of its own:
//
//	func TestTCK(t *testing.T) {
//		srv := startServer(t) // one server (or DSN) for the whole suite
//		tck.Run(t, tck.Harness{
//			Open: func(t *testing.T) tck.Backend {
//				return tck.Backend{
//					// A new client, with its own connection, per call.
//					Client: func() lease.Store {
//						c := dial(t, srv.Addr())
//						t.Cleanup(func() { c.Close() })
//						return mystore.New(c)
//					},
//					// Optional: a client whose traffic a proxy can black-hole.
//					Partitioned: func() (lease.Store, tck.Partition) {
//						p := startProxy(t, srv.Addr()) // implements Cut and Heal
//						c := dial(t, p.Addr())
//						t.Cleanup(func() { c.Close() })
//						return mystore.New(c), p
//					},
//				}
//			},
//			Fair: true, // only if the store serves the longest waiter first
//		})
//	}
//
// Open is called once per case, with that case's t; every client of a case
// comes from its Backend, and all clients of one Backend must see the same
// locks. An in-process store returns one instance from every Client call
// (see the memstore package's test), and can use [Cuttable] for Partitioned.
//
// The cases (subtests of the test that calls Run):
//
//   - Start, Restart, Guard, MultiContend, Schedule: Simba's TCK, with
//     callback order, tokens, deadlines, renewal pace, jitter and
//     leader-only work checked too.
//   - TryAcquire, CancelWhileWaiting, TokensIncrease, ReleaseWakesWaiter,
//     FairHandoff, Watch: acquiring, waiting and hand-off (FairHandoff only
//     with [Harness.Fair]).
//   - Transition, TakeoverAfterAbandon, StaleRenewRelease: the Store
//     contract through raw calls: a grant's ttl and transition, Get without
//     effects, a holder that never renews, stale grants. The holder's
//     records must report the grant as asked; only a store that limits its
//     grants ([lease.GrantLimiter]) may report less, what it surely keeps
//     (ZooKeeper: what surely remains of the holder's session), and never
//     more than its MaxGrant. Get is read twice through the client that
//     made the grant, whose time left must shrink.
//   - SlowStore, RevokedLease, RevokedLeader: replies that come late, and a
//     grant ended behind its holder's back.
//   - PartitionedHolder, PartitionedHolderRenewed, PartitionedLeader,
//     PartitionedLeaderRenewed: a holder whose store calls hang is told of
//     its loss before the store lets its grant go and before anyone else
//     is granted the lock, and the store keeps its grant at least until
//     the holder's deadline (skipped without [Backend.Partitioned]). The
//     holder is cut before its first renewal, or after one, so that the
//     grant's end was set by a renewal. Its hung calls ignore their
//     context, or return when it ends; cut before a renewal, they return
//     only after a whole ttl, past the end of its grant (asked without
//     transition), so a holder that waits for one is told too late.
//   - CloseReleases, NoGoroutineLeak: the Manager's lifecycle.
//   - OddNames, OddIDs, InvalidNames: names and contender ids a store must
//     keep apart, and names every call refuses.
//   - List: a store that is a [lease.Lister] lists every grant live before
//     the listing began, with its owner and token, and no grant released
//     before it, with pages of any size; a limit that is not positive is
//     refused.
//
// Every case uses lock names of its own ("tck/<case>/<label>/<random>"), so
// cases share one store namespace and run in parallel (unless
// [Harness.Serial]). Names are left behind in the store as free locks.
// The goroutine-leak case runs alone, before the parallel ones; do not mark
// the test that calls Run as parallel.
//
// With real servers the suite takes real time: with the default timings
// the longest cases take about 5 s, plus MultiContend (30 s, 3 s with
// -short), and parallel cases overlap (go test -parallel, GOMAXPROCS by
// default). A bound is either exact, judged on this process's clock where a
// store's answer bounds the server's instant (a call answered before s +
// ttl + transition, where s is when a grant was asked, was answered while
// the grant lived), or an order of magnitude (a hand-off within ttl/2, a
// renewal per ttl/2, a takeover within ttl + transition + 1 s jitter +
// ttl). A check whose window a slow machine missed is not judged, and the
// case logs it; a slow CI machine may need a longer [Harness.TTL]. So is a
// lease lost to the slow replies of SlowStore and the Renewed partition
// cases (a little more than the safety margin each) when its store limits
// its grants and told it too little to wait for the next reply. With
// Synctest an in-process store runs the whole suite in about a second.
//
// # What the suite guarantees
//
// Every clause of the Store contract ([lease.Store]) has at least one
// planted mistake, and every mistake at least two cases that fail on it.
// The suite's own tests plant the mistakes, one at a time, in front of
// memstore (store mistakes, memstore-wrapping analogues of mistakes seen
// in the real stores; the grant limit's in a store that emulates
// ZooKeeper's sessions on memstore, which passes the suite without it)
// and in copies of the lease package's sources (lease mistakes, compiled
// with go test -overlay), and check that each case named below fails on
// each (TestMutants fails otherwise). The cases judge what any store
// shows (records, tokens, the times calls were sent and answered), never
// memstore's internals, so a store that passes the suite is free of each
// listed mistake, as far as the named cases can see it:
//
//	The Store contract (lease/store.go); mistakes planted in front of memstore:
//	  Acquire grants a free lock
//	    - the first Acquire of a new lock loses: TryAcquire, Transition, StaleRenewRelease, OddNames, OddIDs
//	  Acquire grants a held lock only once its transition has ended
//	    - takeover at the end of ttl, in the holder's transition: Transition, TakeoverAfterAbandon
//	    - grants run for twice their transition: Transition, TakeoverAfterAbandon, Guard
//	  Acquire by the holder of a live grant extends it under the same token
//	    - the holder's Acquire mints a new token: Transition, TokensIncrease
//	  a new grant's token is above every earlier grant's, across server restarts and deletions of the lock's state
//	    - the token counter is read, not incremented: Restart, TokensIncrease, TryAcquire, StaleRenewRelease, Transition
//	    - tokens restart when a free lock's state is reaped: Restart, TokensIncrease, TryAcquire, StaleRenewRelease, Transition
//	  Renew extends only the live grant (contender and token) and never re-acquires
//	    - Renew is an Acquire: StaleRenewRelease, TakeoverAfterAbandon, OddIDs
//	    - Renew ignores the token: StaleRenewRelease, Transition
//	    - a lapsed grant is revived by its holder's late Renew: StaleRenewRelease, Transition
//	  Renew runs the grant for ttl, then transition, from the server's now
//	    - Renew extends by ttl only, yet reports ttl + transition: Transition, PartitionedHolderRenewed, PartitionedLeaderRenewed, Guard
//	    - Renew answers success without extending the grant: Transition, PartitionedHolderRenewed, PartitionedLeaderRenewed
//	  Release by the holder (contender and token) ends the grant at once and wakes a waiter; any other Release leaves the grant alone
//	    - Release answers success but leaves the grant: Start, TryAcquire, StaleRenewRelease
//	    - Release by anyone frees the lock: StaleRenewRelease, TakeoverAfterAbandon, OddIDs
//	    - Release ignores the token: StaleRenewRelease, Transition
//	    - no wake-up on release (no Watch): ReleaseWakesWaiter, CloseReleases
//	  every Release withdraws its contender from the wait queue (token 0 does only that)
//	    - a Release that ends no grant keeps its contender queued: TryAcquire, CancelWhileWaiting, FairHandoff
//	  a store that claims a fair queue serves the longest waiter first
//	    - the newest waiter is woken first: FairHandoff, ReleaseWakesWaiter
//	  a store that limits its grants tells its holder no more than it surely keeps, at most its MaxGrant
//	    - a session-bound store reports the grant asked, beyond its session: Transition, TakeoverAfterAbandon, PartitionedHolderRenewed, PartitionedLeaderRenewed
//	  Get changes nothing
//	    - Get extends the grant: Transition, TakeoverAfterAbandon, PartitionedHolder, PartitionedLeader
//	  no two names, and no two contender ids, are confused
//	    - names folded to lower case: OddNames, OddIDs
//	    - names cut at 64 bytes: OddNames, OddIDs
//	    - contender ids cut at 64 bytes: OddNames, OddIDs
//	The lease protocol, on every store; mistakes planted in package lease:
//	  the holder renews about every ttl/3
//	    - renewal at ttl instead of ttl/3: Guard, TokensIncrease
//	  waiters retry around the owner's transition end with a jitter
//	    - no jitter: MultiContend, TakeoverAfterAbandon
//	  Stop releases only once the callbacks have returned
//	    - Stop releases before the callbacks return: MultiContend, Schedule, CloseReleases
//	  a lease ends at its deadline even while a store call hangs
//	    - the deadline waits for a hung renewal, also one that returns at its call timeout: PartitionedHolder, PartitionedLeader, PartitionedHolderRenewed
//	  a deadline counts from when the confirming call was sent
//	    - the deadline counts from the reply: SlowStore, PartitionedHolderRenewed, PartitionedLeaderRenewed
//	  a renewal answered ErrNotHeld ends the lease at once
//	    - ErrNotHeld is retried like a failure: RevokedLease, RevokedLeader
//	  a lease's context ends before its release is sent
//	    - the context ends once the store has released: ReleaseWakesWaiter, TryAcquire, CloseReleases
//
// The tck package's TestMutants prints this list with every case that
// failed on each mistake (go test -v -run TestMutants ./tck; make test
// prints it too), and TestGuarantees keeps this table equal to the list
// the mutants run from.
package tck
