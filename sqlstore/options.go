package sqlstore

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/simba-go/simba/lease"
)

// An Option configures a Store made by [NewPostgres], [NewMySQL] or
// [NewSQLite].
type Option func(*config) error

type config struct {
	table     string
	retries   int
	push      bool
	doorbells int
	pgBells   bool // WithPostgresDoorbells
	handoff   time.Duration
	retention time.Duration
	logger    *slog.Logger
	clock     func() time.Duration // WithSQLiteClockOffset; nil: the host's clock
	liteLock  bool                 // WithSQLiteWriteLock
}

// tableRE is an unquoted identifier, optionally prefixed by a schema (or,
// on MySQL, a database) and a dot.
var tableRE = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// WithTable makes the Store use table instead of [DefaultTable]: an
// unquoted identifier of letters, digits and underscores (not starting with
// a digit, at most 63 bytes), optionally prefixed by "schema." — for
// example "app_locks" or "infra.leases". The name goes into the SQL as
// written, unquoted, so it follows the server's usual rules (PostgreSQL
// folds it to lower case) and must not be a reserved word.
//
// The migrations of package schema create simba_mutex only. To use another
// name, create the table yourself: copy the up migrations of your dialect
// (schema/postgres, schema/mysql or schema/sqlite, in order), change the
// table name, and apply them with your migration tool.
func WithTable(table string) Option {
	return func(c *config) error {
		if !tableRE.MatchString(table) {
			return fmt.Errorf("%w: %q (want [schema.]name of letters, digits and _, not starting with a digit, each at most 63 bytes)",
				ErrInvalidTable, table)
		}
		c.table = table
		return nil
	}
}

// WithRetries sets how many times a transient error is retried before it
// is returned (default [DefaultRetries]; 0 never retries).
func WithRetries(n int) Option {
	return func(c *config) error {
		if n < 0 || n > 100 {
			return fmt.Errorf("%w: sqlstore: retries %d out of [0, 100]", lease.ErrInvalidArgument, n)
		}
		c.retries = n
		return nil
	}
}

// WithLogger makes the Store log, from its background goroutines only,
// problems of its notification path (a LISTEN or doorbell connection that
// failed) and of pruning — and, from NewSQLite, a SQLite busy timeout
// longer than 1 s. The default is silent.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: sqlstore: nil logger", lease.ErrInvalidArgument)
		}
		c.logger = l
		return nil
	}
}

// WithPush turns release notifications and the fair wait queue on (the
// default) or off. On, a waiter of this Store joins the lock's wait queue
// and is woken as soon as the lock is handed to it: on PostgreSQL through
// session-level advisory locks used as doorbells (or LISTEN/NOTIFY, see
// [WithPostgresDoorbells]), on MySQL through named locks (GET_LOCK) used
// as doorbells, on connections borrowed from the pool (see
// [WithDoorbells]), on SQLite by watching the file. Off, or when the pool
// has fewer than 4 connections (sql.DB.SetMaxOpenConns), waiters do not
// queue and poll at the owner's transition end, and a release of this
// Store notifies nobody (on PostgreSQL it sends no NOTIFY at all). Turn it
// off behind a pooler that does not keep sessions (PgBouncer in
// transaction mode, ProxySQL), where LISTEN and named locks do not work;
// give every Store on a table the same setting, or a queued waiter may
// wait for a release that does not wake it until its poll.
func WithPush(on bool) Option {
	return func(c *config) error {
		c.push = on
		return nil
	}
}

// DefaultDoorbells is how many connections a MySQL or PostgreSQL Store
// lends at most to doorbells, one per contender and lock that its Managers
// wait for.
const DefaultDoorbells = 8

// WithDoorbells bounds the connections a MySQL or PostgreSQL Store (not
// one with WithPostgresDoorbells(false)) borrows from the pool for doorbells: one
// per contender and lock it waits for, kept while that contender then
// holds the lock and for up to 10 s after, for its next wait (default
// [DefaultDoorbells]). The Store
// also borrows one connection to hold the doorbells of the grants it took
// without waiting; with it, it never takes more than half of the pool's
// limit (sql.DB.SetMaxOpenConns). A waiter beyond the bound does not queue
// and polls. SQLite, and PostgreSQL with LISTEN, ignore it.
func WithDoorbells(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("%w: sqlstore: doorbells %d out of [1, 1024]", lease.ErrInvalidArgument, n)
		}
		c.doorbells = n
		return nil
	}
}

