//go:build unix

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
	"github.com/simba-go/simba/zkstore"
)

// connectTimeout bounds opening a store: connecting and the first request.
const connectTimeout = 10 * time.Second

// zkDefaultSession is the ZooKeeper session timeout when neither --ttl nor
// --transition is given: the default ttl + transition split 5:3 (6.25s + 3.75s).
const zkDefaultSession = 10 * time.Second

// timing is the lease timing asked for on the command line.
type timing struct {
	ttl, transition time.Duration
	set             bool // given by flags (else ZooKeeper derives it from its session)
}

// backend is an open store.
type backend struct {
	target
	store   lease.Store    // nil when opened for migrations only
	db      *sql.DB        // SQL stores
	dialect schema.Dialect // SQL stores
	timing  timing         // the timing in effect
	opts    []lease.Option // the Manager's timing options
	closers []func()
}

// Close closes the store and its clients, last opened first.
func (b *backend) Close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// safety is the margin before the store could grant a lost lease to someone
// else: the lease package's default, set explicitly so that simba knows it.
func (t timing) safety() time.Duration {
	return lease.DefaultSafetyMargin(t.ttl, t.transition)
}

// openMode says what a command needs of the store.
type openMode int

const (
	forLeases  openMode = iota // a lease.Store, schema present (SQLite: migrated now)
	forMigrate                 // SQL: the *sql.DB only, no schema check
)

// open connects to the store of t and checks that it answers.
func (c *cli) open(ctx context.Context, t target, tm timing, mode openMode) (*backend, error) {
	b := &backend{target: t, timing: tm}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var err error
	switch t.kind {
	case kindSQLite, kindPostgres, kindMySQL:
		err = b.openSQL(ctx, mode)
	case kindRedis:
		err = b.openRedis(ctx)
	case kindZK:
		err = b.openZK(ctx)
	default:
		err = fmt.Errorf("unknown store kind %q", t.kind)
	}
	if err != nil {
		b.Close()
		return nil, withCode(codeUnavailable, err)
	}
	b.opts = append(b.opts, lease.WithSafetyMargin(b.timing.safety()))
	return b, nil
}

func (b *backend) openSQL(ctx context.Context, mode openMode) error {
	var err error
	switch b.kind {
	case kindSQLite:
		b.db, err = openSQLite(b.target)
		b.dialect = sqliteDialect
	case kindPostgres:
		b.db, err = sql.Open("pgx", b.dsn)
		b.dialect = schema.Postgres
	case kindMySQL:
		b.db, err = sql.Open("mysql", b.dsn)
		b.dialect = schema.MySQL
	}
	if err != nil {
		return fmt.Errorf("%s: %v", b.display, err)
	}
	b.closers = append(b.closers, func() { b.db.Close() })
	ping := b.db.PingContext
	if b.kind == kindSQLite {
		ping = func(ctx context.Context) error { return pingSQLite(ctx, b.db) }
	}
	if err := ping(ctx); err != nil {
		return fmt.Errorf("%s: unreachable: %v", b.display, unwrapTimeout(ctx, err))
	}
	if mode == forMigrate {
		return nil
	}
	if b.kind == kindSQLite {
		if err := schema.Migrate(ctx, b.db, b.dialect); err != nil {
			return fmt.Errorf("%s: create the schema: %v", b.display, err)
		}
	} else if err := checkTable(ctx, b.db); err != nil {
		return fmt.Errorf("%s: %v", b.display, err)
	}
	var store *sqlstore.Store
	switch b.kind {
	case kindSQLite:
		store, err = newSQLiteStore(b.db)
	case kindPostgres:
		store, err = sqlstore.NewPostgres(b.db)
	case kindMySQL:
		store, err = sqlstore.NewMySQL(b.db)
	}
	if err != nil {
		return fmt.Errorf("%s: %v", b.display, err)
	}
	b.use(store)
	return nil
}

