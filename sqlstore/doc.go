// Package sqlstore is a [lease.Store] on PostgreSQL, MySQL/MariaDB or SQLite
// through a *sql.DB the caller owns. SQLite (see [NewSQLite]) needs no
// server: processes on one host share a file.
//
// Set-up, once per database (see package schema), then one Store and one
// Manager per process:
//
//	db, err := sql.Open("pgx", "postgres://app@db/app") // pgx v5 stdlib, or lib/pq
//	if err != nil { ... }
//	if err := schema.Migrate(ctx, db, schema.Postgres); err != nil { ... }
//	store, err := sqlstore.NewPostgres(db) // or schema.MySQL + NewMySQL, schema.SQLite + NewSQLite
//	if err != nil { ... }
//	m, err := lease.NewManager(store)
//	if err != nil { ... }
//	defer m.Close(ctx)
//	l, err := m.Acquire(ctx, "orders/42")
//
// The Store never opens, closes or configures db; size its pool for the
// Managers that share it (each held lease renews every ttl/3, one
// statement per lease). Bound it: with database/sql's default (no limit),
// the renewals of many leases taken together run at the same moments and
// open a connection each — 1,000 held leases overran PostgreSQL's
// max_connections in the benchmark. SetMaxOpenConns(8) to (16) serves
// thousands of leases; push needs at least four.
//
// # How it works
//
// One row per mutex in the table simba_mutex (or the one named by
// [WithTable]): owner_id, acquired_at, ttl_at, transition_at (epoch
// milliseconds on the server's clock), token (the fencing counter) and
// version (bumped on every write). Every operation is one conditional
// statement with optimistic concurrency — an upsert or an UPDATE whose WHERE
// names the owner, the token and the expiry — with no SELECT … FOR UPDATE
// and no transaction spanning statements. Expiry is decided by the server's
// clock only (PostgreSQL clock_timestamp(); MySQL UNIX_TIMESTAMP()
// arithmetic, which the session time zone cannot shift), and the Store
// reports remaining durations computed from the server's now.
//
// Tokens: a new grant sets token to the previous value plus one; renewals
// and extensions keep it; a release clears the owner but keeps the counter
// in the row, so tokens of a mutex only grow, across server restarts. They
// start again from 1 only if the row is deleted.
//
// Round trips: PostgreSQL acquire, renew, release and get take one
// statement each (an acquire that loses returns the owner in the same one).
// MySQL has no RETURNING, so acquire is the upsert followed by a read of the
// row; renew, release and get are one statement. With go-sql-driver/mysql,
// add interpolateParams=true to the DSN, or the driver prepares each
// statement on the server first, doubling the round trips.
//
// # Push
//
// A release wakes waiters in other processes at once instead of at the
// owner's transition end ([Store.Watch], used by lease.Manager):
//
//   - PostgreSQL: the release statement sends NOTIFY on a channel named
//     after the table, with the mutex as payload; while any waiter of this
//     Store waits, and for 30 s after the last one, one connection borrowed
//     from the pool LISTENs (pgx's stdlib driver only: with another driver
//     Watch fails with [ErrNoPush] and waiters poll).
//   - MySQL: while this Store holds grants, one borrowed connection holds a
//     named lock (GET_LOCK) per grant, a doorbell derived from the
//     database, the table and the mutex; after an acquire of a watched
//     mutex loses, a borrowed connection blocks on that doorbell and wakes
//     the waiters when it frees. At most [WithDoorbells] waiting
//     connections, and with the holder's never more than half the pool.
//   - SQLite: while any waiter of this Store waits, one borrowed connection
//     reads PRAGMA data_version every 20 ms (a local read; it changes when
//     another connection or process commits) and, on a change, wakes the
//     waiters of watched mutexes whose owner changed.
//
// Notifications are hints: the row is the only source of truth, and every
// waiter still polls, so a lost notification delays a waiter but never
// blocks it. A broken push connection is replaced with backoff, and every
// waiter checks again once it is back. Push needs a pool of at least four
// connections and a server session that lives as long as the connection:
// turn it off with [WithPush] behind PgBouncer in transaction mode or
// ProxySQL. [Store.Close] stops it; without Close its goroutines end by
// themselves once nothing is watched or held.
//
// Errors: a PostgreSQL serialization failure (40001) or deadlock (40P01),
// a MySQL deadlock (1213) or lock wait timeout (1205), and
// driver.ErrBadConn roll the statement back; they are retried a few times
// with a short backoff. Every other error, and a transient one that
// persists, is returned as an error whose outcome is unknown (see
// [lease.Store]); losing a mutex is never reported as an error and an error
// is never reported as a grant.
//
// Names and owners are compared byte for byte: PostgreSQL columns use
// COLLATE "C", MySQL columns are VARBINARY, so names differing only in case
// or trailing spaces are different mutexes.
package sqlstore
