package bench

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cirello.io/pglock"
	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx", for simba, advisory locks and Ops
	_ "github.com/lib/pq"              // "postgres", pglock's documented driver
	gomysqllock "github.com/sanketplus/go-mysql-lock"
	_ "modernc.org/sqlite" // "sqlite"

	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

// The settings of the peers on SQL servers.
const (
	// pglockLease is as long as a simba grant lives (ttl + transition), so
	// that both hand a dead holder's lock over after about the same time.
	pglockLease = simbaTTL + simbaTransition
	// pglockHeartbeat keeps pglock's default ratio (20 s lease, 5 s
	// heartbeat).
	pglockHeartbeat = pglockLease / 4
	// mysqlRefresh is go-mysql-lock's default (and documented) refresh
	// interval: the holder pings its connection that often.
	mysqlRefresh = gomysqllock.DefaultRefreshInterval
	// pgStatsLag is how long Ops waits before reading PostgreSQL's
	// counters: a backend publishes its counters when it goes idle, at most
	// once a second (PostgreSQL 15).
	pgStatsLag = 1100 * time.Millisecond
	// pgStatsSettle is the Settle of the PostgreSQL targets: a backend
	// that goes idle less than a second after it last published holds its
	// counters back for up to 10 s (PostgreSQL 15's PGSTAT_IDLE_INTERVAL),
	// so a burst of work that just ended (a thousand acquires) shows up
	// only then: counted in the renewal window, it read as 92 round trips
	// per second of renewal where the store sent about 2.
	pgStatsSettle = 11 * time.Second
	// mysqlLockWait is the GET_LOCK timeout (seconds) of go-mysql-lock's
	// ObtainTimeoutContext, retried until ctx ends: MariaDB returns NULL
	// for the -1 (wait forever) that its Obtain and ObtainContext pass.
	mysqlLockWait = 3600
	// mysqlLockNameMax is the longest GET_LOCK name MySQL and MariaDB take.
	mysqlLockNameMax = 64
	// nameMax bounds simba lock names (lease.MaxNameLength) and pglock's
	// name column (VARCHAR(255)).
	nameMax = 255
)

// sqlTargets returns the targets on the SQL servers set in s: simba on each,
// pglock and advisory locks on PostgreSQL, go-mysql-lock on MariaDB, and
// the floors of both (see floor.go).
func sqlTargets(s Servers) []Target {
	var ts []Target
	if s.Postgres != "" {
		ts = append(ts, simbaPostgres(s), pglockTarget(s), advisoryTarget(s), pgFloorTarget(s))
	}
	if s.MySQL != "" {
		ts = append(ts, simbaMySQL(s), mysqlLockTarget(s), myFloorTarget(s))
	}
	if s.SQLite != "" {
		ts = append(ts, simbaSQLite(s))
	}
	return ts
}

// simbaSQL opens simba clients on one SQL database, migrating its schema
// before the first client of this process.
type simbaSQL struct {
	driver, dsn string
	dialect     schema.Dialect
	newStore    func(*sql.DB) (*sqlstore.Store, error)
	prefix      string

	mu       sync.Mutex
	migrated bool
}

func simbaPostgres(s Servers) Target {
	o := &simbaSQL{driver: "pgx", dsn: s.Postgres, dialect: schema.Postgres, prefix: s.KeyPrefix,
		newStore: func(db *sql.DB) (*sqlstore.Store, error) { return sqlstore.NewPostgres(db) }}
	return Target{Lib: "simba", Backend: "PostgreSQL", Settings: simbaSettings + ", advisory-lock doorbells (the default), pool of 16",
		Open: o.open, Ops: pgOps(s.Postgres), Settle: pgStatsSettle, Takeover: simbaTTL + simbaTransition}
}

