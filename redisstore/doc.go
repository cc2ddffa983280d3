// Package redisstore is a [lease.Store] on Redis through a go-redis v9
// client the caller owns: standalone, Sentinel (redis.NewFailoverClient) or
// Redis Cluster.
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
// Each operation is one Lua script (acquire.lua, renew.lua, release.lua,
// get.lua, embedded), run atomically by EVALSHA with an EVAL fallback, every
// key passed in KEYS. The keys of one mutex share one hash tag, the
// base64url encoding of its name, so they live in one cluster slot and any
// name (braces, colons, spaces, any UTF-8) works without collisions. See
// keys.go for the layout under the prefix ([WithKeyPrefix]).
//
// One clock decides: the server's. A grant is a hash whose PX is ttl +
// transition; remaining durations come from PTTL. Scripts read the server's
// TIME only for tokens and queue expiry (Redis 7 replicates script effects,
// not scripts, so this is deterministic on replicas).
//
// # Fencing tokens
//
// A new grant's token is the larger of the mutex's counter plus one and
// the server's time in microseconds. Tokens therefore strictly increase
// per mutex, also when Redis restarts empty without persistence: a fresh
// counter starts at the current time, above every earlier token (which
// was at most the time of its grant, as long as fewer than one grant per
// microsecond happened — scripts run one at a time and each takes longer).
// The counter key expires 24 hours after the mutex's last grant, so
// abandoned names leave nothing behind for long; a counter that expired
// only matters if the server's clock stepped back by more than that.
// Tokens are about 1.7e15 today and fit uint64 (and Lua's exact integers,
// up to 2^53, until the year 2255).
//
// # Restarts and eviction
//
// A Redis that restarts without persistence forgets every grant, and a
// holder would go on believing it holds its mutex while the server hands it
// to someone else. The restart guard ([WithRestartGuard], on by default)
// closes this: a mutex without a fencing counter on a server that has been
// up for less than the requester's ttl + transition (plus a second) is held
// back until then, so every forgotten grant has run out, and its holder has
// been told, before the mutex is granted again. Keys must never be evicted:
// run Redis with maxmemory-policy noeviction (every key of the Store has an
// expiry, so the volatile-* policies would evict them).
//
// # Failover (asynchronous replication)
//
// Redis replicates asynchronously. When a primary fails and a replica that
// had not yet received the latest grant is promoted, that grant is gone:
// another contender can be granted the mutex while the first holder still
// believes it holds it, until its lease runs out. Two holders are then
// possible; only fencing protects the resource. Tokens still never repeat
// or go backwards across the failover, as long as the new primary's clock
// is not behind the old one's by more than the failover took, because the
// new grant's token is at least the new primary's time in microseconds.
// [WithWaitReplicas] makes Acquire wait (WAIT) until replicas acknowledged
// each grant, which closes most of the window, but not all: WAIT is not a
// consensus protocol, renewals are not waited for, and a replica that
// acknowledged can still lose the election to one that did not. Use fencing
// tokens at the resource when two holders would cost money.
//
// # Fair queue and hand-off
//
// A losing Acquire enqueues its contender (FIFO by first arrival) with an
// expiry of 2 × (ttl + transition) from its latest attempt, so a crashed
// waiter stops absorbing wake-ups. The winner leaves the queue, and Release
// removes the caller's entry whatever the token (token 0 only withdraws).
// When a Release frees the mutex, the longest live waiter is woken through
// pub/sub and, for a short window ([WithHandoff]), only it may take the
// mutex; others get an empty Owner and a positive Transition, the time to
// try again. A waiter that does not come in time leaves the queue at the
// next call on the mutex, and the next waiter gets a window and a wake-up.
// When a grant's transition simply ends (a crashed holder), nothing is
// held back: waiters poll then, and the first Acquire wins.
//
// # Push and polling
//
// Scripts publish on the mutex's channel (PUBLISH, or SPUBLISH on Redis
// Cluster); a Store keeps one subscription connection per server it
// watches, multiplexing all open Watch calls, and one reader goroutine for
// it, both ended shortly after the last Watch ends, or by [Store.Close]. Events are
// hints only: the lease package also polls at the owner's transition end,
// so a lost message or a killed subscription delays a waiter but never
// blocks it. Clients other than *redis.Client and *redis.ClusterClient (a
// *redis.Ring) get no push ([ErrNoPush]) and only poll.
//
// # Errors
//
// Losing is not an error. ErrNotHeld comes only from Renew and Release.
// Every other error — a connection error, a timeout, LOADING, TRYAGAIN,
// CLUSTERDOWN, a reply the Store did not write ([ErrUnexpectedReply]) —
// means the outcome is unknown; the lease package retries or gives up
// safely. A grant is only ever reported from a script's own reply.
// MOVED and ASK are followed by go-redis.
package redisstore
