// Package schema holds the SQL schema of the SQL stores (package sqlstore)
// as golang-migrate migrations, embedded in the binary, one directory per
// dialect:
//
//	schema/postgres/000001_create_simba_mutex.up.sql   (and .down.sql)
//	schema/mysql/000001_create_simba_mutex.up.sql      (MySQL 8, MariaDB 10.5+)
//	schema/sqlite/000001_create_simba_mutex.up.sql     (SQLite 3.38+)
//
// Migrate applies them to a database the caller opened:
//
//	db, err := sql.Open("pgx", dsn) // or lib/pq's "postgres", or "mysql"
//	if err != nil { ... }
//	if err := schema.Migrate(ctx, db, schema.Postgres); err != nil { ... }
//	store, err := sqlstore.NewPostgres(db)
//
// The migration state lives in its own table, [MigrationsTable], so it never
// mixes with an application's own golang-migrate history in the same
// database. Migrate never closes or reconfigures db: it borrows one
// connection from the pool and returns it.
//
// The files are plain SQL, one statement each, and can be applied by any
// other migration tool instead (copy them, or read them through [FS]). To
// use a table name other than simba_mutex, copy the up migration, change
// the name, and pass sqlstore.WithTable to the store.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// MigrationsTable is the table in which golang-migrate records the schema
// version of the SQL stores (instead of its default schema_migrations).
const MigrationsTable = "simba_schema_migrations"

// Dialect names a SQL dialect with a migration directory.
type Dialect string

// The dialects with migrations.
const (
	// Postgres is PostgreSQL (12 or later), through any database/sql
	// driver (pgx's stdlib, lib/pq).
	Postgres Dialect = "postgres"
	// MySQL is MySQL 8 or MariaDB 10.5 or later, through
	// github.com/go-sql-driver/mysql.
	MySQL Dialect = "mysql"
	// SQLite is SQLite 3.38 or later, through any database/sql driver
	// (modernc.org/sqlite needs no cgo). Give the connection a busy
	// timeout, so that processes migrating one file at once take turns.
	SQLite Dialect = "sqlite"
)

// ErrUnknownDialect is returned for a Dialect other than [Postgres],
// [MySQL] and [SQLite].
var ErrUnknownDialect = errors.New("schema: unknown dialect")

// ErrNilDB is returned when the *sql.DB is nil.
var ErrNilDB = errors.New("schema: nil *sql.DB")

//go:embed postgres/*.sql mysql/*.sql sqlite/*.sql
var files embed.FS

// FS returns the migration files of d (NNNNNN_name.up.sql and .down.sql)
// at the root of the returned file system, for use with other tools.
func FS(d Dialect) (fs.FS, error) {
	if d != Postgres && d != MySQL && d != SQLite {
		return nil, fmt.Errorf("%w: %q", ErrUnknownDialect, string(d))
	}
	return fs.Sub(files, string(d))
}

// Migrate applies every migration of d that db lacks. A database that is
// already up to date is not an error.
func Migrate(ctx context.Context, db *sql.DB, d Dialect) error {
	return run(ctx, db, d, "up", func(m *migrate.Migrate) error { return m.Up() })
}

// MigrateDown reverts every migration of d, dropping the store's table
// (and every lease in it). A database without migrations is not an error.
func MigrateDown(ctx context.Context, db *sql.DB, d Dialect) error {
	return run(ctx, db, d, "down", func(m *migrate.Migrate) error { return m.Down() })
}

// Version returns the migration version of d that db is at (0 when none
// was applied) and whether the last migration failed half-way (dirty; the
// database then needs a look by hand, see golang-migrate's documentation).
func Version(ctx context.Context, db *sql.DB, d Dialect) (version uint, dirty bool, err error) {
	err = run(ctx, db, d, "version", func(m *migrate.Migrate) error {
		var verr error
		version, dirty, verr = m.Version()
		if errors.Is(verr, migrate.ErrNilVersion) {
			return nil
		}
		return verr
	})
	return version, dirty, err
}

// run opens a golang-migrate instance on one connection of db, runs op and
// gives the connection back. golang-migrate's drivers are not
// context-aware after set-up: ctx bounds getting the connection and the
// set-up, and a ctx that ends meanwhile is reported, but a statement in
// flight runs to its end.
func run(ctx context.Context, db *sql.DB, d Dialect, what string, op func(*migrate.Migrate) error) error {
	if db == nil {
		return ErrNilDB
	}
	src, err := FS(d)
	if err != nil {
		return err
	}
	source, err := iofs.New(src, ".")
	if err != nil {
		return fmt.Errorf("schema: %s %s: %w", d, what, err)
	}
	conn, err := connect(ctx, db, d)
	if err != nil {
		_ = source.Close()
		return fmt.Errorf("schema: %s %s: %w", d, what, err)
	}
	// Closing the driver closes conn only (it returns to the pool): the
	// drivers (driver.go, sqlite.go) never hold or close db itself.
	drv, err := driverFor(ctx, conn, d)
	if err != nil {
		_ = source.Close()
		_ = conn.Close()
		return fmt.Errorf("schema: %s %s: %w", d, what, err)
	}
	m, err := migrate.NewWithInstance("iofs", source, string(d), drv)
	if err != nil {
		_ = source.Close()
		_ = drv.Close()
		return fmt.Errorf("schema: %s %s: %w", d, what, err)
	}
	err = op(m)
	serr, derr := m.Close()
	if errors.Is(err, migrate.ErrNoChange) {
		err = nil
	}
	if err = errors.Join(err, serr, derr); err != nil {
		return fmt.Errorf("schema: %s %s: %w", d, what, errors.Join(err, ctx.Err()))
	}
	return nil
}

// driverFor returns the golang-migrate driver of d on conn.
func driverFor(ctx context.Context, conn *sql.Conn, d Dialect) (database.Driver, error) {
	switch d {
	case Postgres:
		return newPostgresDriver(ctx, conn)
	case MySQL:
		return newMySQLDriver(ctx, conn)
	case SQLite:
		return newLiteDriver(ctx, conn)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownDialect, string(d))
}