func simbaMySQL(s Servers) Target {
	o := &simbaSQL{driver: "mysql", dsn: withInterpolateParams(s.MySQL), dialect: schema.MySQL, prefix: s.KeyPrefix,
		newStore: func(db *sql.DB) (*sqlstore.Store, error) { return sqlstore.NewMySQL(db) }}
	return Target{Lib: "simba", Backend: "MariaDB", Settings: simbaSettings + ", GET_LOCK doorbells, interpolateParams=true, pool of 16",
		Open: o.open, Ops: mysqlOps(s.MySQL), Takeover: simbaTTL + simbaTransition}
}

func simbaSQLite(s Servers) Target {
	o := &simbaSQL{driver: "sqlite", dsn: sqliteDSN(s.SQLite), dialect: schema.SQLite, prefix: s.KeyPrefix,
		newStore: func(db *sql.DB) (*sqlstore.Store, error) { return sqlstore.NewSQLite(db) }}
	return Target{Lib: "simba", Backend: "SQLite", Settings: simbaSettings + ", WAL, data_version polled every 20 ms (1 ms when first or second in line, n ms with n waiters ahead), writes take turns through a lock file, pool of 16",
		Open: o.open, Takeover: simbaTTL + simbaTransition}
}

// sqliteDSN is the DSN the sqlstore documentation gives for a file.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)&_txlock=immediate"
}

// withInterpolateParams adds interpolateParams=true to a go-sql-driver DSN,
// as the sqlstore documentation advises (one round trip per statement
// instead of a prepare and an execute).
func withInterpolateParams(dsn string) string {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return dsn // sql.Open reports it
	}
	cfg.InterpolateParams = true
	return cfg.FormatDSN()
}

func (o *simbaSQL) open(ctx context.Context) (Client, error) {
	db, err := sql.Open(o.driver, o.dsn)
	if err != nil {
		return nil, fmt.Errorf("simba/%s: open: %w", o.dialect, err)
	}
	db.SetMaxOpenConns(16) // as sqlstore's documentation asks: a bounded pool
	db.SetMaxIdleConns(16) // and as many idle: renewals open no new connections
	if err := o.migrate(ctx, db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	store, err := o.newStore(db)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("simba/%s: store: %w", o.dialect, err), db.Close())
	}
	c, err := newSimbaClient(store, store.Close, db.Close)
	if err != nil {
		return nil, fmt.Errorf("simba/%s: %w", o.dialect, err)
	}
	return prefixed{c, o.prefix, nameMax}, nil
}

// migrate applies the schema once per target (a failure is retried by the
// next Open).
func (o *simbaSQL) migrate(ctx context.Context, db *sql.DB) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.migrated {
		return nil
	}
	if err := schema.Migrate(ctx, db, o.dialect); err != nil {
		return fmt.Errorf("simba/%s: migrate: %w", o.dialect, err)
	}
	o.migrated = true
	return nil
}

// prefixed is a Client whose keys get a prefix and are made valid names.
type prefixed struct {
	Client
	prefix string
	max    int
}

// Lock implements Client.
func (p prefixed) Lock(ctx context.Context, key string) (Lock, error) {
	return p.Client.Lock(ctx, lockName(p.prefix, key, p.max))
}

// lockName returns prefix+key when that is valid UTF-8 without NUL of at
// most max bytes (what SQL text columns, GET_LOCK and simba take), else a
// name of that kind derived from a hash of key.
func lockName(prefix, key string, max int) string {
	n := prefix + key
	if len(n) <= max && utf8.ValidString(n) && !strings.ContainsRune(n, 0) {
		return n
	}
	sum := sha256.Sum256([]byte(key))
	h := "#" + hex.EncodeToString(sum[:12])
	p := strings.ToValidUTF8(strings.ReplaceAll(prefix, "\x00", ""), "")
	for len(p)+len(h) > max {
		_, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
	}
	return p + h
}

// pglockTarget is cirello.io/pglock on lib/pq, as its documentation shows.
func pglockTarget(s Servers) Target { return newPglockTarget(s, pglockLease, pglockHeartbeat) }

