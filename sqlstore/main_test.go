package sqlstore_test

import (
	"context"
	"database/sql"
	"io/fs"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

// TestMain stops the shared test servers and checks for leaked goroutines.
// Every *sql.DB a test opens is closed by its cleanup, so database/sql's
// own goroutines need no ignore.
func TestMain(m *testing.M) { testserver.VerifyTestMain(m) }

// dialect bundles what a test needs to run against one server kind.
type dialect struct {
	name   string
	driver string
	schema schema.Dialect
	server func(testing.TB) *testserver.SQLServer
	store  func(*sql.DB, ...sqlstore.Option) (*sqlstore.Store, error)
}

var dialects = []dialect{
	{"postgres", "pgx", schema.Postgres, testserver.Postgres, sqlstore.NewPostgres},
	{"mysql", "mysql", schema.MySQL, testserver.MySQL, sqlstore.NewMySQL},
}

// forEach runs f as a parallel subtest per dialect.
func forEach(t *testing.T, f func(t *testing.T, d dialect)) {
	for _, d := range dialects {
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
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })
	return db
}

// migrated returns the DSN of a fresh database with the schema applied.
func (d dialect) migrated(t testing.TB) string {
	t.Helper()
	dsn := d.server(t).DSN()
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