// use makes store the backend's, closed by Close, with the timing flags.
func (b *backend) use(store interface {
	lease.Store
	Close() error
}) {
	b.store = store
	b.closers = append(b.closers, func() { store.Close() })
	b.opts = []lease.Option{lease.WithTTL(b.timing.ttl), lease.WithTransition(b.timing.transition)}
}

// checkTable tells a database that was never migrated from one that fails.
func checkTable(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+sqlstore.DefaultTable+" WHERE 1 = 0").Scan(&n)
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	var myErr *mysql.MySQLError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" || errors.As(err, &myErr) && myErr.Number == 1146 {
		return fmt.Errorf("no table %s: run simba migrate up on this store first", sqlstore.DefaultTable)
	}
	return unwrapTimeout(ctx, err)
}

func (b *backend) openRedis(ctx context.Context) error {
	var client redis.UniversalClient
	if b.cluster != nil {
		client = redis.NewClusterClient(b.cluster)
	} else {
		client = redis.NewClient(b.redis)
	}
	b.closers = append(b.closers, func() { client.Close() })
	if err := client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%s: unreachable: %v", b.display, unwrapTimeout(ctx, err))
	}
	store, err := redisstore.New(client)
	if err != nil {
		return fmt.Errorf("%s: %v", b.display, err)
	}
	b.use(store)
	return nil
}

// openZK connects with a session timeout of ttl + transition (default 10s)
// and waits for the session. The server may grant a shorter timeout (its
// maxSessionTimeout): zkstore reads the granted one off the wire.
func (b *backend) openZK(ctx context.Context) error {
	session := zkDefaultSession
	if b.timing.set {
		session = b.timing.ttl + b.timing.transition
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var failed atomic.Int32
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, addr, timeout)
		// Every server refused or timed out once: go-zookeeper would
		// retry forever; a command gives up.
		if err != nil && int(failed.Add(1)) >= len(b.servers) {
			cancel(err)
		}
		return conn, err
	}
	sess, err := zkstore.Connect(ctx, b.servers, session, zkstore.WithDialer(dial),
		zkstore.WithConnOptions(zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false)))
	if err != nil {
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return fmt.Errorf("%s: unreachable: no session within %v", b.display, connectTimeout)
		}
		if cause := context.Cause(ctx); cause != nil {
			return fmt.Errorf("%s: unreachable: %v", b.display, cause)
		}
		return fmt.Errorf("%s: %v", b.display, err)
	}
	b.closers = append(b.closers, sess.Close)
	store, err := zkstore.New(sess, zkstore.WithRoot(b.root))
	if err != nil {
		return fmt.Errorf("%s: %v", b.display, err)
	}
	b.store = store
	if !b.timing.set {
		b.opts = store.LeaseOptions()
		b.timing.ttl, b.timing.transition = store.MaxGrant()*5/8, store.MaxGrant()-store.MaxGrant()*5/8
		return nil
	}
	// A lease lives at most the session timeout the server granted: with
	// a safety margin as long, every grant would be lost as it is made.
	if granted := store.MaxGrant(); min(b.timing.ttl+b.timing.transition, granted) <= b.timing.safety() {
		return fail(codeUsage, "%s: the server granted a %v session, and no lease outlives it: --ttl %v and --transition %v leave a safety margin of %v (use a ttl + transition well under %v, or raise the server's maxSessionTimeout)",
			b.display, granted, b.timing.ttl, b.timing.transition, b.timing.safety(), granted)
	}
	b.opts = []lease.Option{lease.WithTTL(b.timing.ttl), lease.WithTransition(b.timing.transition)}
	return nil
}

// zkQuiet drops go-zookeeper's log lines: failures are reported as simba's
// own one-line errors.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// unwrapTimeout names the connect timeout instead of "context deadline exceeded".
func unwrapTimeout(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v", connectTimeout)
	}
	return err
}