// newPglockTarget is pglockTarget with a lease and heartbeat of its own.
func newPglockTarget(s Servers, lease, heartbeat time.Duration) Target {
	var once sync.Mutex
	created := false
	open := func(ctx context.Context) (Client, error) {
		db, err := sql.Open("postgres", s.Postgres)
		if err != nil {
			return nil, fmt.Errorf("pglock: open: %w", err)
		}
		c, err := pglock.New(db, pglock.WithLeaseDuration(lease), pglock.WithHeartbeatFrequency(heartbeat))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("pglock: new: %w", err), db.Close())
		}
		once.Lock()
		defer once.Unlock()
		if !created {
			if err := c.TryCreateTable(); err != nil {
				return nil, errors.Join(fmt.Errorf("pglock: create table: %w", err), db.Close())
			}
			created = true
		}
		hb, stop := context.WithCancel(context.Background())
		return &pglockClient{c: c, db: db, hb: hb, stop: stop, prefix: s.KeyPrefix}, nil
	}
	return Target{Lib: "pglock", Backend: "PostgreSQL",
		Settings: fmt.Sprintf("lease %v, heartbeat %v (its default 1:4 ratio); a waiter retries every lease, no wake-up, and takes a dead holder's row once its version stood still for a whole lease (1–2 leases after the last heartbeat); lib/pq",
			lease, heartbeat),
		Open: open, Ops: pgOps(s.Postgres), Settle: pgStatsSettle, Takeover: lease}
}

// pglockClient is one pglock.Client on a pool of its own. Heartbeats run
// under hb, the client's lifetime, not under the ctx of Lock (which would
// stop them when the caller's acquire deadline passes: pglock issue #5).
type pglockClient struct {
	c      *pglock.Client
	db     *sql.DB
	hb     context.Context
	stop   context.CancelFunc
	prefix string
}

// Lock implements Client: AcquireContext retries every lease duration.
func (c *pglockClient) Lock(ctx context.Context, key string) (Lock, error) {
	l, err := c.c.AcquireContext(ctx, lockName(c.prefix, key, nameMax), pglock.WithCustomHeartbeatContext(c.hb))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pglock: acquire: %w (%w)", err, context.Cause(ctx))
		}
		return nil, fmt.Errorf("pglock: acquire: %w", err)
	}
	return pglockLock{l}, nil
}

// Close implements Client: it stops the heartbeats of locks still held
// (they lapse after the lease) and closes the pool.
func (c *pglockClient) Close() error {
	c.stop()
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("pglock: close: %w", err)
	}
	return nil
}

type pglockLock struct{ l *pglock.Lock }

// Unlock implements Lock: Close stops the heartbeat and deletes the row.
func (l pglockLock) Unlock(context.Context) error {
	if err := l.l.Close(); err != nil {
		return fmt.Errorf("pglock: release: %w", err)
	}
	return nil
}

// advisoryTarget is a PostgreSQL session advisory lock held on a dedicated
// connection: no lease, the lock dies with the connection.
func advisoryTarget(s Servers) Target {
	open := func(ctx context.Context) (Client, error) {
		db, err := sql.Open("pgx", s.Postgres)
		if err != nil {
			return nil, fmt.Errorf("advisory lock: open: %w", err)
		}
		return &advisoryClient{db: db, prefix: s.KeyPrefix}, nil
	}
	return Target{Lib: "advisory lock", Backend: "PostgreSQL",
		Settings: "pg_advisory_lock(64-bit FNV-1a of the key) on a dedicated connection; waits on the server; no lease",
		Open:     open, Ops: pgOps(s.Postgres), Settle: pgStatsSettle}
}

type advisoryClient struct {
	db     *sql.DB
	prefix string
	held   heldSet[*sql.Conn]
}

// heldSet is the set of locks a client holds, for Close.
type heldSet[T comparable] struct {
	mu sync.Mutex
	m  map[T]struct{}
}

func (h *heldSet[T]) add(x T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[T]struct{}{}
	}
	h.m[x] = struct{}{}
}

// remove reports whether x was in the set.
func (h *heldSet[T]) remove(x T) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[x]
	delete(h.m, x)
	return ok
}

