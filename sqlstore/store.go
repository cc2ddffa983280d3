package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	mydb "github.com/simba-go/simba/internal/db/mysql"
	pgdb "github.com/simba-go/simba/internal/db/postgres"
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
	hub     *hub       // nil when push is off
	hooks   grantHooks // what the push path learns from our calls
}

// An Option configures a Store made by [NewPostgres], [NewMySQL] or
// [NewSQLite].
type Option func(*config) error

type config struct {
	table     string
	retries   int
	push      bool
	doorbells int
	logger    *slog.Logger
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
// name, create the table yourself: copy the up migration of your dialect
// (schema/postgres or schema/mysql, 000001_create_simba_mutex.up.sql),
// change the table name, and apply it with your migration tool.
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
// failed). The default is silent.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: sqlstore: nil logger", lease.ErrInvalidArgument)
		}
		c.logger = l
		return nil
	}
}

// NewPostgres returns a Store on the PostgreSQL database db, opened with any
// database/sql driver (pgx v5's stdlib, lib/pq). The table must exist (see
// package schema). db stays the caller's: the Store never closes or
// configures it.
func NewPostgres(db *sql.DB, opts ...Option) (*Store, error) {
	c, err := newConfig(db, opts)
	if err != nil {
		return nil, err
	}
	dbtx := rewrite(db, c.table, pgdb.Acquire, pgdb.Renew, pgdb.Release, pgdb.Get, pgdb.List)
	channel := channelName(c.table)
	s := &Store{eng: pgEngine{db: dbtx, channel: channel}, dialect: "postgres", retries: c.retries, hooks: noHooks{}}
	if c.push {
		s.hub = &hub{pool: db, linger: listenLinger}
		s.hub.backend = &listener{db: db, channel: channel, hub: s.hub, log: c.logger}
	}
	return s, nil
}

// NewMySQL returns a Store on the MySQL or MariaDB database db, opened with
// github.com/go-sql-driver/mysql (no DSN parameter is required; the
// session time zone and clientFoundRows do not matter). The table must
// exist (see package schema). db stays the caller's: the Store never closes
// or configures it.
func NewMySQL(db *sql.DB, opts ...Option) (*Store, error) {
	c, err := newConfig(db, opts)
	if err != nil {
		return nil, err
	}
	dbtx := rewrite(db, c.table, mydb.Acquire, mydb.Renew, mydb.Release, mydb.Get, mydb.List)
	s := &Store{eng: myEngine{db: dbtx}, dialect: "mysql", retries: c.retries, hooks: noHooks{}}
	if c.push {
		s.hub = &hub{pool: db}
		bells := newDoorbells(db, c.table, c.doorbells, s.hub, c.logger)
		s.hub.backend, s.hooks = bells, bells
	}
	return s, nil
}

// NewSQLite returns a Store on the SQLite database db, opened with a
// database/sql driver for SQLite 3.38 or later — the pure-Go
// modernc.org/sqlite ("sqlite") needs no cgo. Every process that opens the
// same file shares its mutexes; times come from SQLite's clock, the host's.
// The table must exist (see package schema, dialect SQLite). Open the file
// in WAL mode with a busy timeout and immediate write transactions, for
// example
//
//	sql.Open("sqlite", "file:/var/lib/app/locks.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
//
// A statement refused with SQLITE_BUSY or SQLITE_LOCKED did nothing and is
// retried until ctx ends (at most 10 s). Push: while anyone waits, one
// connection of the pool polls PRAGMA data_version every 20 ms, a local
// read, and wakes waiters when the owner changes. db stays the caller's:
// the Store never closes or configures it.
func NewSQLite(db *sql.DB, opts ...Option) (*Store, error) {
	c, err := newConfig(db, opts)
	if err != nil {
		return nil, err
	}
	dbtx := rewrite(db, c.table, litedb.Acquire, litedb.Renew, litedb.Release, litedb.Get, litedb.List)
	s := &Store{eng: liteEngine{db: dbtx}, dialect: "sqlite", retries: c.retries, hooks: noHooks{}}
	if c.push {
		s.hub = &hub{pool: db}
		s.hub.backend = &poller{db: db, table: c.table, hub: s.hub, log: c.logger}
	}
	return s, nil
}

func newConfig(db *sql.DB, opts []Option) (config, error) {
	c := config{table: DefaultTable, retries: DefaultRetries, push: true, doorbells: DefaultDoorbells,
		logger: slog.New(slog.DiscardHandler)}
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

// dbtx is what the generated queries run on (the DBTX of internal/db).
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// tableWord matches the default table name as a whole word of a query.
var tableWord = regexp.MustCompile(`\b` + DefaultTable + `\b`)

// rewrite returns db itself for the default table, else a dbtx that runs
// queries (the generated query texts) with table in place of the default
// name. The texts are rewritten here, once; any other text passes through.
func rewrite(db dbtx, table string, queries ...string) dbtx {
	if table == DefaultTable {
		return db
	}
	m := make(map[string]string, len(queries))
	for _, q := range queries {
		m[q] = tableWord.ReplaceAllLiteralString(q, table)
	}
	return renamed{db: db, queries: m}
}

// renamed runs the generated queries on another table. Its map is never
// written after rewrite returns.
type renamed struct {
	db      dbtx
	queries map[string]string
}

func (r renamed) q(query string) string {
	if s, ok := r.queries[query]; ok {
		return s
	}
	return query
}

func (r renamed) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.db.ExecContext(ctx, r.q(query), args...)
}

func (r renamed) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return r.db.PrepareContext(ctx, r.q(query))
}

func (r renamed) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.db.QueryContext(ctx, r.q(query), args...)
}

func (r renamed) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return r.db.QueryRowContext(ctx, r.q(query), args...)
}
