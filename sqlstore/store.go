package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	mydb "github.com/simba-go/simba/internal/db/mysql"
	litedb "github.com/simba-go/simba/internal/db/sqlite"
	"github.com/simba-go/simba/lease"
)

// DefaultTable is the table the migrations of package schema create.
const DefaultTable = "simba_mutex"

// DefaultRetries is how many times a transient error (deadlock,
// serialization failure, lock wait timeout, bad connection) is retried.
const DefaultRetries = 3

// ErrInvalidTable is wrapped by the error of [NewPostgres] and [NewMySQL]
// when [WithTable] names an unusable table.
var ErrInvalidTable = errors.New("sqlstore: invalid table name")

// Compile-time check that Store keeps the port.
var _ lease.Store = (*Store)(nil)

// Store is a [lease.Store] on one SQL database. Make one with [NewPostgres],
// [NewMySQL] or [NewSQLite]. All methods are safe for concurrent use.
type Store struct {
	eng     engine
	dialect string // "postgres", "mysql" or "sqlite", for messages
	retries int
	busy    atomic.Int64 // SQLite busy errors retried, for tests
	handoff time.Duration
	hub     *hub       // nil when push is off
	hooks   grantHooks // what the push path learns from our calls
	waits   waitSet    // contenders that may be queued
	crowded waitSet    // grants made while others were queued (their release hands over)
	pruner  *pruner
	stmts   *prepared // MySQL, SQLite: the statements prepared once per connection
	tag     string    // PostgreSQL: the first letters of this Store's queue keys
	// waitedCrowds: a grant to a contender that waited (it watched the
	// lock) counts as crowded too (PostgreSQL).
	waitedCrowds bool
}

// tagLen is the length of a PostgreSQL Store's tag.
const tagLen = 8

// key is the queue key of contender in this Store.
func (s *Store) key(contender string) string { return taggedKey(s.tag, contender) }

// NewPostgres returns a Store on the PostgreSQL database db, opened with any
// database/sql driver (pgx v5's stdlib, lib/pq). The tables must exist
// (see package schema). db stays the caller's: the Store never closes or
// configures it.
func NewPostgres(db *sql.DB, opts ...Option) (*Store, error) {
	c, err := newConfig(db, opts)
	if err != nil {
		return nil, err
	}
	if c.clock != nil {
		return nil, errClockOffset
	}
	channel := channelName(c.table)
	eng := pgEngine{db: rewrite(db, c.table), table: c.table, channel: channel}
	if c.push && c.pgBells {
		eng.channel = "" // a release wakes through the holder's doorbell
	}
	s := newStore(c, eng, "postgres")
	s.waitedCrowds = true
	if !c.pgBells {
		// With doorbells, untagged keys, as on MySQL: a waiter finds the
		// bell of an owner in another Store from its contender id alone.
		s.tag = newTag(tagLen)
	}
	switch {
	case c.push && c.pgBells:
		s.hub = &hub{pool: db, hearers: 1} // doorbells hear once armed (bells.canWait)
		b := newBells(db, pgBells{scope: c.table}, c.doorbells, s.hub, c.logger)
		s.hub.backend, s.hooks = b, b
	case c.push:
		s.hub = &hub{pool: db, linger: listenLinger}
		s.hub.backend = &listener{db: db, channel: channel + "_" + s.tag, hub: s.hub, log: c.logger}
	}
	return s, nil
}

// NewMySQL returns a Store on the MySQL or MariaDB database db, opened with
// github.com/go-sql-driver/mysql (no DSN parameter is required; the
// session time zone and clientFoundRows do not matter). The tables must
// exist (see package schema). db stays the caller's: the Store never
// closes or configures it.
func NewMySQL(db *sql.DB, opts ...Option) (*Store, error) {
	c, err := newConfig(db, opts)
	if err != nil {
		return nil, err
	}
	if c.clock != nil {
		return nil, errClockOffset
	}
	stmts := newPrepared(db, c.table, myAcquireReturning, mydb.Acquire, mydb.AcquireFree, mydb.AcquireHead, mydb.Release, mydb.ReleaseIdle, mydb.Renew, mydb.Get)
	s := newStore(c, myEngine{db: rewrite(stmts, c.table), table: c.table, floor: new(sync.Once), flavor: new(atomic.Int32),
		free: &waitSet{limit: maxFree}}, "mysql")
	s.stmts = stmts
	if c.push {
		s.hub = &hub{pool: db, hearers: 1} // doorbells hear once armed (bells.canWait)
		b := newBells(db, myBells{scope: c.table}, c.doorbells, s.hub, c.logger)
		s.hub.backend, s.hooks = b, b
	}
	return s, nil
}

// NewSQLite returns a Store on the SQLite database db, opened with a
// database/sql driver for SQLite 3.38 or later — the pure-Go
// modernc.org/sqlite ("sqlite") needs no cgo. Every process that opens the
// same file shares its locks; times come from SQLite's clock, the host's.
// The tables must exist (see package schema, dialect SQLite). Open the file
// in WAL mode with a short busy timeout and immediate write transactions,
// for example
//
//	sql.Open("sqlite", "file:/var/lib/app/locks.db?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)&_txlock=immediate")
//
// A statement refused with SQLITE_BUSY or SQLITE_LOCKED did nothing and is
// retried until ctx ends (at most 10 s). Keep the busy timeout short: the
// driver waits it out inside the statement whatever the context, so a call
// can overrun its ctx by up to the busy timeout (modernc.org/sqlite v1.58:
// an Acquire with a 300 ms context returned after 10 s with
// busy_timeout(10000)). NewSQLite logs a warning when a connection of db
// has a busy timeout above 1 s. The Store's writes take turns with those
// of the other Stores of the file through a lock file beside it (see
// [WithSQLiteWriteLock]), which NewSQLite opens, creating it when missing.
// Push: while anyone waits, one
// connection of the pool watches the file for commits (PRAGMA
// data_version, a local read) and wakes the waiter a release hands the
// lock to. db stays the caller's: the Store never closes or configures
// it.
func NewSQLite(db *sql.DB, opts ...Option) (*Store, error) {
	c, err := newConfig(db, opts)
	if err != nil {
		return nil, err
	}
	stmts := newPrepared(db, c.table, litedb.Acquire, litedb.Release, litedb.Renew, litedb.Get)
	eng := liteEngine{db: shiftClock(rewrite(stmts, c.table), c.clock)}
	if c.liteLock {
		eng.wl = openWriteLock(liteFile(db))
	}
	s := newStore(c, eng, "sqlite")
	s.stmts = stmts
	warnLiteBusyTimeout(db, c.logger)
	if c.push {
		s.hub = &hub{pool: db}
		p := &poller{db: db, table: c.table, hub: s.hub, log: c.logger, clock: c.clock, queued: make(chan struct{}, 1)}
		s.hub.backend, s.hooks = p, p
	}
	return s, nil
}

func newStore(c config, eng engine, dialect string) *Store {
	s := &Store{eng: eng, dialect: dialect, retries: c.retries, handoff: c.handoff, hooks: noHooks{}}
	s.pruner = newPruner(s, c.retention, c.logger)
	return s
}

func newConfig(db *sql.DB, opts []Option) (config, error) {
	c := config{table: DefaultTable, retries: DefaultRetries, push: true, doorbells: DefaultDoorbells, pgBells: true, liteLock: true,
		handoff: DefaultHandoff, retention: DefaultRetention, logger: slog.New(slog.DiscardHandler)}
	if db == nil {
		return c, fmt.Errorf("%w: sqlstore: nil *sql.DB", lease.ErrInvalidArgument)
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}