// drain empties the set and returns what it held.
func (h *heldSet[T]) drain() map[T]struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.m
	h.m = nil
	return m
}

// advisoryKey maps a name to the bigint key of pg_advisory_lock.
func advisoryKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// Lock implements Client: pg_advisory_lock blocks on the server; when ctx
// ends, pgx cancels the statement.
func (c *advisoryClient) Lock(ctx context.Context, key string) (Lock, error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("advisory lock: connection: %w", err)
	}
	k := advisoryKey(c.prefix + key)
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", k); err != nil {
		// The lock may have been granted as the statement was cancelled:
		// drop the session rather than return it to the pool.
		return nil, errors.Join(fmt.Errorf("advisory lock: lock: %w", err), discard(conn))
	}
	c.held.add(conn)
	return &advisoryLock{c: c, conn: conn, key: k}, nil
}

// Close implements Client: it drops the sessions of locks still held,
// which frees them as a crash would, and closes the pool.
func (c *advisoryClient) Close() error {
	var err error
	for conn := range c.held.drain() {
		err = errors.Join(err, discard(conn))
	}
	if cerr := c.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("advisory lock: close: %w", cerr))
	}
	return err
}

// discard closes conn's session instead of returning it to the pool.
func discard(conn *sql.Conn) error {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // marks it bad
	if err := conn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("advisory lock: drop connection: %w", err)
	}
	return nil
}

type advisoryLock struct {
	c    *advisoryClient
	conn *sql.Conn
	key  int64
}

// Unlock implements Lock: pg_advisory_unlock, then the connection goes
// back to the pool (or is dropped if the unlock failed).
func (l *advisoryLock) Unlock(ctx context.Context) error {
	if !l.c.held.remove(l.conn) {
		return errors.New("advisory lock: unlock: not held")
	}
	var unlocked bool
	if err := l.conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock($1)", l.key).Scan(&unlocked); err != nil {
		return errors.Join(fmt.Errorf("advisory lock: unlock: %w", err), discard(l.conn))
	}
	if !unlocked {
		return errors.Join(errors.New("advisory lock: unlock: the session did not hold it"), discard(l.conn))
	}
	if err := l.conn.Close(); err != nil {
		return fmt.Errorf("advisory lock: unlock: return connection: %w", err)
	}
	return nil
}

// mysqlLockTarget is sanketplus/go-mysql-lock: GET_LOCK on a connection of
// its own, kept alive by a ping every refresh interval.
func mysqlLockTarget(s Servers) Target {
	open := func(ctx context.Context) (Client, error) {
		db, err := sql.Open("mysql", s.MySQL)
		if err != nil {
			return nil, fmt.Errorf("go-mysql-lock: open: %w", err)
		}
		return &mysqlLockClient{locker: gomysqllock.NewMysqlLocker(db, gomysqllock.WithRefreshInterval(mysqlRefresh)),
			db: db, prefix: s.KeyPrefix}, nil
	}
	return Target{Lib: "go-mysql-lock", Backend: "MariaDB",
		Settings: fmt.Sprintf("GET_LOCK(name, %d s) on a dedicated connection, waiting on the server (ObtainTimeoutContext: MariaDB refuses Obtain's -1); ping every %v; no lease; DSN as its README (server-side prepares)", mysqlLockWait, mysqlRefresh),
		Open:     open, Ops: mysqlOps(s.MySQL)}
}

type mysqlLockClient struct {
	locker *gomysqllock.MysqlLocker
	db     *sql.DB
	prefix string
	held   heldSet[*mysqlLock]
}

