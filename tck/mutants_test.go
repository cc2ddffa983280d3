package tck_test

import (
	"testing"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
	"github.com/simba-go/simba/tck"
)

// What the suite guarantees: each clause of the Store contract
// (lease/store.go) and of the lease protocol the cases check, the mistakes
// planted against it, and the cases that must fail on each mistake. The
// table in the package documentation (doc.go) is printed from this list;
// TestGuarantees keeps the two equal and every mistake with at least two
// killing cases, and TestMutants proves every kill.

// clause is one promise and the mistakes planted against it.
type clause struct {
	text     string
	mistakes []mutant
}

// mutant is one planted mistake: in front of memstore (store), in a
// harness of its own on memstore (open), or in the lease package's sources
// (patches).
type mutant struct {
	name    string
	killers []string // cases that must fail against it
	store   func(*memstore.Store) lease.Store
	open    func(t *testing.T) tck.Backend
	patches []patch
}

// storeClauses are the clauses of the Store contract (lease/store.go).
var storeClauses = []clause{
	{"Acquire grants a free lock", []mutant{
		{name: "the first Acquire of a new lock loses", store: plant(firstAcquireLoses),
			killers: []string{"TryAcquire", "Transition", "StaleRenewRelease", "OddNames", "OddIDs"}},
	}},
	{"Acquire grants a held lock only once its transition has ended", []mutant{
		{name: "takeover at the end of ttl, in the holder's transition", store: plant(earlyTakeover),
			killers: []string{"Transition", "TakeoverAfterAbandon"}},
		{name: "grants run for twice their transition", store: plant(longTransition),
			killers: []string{"Transition", "TakeoverAfterAbandon", "Guard"}},
	}},
	{"Acquire by the holder of a live grant extends it under the same token", []mutant{
		{name: "the holder's Acquire mints a new token", store: plant(reacquireNewToken),
			killers: []string{"Transition", "TokensIncrease"}},
	}},
	{"a new grant's token is above every earlier grant's, across server restarts and deletions of the lock's state", []mutant{
		{name: "the token counter is read, not incremented", store: plant(counterRead),
			killers: []string{"Restart", "TokensIncrease", "TryAcquire", "StaleRenewRelease", "Transition"}},
		{name: "tokens restart when a free lock's state is reaped", store: plant(reapedCounter),
			killers: []string{"Restart", "TokensIncrease", "TryAcquire", "StaleRenewRelease", "Transition"}},
	}},
	{"Renew extends only the live grant (contender and token) and never re-acquires", []mutant{
		{name: "Renew is an Acquire", store: plant(renewAcquires),
			killers: []string{"StaleRenewRelease", "TakeoverAfterAbandon", "OddIDs"}},
		{name: "Renew ignores the token", store: plant(renewAnyToken),
			killers: []string{"StaleRenewRelease", "Transition"}},
		{name: "a lapsed grant is revived by its holder's late Renew", store: plant(lapsedRevived),
			killers: []string{"StaleRenewRelease", "Transition"}},
	}},
	{"Renew runs the grant for ttl, then transition, from the server's now", []mutant{
		{name: "Renew extends by ttl only, yet reports ttl + transition", store: plant(renewTTLOnly),
			killers: []string{"Transition", "PartitionedHolderRenewed", "PartitionedLeaderRenewed", "Guard"}},
		{name: "Renew answers success without extending the grant", store: plant(renewNoExtend),
			killers: []string{"Transition", "PartitionedHolderRenewed", "PartitionedLeaderRenewed"}},
	}},
	{"Release by the holder (contender and token) ends the grant at once and wakes a waiter; any other Release leaves the grant alone", []mutant{
		{name: "Release answers success but leaves the grant", store: plant(releaseKeepsGrant),
			killers: []string{"Start", "TryAcquire", "StaleRenewRelease"}},
		{name: "Release by anyone frees the lock", store: plant(releaseByAnyone),
			killers: []string{"StaleRenewRelease", "TakeoverAfterAbandon", "OddIDs"}},
		{name: "Release ignores the token", store: plant(releaseAnyToken),
			killers: []string{"StaleRenewRelease", "Transition"}},
		{name: "no wake-up on release (no Watch)", store: plant(noWakeUp),
			killers: []string{"ReleaseWakesWaiter", "CloseReleases"}},
	}},
	{"every Release withdraws its contender from the wait queue (token 0 does only that)", []mutant{
		{name: "a Release that ends no grant keeps its contender queued", store: plant(releaseKeepsQueue),
			killers: []string{"TryAcquire", "CancelWhileWaiting", "FairHandoff"}},
	}},
	{"a store that claims a fair queue serves the longest waiter first", []mutant{
		{name: "the newest waiter is woken first", store: plant(newestFirst),
			killers: []string{"FairHandoff", "ReleaseWakesWaiter"}},
	}},
	{"a store that limits its grants tells its holder no more than it surely keeps, at most its MaxGrant", []mutant{
		{name: "a session-bound store reports the grant asked, beyond its session", open: sessionBackend(sessionLimit, true),
			killers: []string{"Transition", "TakeoverAfterAbandon", "PartitionedHolderRenewed", "PartitionedLeaderRenewed"}},
	}},
	{"Get changes nothing", []mutant{
		{name: "Get extends the grant", store: plant(getExtends),
			killers: []string{"Transition", "TakeoverAfterAbandon", "PartitionedHolder", "PartitionedLeader"}},
	}},
	{"no two names, and no two contender ids, are confused", []mutant{
		{name: "names folded to lower case", store: plant(caseFoldedNames),
			killers: []string{"OddNames", "OddIDs"}},
		{name: "names cut at 64 bytes", store: plant(namesCut),
			killers: []string{"OddNames", "OddIDs"}},
		{name: "contender ids cut at 64 bytes", store: plant(idsCut),
			killers: []string{"OddNames", "OddIDs"}},
	}},
}

