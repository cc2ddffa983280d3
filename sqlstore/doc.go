// Package sqlstore is a [lease.Store] on PostgreSQL or MySQL/MariaDB through
// a *sql.DB the caller owns.
//
// Set-up, once per database (see package schema), then one Store and one
// Manager per process:
//
//	db, err := sql.Open("pgx", "postgres://app@db/app") // pgx v5 stdlib, or lib/pq
//	if err != nil { ... }
//	if err := schema.Migrate(ctx, db, schema.Postgres); err != nil { ... }
//	store, err := sqlstore.NewPostgres(db) // MySQL: schema.MySQL, sqlstore.NewMySQL
//	if err != nil { ... }
//	m, err := lease.NewManager(store)
//	if err != nil { ... }
//	defer m.Close(ctx)
//	l, err := m.Acquire(ctx, "orders/42")
//
// The Store never opens, closes or configures db; size its pool for the
// Managers that share it (each held lease renews every ttl/3).
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
// clock only (PostgreSQL clock_timestamp(); MySQL UTC_TIMESTAMP(3)
// arithmetic, which the session time zone cannot shift), and the Store
// reports remaining durations computed from the server's now.
//
// Tokens: a new grant sets token to the previous value plus one; renewals
// and extensions keep it; a release clears the owner but keeps the counter
// in the row, so tokens of a mutex only grow, across server restarts. They
// start again from 1 only if the row is deleted.
//
// Round trips: PostgreSQL acquire, renew, release and get take one
// statement each (an acquire that loses reads the owner with a second one).
// MySQL has no RETURNING, so acquire is the upsert followed by a read of the
// row; renew, release and get are one statement.
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
//
// Not yet: release notifications (PostgreSQL LISTEN/NOTIFY, MySQL
// doorbells). Without them a waiter learns of a release when it polls, at
// the owner's transition end plus jitter.
package sqlstore