// Lock implements Client.
func (c *mysqlLockClient) Lock(ctx context.Context, key string) (Lock, error) {
	name := lockName(c.prefix, key, mysqlLockNameMax)
	l, err := c.locker.ObtainTimeoutContext(ctx, name, mysqlLockWait)
	for errors.Is(err, gomysqllock.ErrMySQLTimeout) && ctx.Err() == nil {
		l, err = c.locker.ObtainTimeoutContext(ctx, name, mysqlLockWait)
	}
	if err != nil {
		if errors.Is(err, gomysqllock.ErrGetLockContextCancelled) {
			return nil, fmt.Errorf("go-mysql-lock: obtain: %w (%w)", err, context.Cause(ctx))
		}
		return nil, fmt.Errorf("go-mysql-lock: obtain: %w", err)
	}
	ml := &mysqlLock{c: c, l: l}
	c.held.add(ml)
	return ml, nil
}

// Close implements Client. go-mysql-lock has no way to drop a lock's
// connection other than Release, so locks still held are released (which
// frees them at once, as the crash of their connection would).
func (c *mysqlLockClient) Close() error {
	var err error
	for l := range c.held.drain() {
		err = errors.Join(err, l.release())
	}
	if cerr := c.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("go-mysql-lock: close: %w", cerr))
	}
	return err
}

type mysqlLock struct {
	c *mysqlLockClient
	l *gomysqllock.Lock
}

// Unlock implements Lock. A second Unlock returns an error instead of
// calling Release again, which would block forever (go-mysql-lock #11).
func (l *mysqlLock) Unlock(context.Context) error {
	if !l.c.held.remove(l) {
		return errors.New("go-mysql-lock: release: not held")
	}
	return l.release()
}

func (l *mysqlLock) release() error {
	if err := l.l.Release(); err != nil {
		return fmt.Errorf("go-mysql-lock: release: %w", err)
	}
	return nil
}

// pgOps counts the transactions of the target's database (statements in
// autocommit are one transaction each, and so is a new connection's start)
// from pg_stat_database, less those of its own earlier calls. It waits pgStatsLag first, so that every backend
// has published what it did before the call.
func pgOps(dsn string) func(ctx context.Context) (int64, error) {
	var mu sync.Mutex
	var own int64 // transactions of earlier calls: their connection and query
	return func(ctx context.Context) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-time.After(pgStatsLag):
		case <-ctx.Done():
			return 0, fmt.Errorf("postgres ops: %w", context.Cause(ctx))
		}
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return 0, fmt.Errorf("postgres ops: open: %w", err)
		}
		defer db.Close()
		// pg_stat_force_next_flush (PostgreSQL 15) publishes this call's
		// own transaction before the reply, so the next call sees it. The
		// simple protocol makes it one transaction (pgx would otherwise
		// prepare it first, in a transaction of its own).
		var n int64
		err = db.QueryRowContext(ctx, `SELECT (SELECT sum(xact_commit + xact_rollback)::bigint
			FROM pg_stat_database WHERE datname = current_database()), pg_stat_force_next_flush() IS NULL`,
			pgx.QueryExecModeSimpleProtocol).Scan(&n, new(bool))
		if err != nil {
			return 0, fmt.Errorf("postgres ops: pg_stat_database: %w", err)
		}
		n -= own
		own += 2
		return n, nil
	}
}

// mysqlOps counts the statements (Questions), pings (Com_admin_commands) and
// server-side prepares (Com_stmt_prepare) of the whole server, less those of
// its own calls: two each on MariaDB 10.11 (a new connection counts one
// question, the SHOW another).
func mysqlOps(dsn string) func(ctx context.Context) (int64, error) {
	var mu sync.Mutex
	var own int64 // statements of earlier calls
	return func(ctx context.Context) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return 0, fmt.Errorf("mysql ops: open: %w", err)
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx,
			"SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_admin_commands', 'Com_stmt_prepare')")
		if err != nil {
			return 0, fmt.Errorf("mysql ops: show status: %w", err)
		}
		defer rows.Close()
		var total int64
		for rows.Next() {
			var name string
			var v int64
			if err := rows.Scan(&name, &v); err != nil {
				return 0, fmt.Errorf("mysql ops: show status: %w", err)
			}
			total += v
		}
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("mysql ops: show status: %w", err)
		}
		own += 2 // this call's connection and SHOW count themselves
		return total - own, nil
	}
}
