// Package sqlstore is a [lease.Store] on PostgreSQL, MySQL/MariaDB or SQLite
// through a *sql.DB the caller owns. SQLite (see [NewSQLite]) needs no
// server: processes on one host share a file.
//
// Set-up, once per database (see package schema), then one Store and one
// Manager per process:
//
//	db, err := sql.Open("pgx", "postgres://app@db/app") // pgx v5 stdlib, or lib/pq
//	if err != nil { ... }
//	db.SetMaxOpenConns(16)
//	db.SetMaxIdleConns(16)
//	if err := schema.Migrate(ctx, db, schema.Postgres); err != nil { ... }
//	store, err := sqlstore.NewPostgres(db) // or schema.MySQL + NewMySQL, schema.SQLite + NewSQLite
//	if err != nil { ... }
//	defer store.Close()
//	m, err := lease.NewManager(store)
//	if err != nil { ... }
//	defer m.Close(ctx)
//	l, err := m.Acquire(ctx, "orders/42")
//
// The Store never opens, closes or configures db; size its pool for the
// Managers that share it. Bound it, and keep as many idle connections as
// it may open (SetMaxIdleConns equal to SetMaxOpenConns): database/sql
// keeps 2 by default, and the connections a burst opens beyond that are
// closed and opened again, a new server session each time. SetMaxOpenConns(8)
// to (16) serves thousands of leases: a Manager renews all the leases it
// holds in one statement per renewal tick ([Store.RenewMany], 500 leases
// a statement). Push needs at least four.
//
// On SQLite every process shares the file's write lock, and every
// acquire, renewal and release is a write transaction: a process stopped
// (SIGSTOP, a debugger, a frozen container or VM) inside one keeps every
// other process from taking, renewing or releasing any lock of the file
// until it resumes, however long ago its own lease ended. Its late writes
// are still fenced, but liveness on SQLite assumes that no contender is
// stopped; a server store (PostgreSQL, MySQL) has no such shared lock.
// The Stores' writes take turns through a lock file beside the database
// ([WithSQLiteWriteLock]); a process stopped while it holds that turn
// holds the others back the same way, and a write waiting for its turn
// ends with its context.
//
// # How it works
//
// One row per lock in the table simba_mutex (or the one named by
// [WithTable]): owner_id, acquired_at, ttl_at, transition_at (epoch
// milliseconds on the server's clock), token (the fencing counter), version
// (bumped on every write) and queue (the wait queue, below). Every
// operation is one conditional statement with optimistic concurrency — an
// upsert or an UPDATE whose WHERE names the owner, the token and the
// expiry — with no SELECT … FOR UPDATE and no transaction spanning
// statements. Expiry is decided by the server's clock only (PostgreSQL
// clock_timestamp(); MySQL UNIX_TIMESTAMP() arithmetic, which the session
// time zone cannot shift), and the Store reports remaining durations
// computed from the server's now.
//
// Tokens: a new grant sets token to the previous value plus one; renewals
// and extensions keep it; a release clears the owner but keeps the counter
// in the row, so tokens of a lock only grow, across server restarts. The
// row of a lock nobody has held for a while is deleted ([Store.Prune],
// in the background after [WithRetention], a day by default); the highest
// token of the rows deleted is kept in the row whose lock is the empty string (the
// token floor), and a new row starts above it, so a name that comes back
// still gets a token above every token it had.
//
// Round trips: acquire, renew, release and get take one statement each,
// and an acquire that loses returns the owner in the same one — on MySQL
// too when the server is MariaDB 10.5 or later (RETURNING); MySQL, which
// has none, reads a lost attempt back with a second statement. The MySQL
// and SQLite statements are prepared once per connection and kept (on
// PostgreSQL pgx does it), so the server does not parse them on every
// call, and with go-sql-driver/mysql each runs in one round trip whatever
// the DSN's interpolateParams. On PostgreSQL and MariaDB a release whose
// grant was made while nobody was queued runs a plain single-row update
// (the server's cost of a statement bounds many clients' throughput); when
// someone queued since, it finds the queue and runs the full release
// statement, which hands over: a second round trip, on that release
// only. On PostgreSQL the release of a grant to a contender that waited
// for it (under contention, the one it took the lock from queues again
// meanwhile) hands over at once, with a plain single-row update too while
// the first waiter's queue entry is live, and the full release statement,
// which cuts expired entries out of the queue, otherwise. On MySQL a contender that this
// Store queued and whose doorbell did not take the lock for it (see Push)
// takes a free lock with a plain single-row update when it heads the
// queue, and runs the full acquire statement only when that changes
// nothing: a second round trip for a queued waiter that was not first.
//
// # Fair hand-off
//
// A contender that loses while it waits through a lease.Manager (it
// watches the lock through this Store, see [Store.Watch]) joins the
// lock's wait queue, kept in its row: oldest first, at most 128 entries,
// each with an expiry of 2 × (ttl + transition) from its latest attempt, so
// a crashed waiter drops out. The winner leaves the queue, and [Store.Release]
// withdraws the caller in any case (token 0 only withdraws). When a release
// leaves live waiters, the lock is reserved for the first one for the
// hand-off window ([WithHandoff], 1 s by default) and only that waiter is
// woken; others that try meanwhile get an empty OwnerID and a positive
// Transition, the time to try again (for a waiter behind the first two,
// the window plus a grant as long as its own: it cannot have the lock
// sooner, and is woken when its turn comes). A first waiter that does not come in
// time (it died) loses its place to whoever comes next, and the waiter
// after it is woken when the window ends, so a dead waiter at the head
// delays the next one by about the window, not by a grant. When a grant's
// transition simply ends (a crashed holder), nothing is held back: waiters
// poll then, and the first one wins. A hand-off costs a release, the
// waiter's acquire and the previous holder's acquire that queues it again
// (a lease.Manager whose last grant of a name came after a lost attempt
// subscribes before its next first attempt, so that one attempt queues
// it): 3 statements on PostgreSQL and MySQL, where the waiter's doorbell
// wait is its acquire (see Push; with LISTEN on PostgreSQL, plus one
// transaction per session that LISTENs, as the server counts them).
//
// # Push
//
// How the first waiter is woken, at once instead of at the owner's
// transition end:
//
//   - PostgreSQL (by default, [WithPostgresDoorbells]): as on MySQL
//     below, with session-level advisory locks as the doorbells (a 64-bit
//     key per contender and lock), and the wait is the waiter's acquire
//     there too: about 4 transactions per hand-off at K = 32
//     (BenchmarkHandoffK, cold start included), at the cost of a
//     connection per waiting contender and lock and, since a waiting
//     statement keeps its snapshot, a statement at least every 10 s per
//     waiter. The waiting statement's snapshot predates the release, so
//     its UPDATE matches the row by name and decides the grant on the
//     row's latest version (READ COMMITTED re-evaluates it there); the
//     grant's expiries run from the server's clock after the wait, later
//     than the send time the contender counts from. A wait is ended with
//     pg_cancel_backend, which a role may call on its own sessions; a
//     statement it cancels rolls back. Under REPEATABLE READ or
//     SERIALIZABLE as the session's default, the UPDATE fails (40001) and
//     the contender's own acquire takes the lock, as without the push.
//   - PostgreSQL with WithPostgresDoorbells(false): a release that leaves
//     waiters sends a NOTIFY naming the lock, the first waiter and the one
//     after it, to the Store of each of them only: every Store has a
//     channel of its own, named after the table and a random tag that
//     starts its contenders' queue keys. A release that leaves nobody
//     waiting sends none (PostgreSQL serializes notifying commits on one
//     server-wide lock). While any waiter of this Store waits, and for 30 s
//     after the last one, one connection borrowed from the pool LISTENs on
//     the Store's channel (pgx's stdlib driver only: with another driver
//     Watch fails with [ErrNoPush] and waiters poll). A waiter joins the
//     queue only once that connection listens. (PostgreSQL through 18
//     still wakes every listening session of the database on each
//     notifying commit, and counts its reading of the queue as a
//     transaction: K + 3 transactions per hand-off among K waiting Stores.)
//   - MySQL: a waiter holds, on a connection borrowed from the pool, a
//     named lock (GET_LOCK) of its own, its doorbell, and blocks on the
//     doorbell of whom it waits behind (the waiter before it, or the
//     owner); a release lets the owner's doorbell go, which wakes the first
//     waiter and only it. The wait is also the waiter's acquire: a single
//     UPDATE whose derived table waits for the doorbell (so the row is not
//     locked while it waits) grants the lock to the waiter, once the bell
//     lets go, when it heads the queue, with the grant's expiries counted
//     from the statement's start; the contender's next Acquire takes that
//     grant without a statement, its time left counted from when the wait
//     was sent (so its deadline is never later than the server's), or runs
//     its statement, which extends the grant, when half the ttl or more has
//     passed since. A wait is ended with KILL QUERY from another connection
//     (any user may interrupt its own sessions), never by closing its
//     connection, so whether it took the lock is always known; a grant it
//     took for a contender that left meanwhile is released at once. (A
//     wait that no interruption ends within a second is cancelled, which
//     closes its connection; then, as when the connection breaks, a grant
//     it may have taken lapses by itself, at most ttl + transition after
//     the wait's start.) A waiter that gets the lock keeps its doorbell
//     (and its connection) until it releases, in the release statement
//     itself, prepared on that connection (MariaDB takes about as long to
//     parse the statement's text as to run it). The connection then stays
//     with the contender, its bells let go, for up to 10 s, so that its
//     next wait for the lock needs no new connection and no new
//     preparation; a waiter of another lock that finds no room takes its
//     place. A holder that did not wait takes its doorbell, on one shared
//     connection, once it learns that others wait (its acquire or renewal
//     sees them); until then a waiter behind it tries the row now and then
//     on its doorbell connection (1 ms doubling to 1 s). An uncontended
//     grant does no doorbell work.
//     At most [WithDoorbells] connections, and never more than half the
//     pool.
//   - SQLite: while anyone waits, one connection of the pool reads PRAGMA
//     data_version (a local read; it changes when another connection or
//     process commits) every 20 ms, every 1 ms while a waiter of this Store
//     is first or second in a queue (every n ms while n waiters are ahead
//     of it, and at once when it has just joined the queue), and wakes
//     the waiter a release reserved the lock for.
//
// Notifications are hints: the row is the only source of truth, and every
// waiter still polls, so a lost notification delays a waiter but never
// blocks it. A broken push connection is replaced with backoff, and every
// waiter checks again once it is back. Push needs a pool of at least four
// connections and a server session that lives as long as the connection:
// turn it off with [WithPush] behind PgBouncer in transaction mode or
// ProxySQL (then waiters neither queue nor are woken: they poll, and
// releases notify nobody).
//
// Errors: a PostgreSQL serialization failure (40001) or deadlock (40P01),
// a MySQL deadlock (1213) or lock wait timeout (1205), and
// driver.ErrBadConn roll the statement back; they are retried a few times
// with a short backoff. Every other error, and a transient one that
// persists, is returned as an error whose outcome is unknown (see
// [lease.Store]); losing a lock is never reported as an error and an error
// is never reported as a grant. The package recognizes the errors of any
// driver without importing one: a PostgreSQL user's binary links no MySQL
// driver, and the other way round.
//
// Names and owners are compared byte for byte: PostgreSQL columns use
// COLLATE "C", MySQL columns are VARBINARY, so names differing only in case
// or trailing spaces are different locks.
package sqlstore