// WithPostgresDoorbells chooses how a PostgreSQL Store with push on (see
// [WithPush]) wakes its waiters: through doorbells, as a MySQL Store does
// (true, the default), or through LISTEN/NOTIFY (false).
//
// With doorbells a waiter holds a session-level advisory lock of its own
// (its bell) on a connection borrowed from the pool and blocks on the bell
// of whom it waits behind, and a release lets the holder's bell go in its
// own statement, which wakes the first waiter and only it; the wait also
// takes the lock for the waiter. A hand-off costs about 3.2 transactions
// on the server at K = 8 waiting Stores and 4.0 at K = 32 (cold start
// included). It takes one connection per waiting contender and lock,
// bounded as [WithDoorbells] says. A waiting statement keeps its
// snapshot, which holds back VACUUM in the whole database, so one wait
// lasts at most 10 s (or the session's statement_timeout, if shorter) and
// the doorbell then waits again on the same connection: a statement every
// 10 s per waiter, and the oldest snapshot of the database is never more
// than 10 s older than it would be without waiters. A bell is the
// advisory lock of one 64-bit key (a hash of the table, the lock and the
// contender), in the key space the application's own advisory locks
// share; a bell is only a hint, the grant is decided on the row.
//
// With LISTEN a Store borrows one connection while anyone of it waits
// (pgx's stdlib driver only: with another driver waiters poll), whatever
// the number of waiters, and holds no snapshot; but PostgreSQL (through
// 18) signals every listening backend of the database on each notifying
// commit, whatever the channel, so a hand-off among K waiting Stores costs
// about K + 3 transactions on the server, and notifying commits take
// turns on one server-wide lock.
//
// Every Store on a table should have the same setting (mind a rolling
// upgrade from a version whose default was LISTEN): a LISTEN waiter is
// not woken by a doorbell release, nor a doorbell waiter by a NOTIFY;
// such a waiter still acquires within ttl + transition plus the poll's
// jitter (at its owner's transition end, or, a doorbell waiter behind a
// holder without a bell, by trying the row now and then: 1 ms doubling
// to 1 s). MySQL and SQLite ignore it.
func WithPostgresDoorbells(on bool) Option {
	return func(c *config) error {
		c.pgBells = on
		return nil
	}
}

// DefaultHandoff is the default hand-off window: how long a lock freed by
// a Release is held back for the longest live waiter.
const DefaultHandoff = time.Second

// maxHandoff bounds [WithHandoff].
const maxHandoff = time.Minute

// WithHandoff sets the hand-off window (default [DefaultHandoff]). A
// Release that leaves live waiters in the lock's queue reserves the lock
// for the first one for d and wakes it (and only it); others that try
// meanwhile get an empty OwnerID and a positive Transition, the time to try
// again. A waiter that does not come in time loses its place to whoever
// comes next, and the waiter after it is woken when the window ends
// (PostgreSQL, SQLite) or by its doorbell (MySQL). d = 0 reserves nothing:
// the first waiter is still woken first, but anyone may take the lock.
func WithHandoff(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || d > maxHandoff {
			return fmt.Errorf("%w: sqlstore: hand-off window %v out of [0, %v]", lease.ErrInvalidArgument, d, maxHandoff)
		}
		c.handoff = d
		return nil
	}
}

// WithSQLiteWriteLock sets whether a SQLite Store's writes take turns
// with those of the other Stores of the file, in every process, through
// an exclusive flock(2) on a file beside the database: its path plus
// "-simba-writes", created empty when missing and never removed (default
// on, on Unix systems; a database without a file, such as ":memory:",
// has none; the other dialects ignore the option). SQLite makes a writer
// that finds the file locked sleep 1, 2, 5, 10 … up to 100 ms at a time,
// whether or not the lock was let go meanwhile, so with many writers some
// wait far longer than the writes ahead of them take; the kernel wakes a
// flock waiter when the lock is let go. The lock file only orders writers: SQLite's own locks still
// guard the data, a writer that does not take it (another program, an
// older version of this package) is waited for as before, and a Store
// that cannot open it (a read-only directory) goes on without it. A
// write waiting for its turn ends with its context.
func WithSQLiteWriteLock(on bool) Option {
	return func(c *config) error {
		c.liteLock = on
		return nil
	}
}

// WithSQLiteClockOffset is for tests: it makes every statement of a
// SQLite Store read the host's clock plus offset() (evaluated once per
// statement) instead of the host's clock, as if SQLite ran on a machine
// whose clock was stepped by that much. SQLite has no server: its clock is
// the host's, which a test cannot step without stepping every other
// process's. A change of the offset is a step of the store's clock, and
// grants written before it end that much earlier or later, as they would
// on a server. Statements run unprepared while the offset is not zero.
// Only NewSQLite accepts it; Stores of the same file that should share
// the stepped clock need the same offset. Never use it in production: a
// Store whose clock disagrees with other Stores' of the file breaks their
// grants.
func WithSQLiteClockOffset(offset func() time.Duration) Option {
	return func(c *config) error {
		if offset == nil {
			return fmt.Errorf("%w: sqlstore: nil clock offset", lease.ErrInvalidArgument)
		}
		c.clock = offset
		return nil
	}
}