// leaseClauses are the clauses of the lease protocol that the cases check
// on every store; their mistakes are planted in the lease sources.
var leaseClauses = []clause{
	{"the holder renews about every ttl/3", []mutant{
		{name: "renewal at ttl instead of ttl/3", patches: renewAtTTL,
			killers: []string{"Guard", "TokensIncrease"}},
	}},
	{"waiters retry around the owner's transition end with a jitter", []mutant{
		{name: "no jitter", patches: noJitter,
			killers: []string{"MultiContend", "TakeoverAfterAbandon"}},
	}},
	{"Stop releases only once the callbacks have returned", []mutant{
		{name: "Stop releases before the callbacks return", patches: stopReleasesEarly,
			killers: []string{"MultiContend", "Schedule", "CloseReleases"}},
	}},
	{"a lease ends at its deadline even while a store call hangs", []mutant{
		{name: "the deadline waits for a hung renewal, also one that returns at its call timeout", patches: renewBlocksDeadline,
			killers: []string{"PartitionedHolder", "PartitionedLeader", "PartitionedHolderRenewed"}},
	}},
	{"a deadline counts from when the confirming call was sent", []mutant{
		{name: "the deadline counts from the reply", patches: deadlineFromReply,
			killers: []string{"SlowStore", "PartitionedHolderRenewed", "PartitionedLeaderRenewed"}},
	}},
	{"a renewal answered ErrNotHeld ends the lease at once", []mutant{
		{name: "ErrNotHeld is retried like a failure", patches: notHeldRetried,
			killers: []string{"RevokedLease", "RevokedLeader"}},
	}},
	{"a lease's context ends before its release is sent", []mutant{
		{name: "the context ends once the store has released", patches: cancelAfterRelease,
			killers: []string{"ReleaseWakesWaiter", "TryAcquire", "CloseReleases"}},
	}},
}
