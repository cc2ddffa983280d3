// Package redisstore is a [lease.Store] on Redis through a go-redis v9
// client the caller owns: standalone, Sentinel (redis.NewFailoverClient),
// Redis Cluster or a Ring.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // yours
//	store, err := redisstore.New(rdb)
//	if err != nil { ... }
//	defer store.Close() // ends its subscriptions; rdb stays open
//	m, err := lease.NewManager(store)
//	if err != nil { ... }
//	defer m.Close(ctx)
//	l, err := m.Acquire(ctx, "orders/42")
//
// It implements the optional [lease.Watcher] (pub/sub wake-ups) and
// [lease.BatchRenewer] (one round trip per node per renewal tick).
//
// # How it works
//
// Acquire, release and get are each one Lua script (acquire.lua,
// release.lua, get.lua, embedded), run atomically. A script gets the
// lock's record key alone (acquire also the epoch key of its slot) and
// names the lock's other keys from it, which share its hash tag; the
// Store's constants (hand-off window, publish command, retention) are part
// of its acquire and release texts, so a call sends only the contender,
// the durations or the token. Acquire and release begin with a fast path
// for a lock nobody waits for or observes (acquirefast.lua,
// releasefast.lua): one pattern match accepts only a record without
// flags or hold, and the path returns before the shared helpers are made,
// a few µs of the server's time instead of tens. The keys of one lock
// share one hash tag, the base64url encoding of its name, so they live in
// one cluster slot and any name (braces, colons, spaces, any UTF-8) works
// without collisions. A lock has one record key
// (its last token, owner, transition, queue and hold flags, in one string)
// and, while held, a grant key named by the grant's token and owner, which
// expires at the grant's transition end. See keys.go for the layout under
// the prefix ([WithKeyPrefix]).
//
// One clock decides: the server's. Expiries are Redis's own (PX, PTTL);
// remaining durations come from PTTL. Scripts read the server's TIME only
// for the queue, holds and new counters (Redis 7 replicates script effects,
// not scripts, so this is deterministic on replicas).
//
// What each operation costs the server, counted as INFO's
// total_commands_processed counts (a script and every command it runs): an
// uncontended acquire and release, 6 commands (EVALSHA, GET of the record,
// PTTL of the last grant key, SET of the grant and of the record; GETDEL
// of the grant key); on a name without a record, one more (TIME and the
// slot's epoch key instead of the last grant's PTTL). A grant the acquire
// script's fast path made is released by that one GETDEL while its key is
// a string; a waiter or an observer that comes makes the key a hash, so
// the GETDEL fails (WRONGTYPE, nothing done) and the release script runs
// and tells them. Other grants (a hand-off, a retried acquire) are
// released by the script at once. A renewal of a grant the Store made is one PEXPIRE
// of its grant key, without a script (1: renewed; 0: not held, and the
// renew script then reports the owner); the renew script runs instead
// about once per retention/2 per grant, to extend its record, and for
// grants the Store did not make. Each renewal call (RenewMany: a
// Manager's renewal tick) adds one TIME per server to its pipeline, no
// round trip: the server's clock, reported as lease.Record.ServerTime so
// that the lease can detect steps of that clock (on Redis Cluster and a
// Ring, without [WithWaitReplicas], renewals report none; nor do acquires,
// releases and gets). INFO runs once per Store and server life
// (see Restarts) and once per slot after a flush, never per operation.
//
// Round trips: a Store on one server (a *redis.Client, without
// [WithWaitReplicas]) coalesces the script calls of the goroutines that
// share it (a Manager's callers, or several Managers on one Store): a call
// that finds none in flight is sent at once from the caller's goroutine;
// the calls that arrive while one call or pipeline is in flight collect,
// and go as the next pipeline (at most 128 calls), so 64 goroutines cost
// about one round trip per 30 acquire-release cycles instead of two per
// cycle. Each call keeps its own reply and error; a call whose context
// ends while it waits in the queue returns at once and is never sent; a
// lease's start is still taken before its call queues. On Redis Cluster
// and a Ring, each call is a round trip of its own.
//
// # Fencing tokens
//
// A grant's token is one above the larger of the lock's counter, kept in
// the lock's record, and the token floor: the highest token that any
// Store of the process has had in a reply (a grant, a refusal, Get, a
// renewal, an observer's event), one per process, which every acquire
// sends. A record is created (for a new name, or one whose record is gone)
// or adopted (after a restart from a snapshot or an AOF, or a failover)
// with its counter raised to at least the server's time in microseconds.
// So tokens strictly increase per lock while its record lives, whatever
// the clocks do, renewals (and a holder's retried acquire) keep the token,
// and a new grant's token exceeds every token the process's Stores
// returned before its Acquire began.
// Once a record is lost — expired after the retention, a restart without
// persistence or from a snapshot or AOF that lacks the latest grants,
// FLUSHALL, FLUSHDB or SWAPDB, a failover to a replica that had not
// received it — the next token is also larger than the lock's earlier ones
// that the process never saw, unless the server's clock (the new
// primary's after a failover) reads earlier than it did when the lost
// record was created, plus one microsecond per grant made from that
// record: in practice, unless the clock stepped back by more than the
// record's age. Tokens are about 1.8e15 today and fit uint64 (and Lua's
// exact integers, up to 2^53, until the year 2255).
//
// # Retention
//
// A free lock leaves one key behind, its record, which expires one
// retention ([WithRetention], default 10 minutes) after its last write; a
// held lock's record always outlives the grant. A service that locks one
// name per order id thus keeps about (names used per retention) records,
// plus the queue keys of names that have waiters (which expire 2 × (ttl +
// transition) after the last waiter's last attempt) and one epoch key per
// cluster slot (one per server elsewhere), which never expires. Stores that
// share locks should share the retention: the shortest one decides how
// long a counter lasts.
//
// # Restarts and flushes
//
// A Redis server that restarts forgets its latest writes: all of them
// without persistence, the ones after the last snapshot with RDB, up to a
// second or two with AOF appendfsync everysec after a crash of the machine.
// A flush (FLUSHALL, FLUSHDB, SWAPDB) forgets everything. A grant lost this
// way is still believed by its holder until its deadline. The restart guard
// ([WithRestartGuard], on by default) holds a lock back, as a hand-off is,
// until every grant the server may have forgotten has run out and its
// holder has been told:
//
//   - Restarts. The script cache is empty after every restart (and kept by
//     a flush), so the Store loads into each server life an acquire script
//     of its own, which names the life (run_id) and the latest instant it
//     can have begun (server time less uptime_in_seconds, plus a second):
//     INFO and SCRIPT LOAD run over one connection once per Store and
//     server life, on the NOSCRIPT that marks a new one. Each record carries
//     the life that last adopted it. A record from another life (restored
//     from a snapshot or an AOF), or no record at all, is held back until
//     the life's start plus the requester's ttl + transition; a grant
//     restored from disk is never extended by Acquire in that time, so its
//     token cannot come back while a lost later grant is believed.
//   - Flushes. Each slot (each server outside Redis Cluster) has an epoch
//     key without expiry, which only a flush (or a hand) removes. A name
//     without a record in a slot whose epoch key is gone makes the script
//     ask INFO commandstats whether FLUSHALL, FLUSHDB or SWAPDB ran in this
//     server life; if one did, the slot's record-less names are held back
//     for the requester's ttl + transition from then, and the epoch key is
//     written again (once per slot per flush).
//
// The guard assumes that a lost holder used at most the requester's ttl +
// transition, that the Store's keys are changed only by Stores (no DEL by
// hand, no CONFIG RESETSTAT between a flush and the next acquire in a slot,
// which would hide the flush, no SWAPDB with another database that Stores
// use, whose epoch keys would come along), and that keys are never evicted: run Redis
// with maxmemory-policy noeviction (every key but the epoch keys has an
// expiry, so the volatile-* policies would evict them). SCRIPT FLUSH is
// harmless: the next acquire loads the script again.
//
// # Failover (asynchronous replication)
//
// Redis replicates asynchronously. A replica promoted to primary lacks the
// writes it had not received: a grant, or the renewal that extended it.
// Without [WithWaitReplicas], another contender can then be granted the
// lock while the holder still believes it holds it, until its deadline:
// two holders are possible, and only fencing tokens protect the resource
// (they keep increasing, see above). With WithWaitReplicas(n, timeout),
// every grant and every renewal waits (WAIT) until n replicas acknowledged
// it, and the holder counts it only then; a renewal that is not
// acknowledged is not counted, so a holder cut off from its replicas is
// told at its deadline. A replica that acknowledged every grant and renewal
// its holders counted has each of them, with at least the expiry they
// count on, so promoting it grants nobody a lock whose holder still
// believes it holds it, provided that the promoted replica is among those
// that acknowledged (make n the number of replicas that can be promoted)
// and that the primary's and the replicas' clocks agree within the
// holders' safety margin (expiries travel as absolute times). WAIT is not
// a consensus protocol: a replica that did not acknowledge, promoted by an
// operator or a Sentinel that prefers it, can still lose a counted grant.
//
// # Fair queue and hand-off
//
// A losing Acquire enqueues its contender (FIFO by first arrival) with an
// expiry of 2 × (ttl + transition) from its latest attempt, so a crashed
// waiter stops absorbing wake-ups; the record's queue flag keeps this off
// the path of a lock nobody waits for. The winner leaves the queue, and
// Release removes the caller's entry whatever the token (token 0 only
// withdraws). When a Release frees the lock, the longest live waiter
// (the head) is woken through pub/sub and, for a short window
// ([WithHandoff]), only it may take the lock; others get an empty OwnerID
// and a positive Transition, the time to try again. The release message
// also names the waiter after the head: its Watch wakes it when the window
// ends, unless it hears the head's grant first, so a head that crashed
// (a process killed while waiting) delays the next waiter by one window,
// not until the old owner's transition end. At the lapse the head leaves
// the queue, and the next waiter gets the lock (or its own window and
// wake-up when another call noticed the lapse first). When a grant's
// transition simply ends (a crashed holder), nothing is held back: waiters
// poll then, and the first Acquire wins.
//
// # Push and polling
//
// Scripts publish on the lock's channel (PUBLISH, or SPUBLISH on Redis
// Cluster) when someone waits or observes: the record carries a flag for
// each, set by a waiter's Acquire and an observer's Watch, and a message
// nobody receives clears the observers' flag. A Store keeps one
// subscription connection per server it watches, multiplexing all open
// Watch calls, and one reader goroutine for it, both ended shortly after
// the last Watch ends, or by [Store.Close]. Events are hints only: the
// lease package also polls at the owner's transition end, so a lost
// message or a killed subscription delays a waiter but never blocks it. A
// *redis.Ring gets no push ([ErrNoPush]) and only polls.
//
// # Errors
//
// Losing is not an error. ErrNotHeld comes only from Renew and Release.
// Every other error — a connection error, a timeout, LOADING, TRYAGAIN,
// CLUSTERDOWN, a reply the Store did not write ([ErrUnexpectedReply]) —
// means the outcome is unknown; the lease package retries or gives up
// safely. A grant is only ever reported from a script's own reply. MOVED
// and ASK are followed by go-redis; while a slot moves between servers an
// Acquire may fail (its script is loaded per server) and is retried.
//
// The ACL user of the client needs the scripting commands (EVALSHA, EVAL,
// SCRIPT LOAD), INFO, TIME, PEXPIRETIME and PEXPIREAT (in scripts),
// PEXPIRE, GETDEL, WAIT with [WithWaitReplicas], (S)PUBLISH and
// (S)SUBSCRIBE on the channels, and the keys under the prefix; a refusal
// is [lease.ErrStoreSetup].
//
// Stores of different configurations or versions of this layout may share
// locks, during a rolling upgrade too: scripts whose constants were
// arguments and which were given every key of a lock, and those that name
// the keys from the record key, read and write the same keys, records and
// messages; each Store runs its own scripts, under their own SHAs. Only
// a waiter or an observer of a version before the GETDEL release (which
// does not make the grant key a hash) is not woken by the release of a
// grant a later version's fast path made: it finds the lock free when it
// polls (at about the end of that grant's transition).
//
// This layout (a string record and grant keys) replaced the hash of
// earlier versions: stop every process of an earlier version before
// starting this one on the same locks, or they will not see each
// other's grants.
package redisstore
