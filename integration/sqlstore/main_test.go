package sqlstore_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

// TestMain stops the shared test servers and checks for leaked goroutines.
// Every *sql.DB a test opens is closed by its cleanup, so database/sql's
// own goroutines need no ignore.
func TestMain(m *testing.M) { testserver.VerifyTestMain(m) }

// dialect bundles what a test needs to run against one database kind.
type dialect struct {
	name   string
	driver string
	schema schema.Dialect
	server func(testing.TB) *testserver.SQLServer // nil for SQLite
	store  func(*sql.DB, ...sqlstore.Option) (*sqlstore.Store, error)
}

var (
	// postgres is PostgreSQL as a Store has it by default: doorbells
	// (advisory locks) wake its waiters.
	postgres = dialect{"postgres", "pgx", schema.Postgres, testserver.Postgres, sqlstore.NewPostgres}
	// pgListen is PostgreSQL with LISTEN/NOTIFY instead of doorbells
	// (WithPostgresDoorbells(false)).
	pgListen = dialect{"pglisten", "pgx", schema.Postgres, testserver.Postgres,
		func(db *sql.DB, opts ...sqlstore.Option) (*sqlstore.Store, error) {
			return sqlstore.NewPostgres(db, append([]sqlstore.Option{sqlstore.WithPostgresDoorbells(false)}, opts...)...)
		}}
	mysqlDB = dialect{"mysql", "mysql", schema.MySQL, testserver.MySQL, sqlstore.NewMySQL}
	sqlite  = dialect{"sqlite", "sqlite", schema.SQLite, nil, sqlstore.NewSQLite}
	// dialects are the kinds every store test runs on; servers, the ones
	// with a server (and its connection, time zone and restarts).
	dialects = []dialect{postgres, mysqlDB, sqlite}
	// pushDialects are the kinds the tests of waiting and waking run on:
	// every dialect, and PostgreSQL with LISTEN.
	pushDialects = []dialect{postgres, pgListen, mysqlDB, sqlite}
	servers      = []dialect{postgres, pgListen, mysqlDB}
)

// liteDSN is the DSN of a SQLite file: WAL, a busy timeout and immediate
// write transactions, as sqlstore.NewSQLite advises.
func liteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)&_txlock=immediate"
}

// fresh returns the DSN of a new, empty database.
func (d dialect) fresh(t testing.TB) string {
	t.Helper()
	if d.server == nil {
		return liteDSN(filepath.Join(t.TempDir(), "simba.db"))
	}
	return d.server(t).DSN()
}

// forEach runs f as a parallel subtest per dialect.
func forEach(t *testing.T, f func(t *testing.T, d dialect)) { forAll(t, dialects, f) }

// forPush runs f as a parallel subtest per push dialect.
func forPush(t *testing.T, f func(t *testing.T, d dialect)) { forAll(t, pushDialects, f) }

// forAll runs f as a parallel subtest per dialect of ds.
func forAll(t *testing.T, ds []dialect, f func(t *testing.T, d dialect)) {
	for _, d := range ds {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			f(t, d)
		})
	}
}

// open opens dsn with the dialect's driver, closed when the test ends.
func (d dialect) open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(d.driver, dsn)
	if err != nil {
		t.Fatalf("sql.Open(%s): %v", d.driver, err)
	}
	// As the README asks: idle connections up to the pool's size, so that
	// a burst of calls does not close connections that the next burst
	// opens again (a connection opened on a loaded machine can take longer
	// than a call's timeout).
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	t.Cleanup(func() { db.Close() })
	return db
}

// memDir returns a directory removed when the test ends, in memory
// (/dev/shm, a tmpfs) where the machine has one, else a temporary
// directory. An fsync there returns at once: a disk shared with a whole
// test run can hold one for seconds, longer than a ttl.
func memDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "simba-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// migrated returns the DSN of a fresh database with the schema applied.
func (d dialect) migrated(t testing.TB) string {
	t.Helper()
	dsn := d.fresh(t)
	d.migrate(t, dsn)
	return dsn
}

// migrate applies the schema to the database of dsn.
func (d dialect) migrate(t testing.TB, dsn string) {
	t.Helper()
	if err := schema.Migrate(context.Background(), d.open(t, dsn), d.schema); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
}

// newStore returns a Store on its own *sql.DB of dsn.
func (d dialect) newStore(t testing.TB, dsn string, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	s, err := d.store(d.open(t, dsn), opts...)
	if err != nil {
		t.Fatalf("New %s store: %v", d.name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fsReadFile reads name from f as a string.
func fsReadFile(f fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(f, name)
	return string(b), err
}
