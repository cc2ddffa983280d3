package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/golang-migrate/migrate/v4/database"
)

// serverDriver is a golang-migrate database driver for PostgreSQL or MySQL
// on one connection of a *sql.DB the caller opened with any driver. It is
// written here, small, because golang-migrate's own drivers import a
// database/sql driver each (lib/pq, go-sql-driver/mysql), and this package
// would then put both into every binary that uses it. It keeps their
// migrations table (version bigint, dirty boolean; one row) and their
// advisory lock, so a database migrated by them is migrated by it, and two
// processes running either take turns.
type serverDriver struct {
	conn   *sql.Conn
	d      dialectSQL
	table  string // quoted, with its schema on PostgreSQL
	lockID string // golang-migrate's advisory lock id for the table
	locked atomic.Bool
}

// dialectSQL is what differs between PostgreSQL and MySQL.
type dialectSQL struct {
	name string
	// lock takes golang-migrate's advisory lock id on conn.
	lock func(ctx context.Context, conn *sql.Conn, id string) error
	// unlock lets it go.
	unlock func(ctx context.Context, conn *sql.Conn, id string) error
	// args are the placeholders of the INSERT of SetVersion.
	args string
}

var pgSQL = dialectSQL{
	name: "postgres",
	lock: func(ctx context.Context, conn *sql.Conn, id string) error {
		_, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", id)
		return err
	},
	unlock: func(ctx context.Context, conn *sql.Conn, id string) error {
		_, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", id)
		return err
	},
	args: "$1, $2",
}

// myLockWait is how long Lock waits for another migrator on MySQL, as
// golang-migrate's driver does.
const myLockWait = 10

var mySQL = dialectSQL{
	name: "mysql",
	lock: func(ctx context.Context, conn *sql.Conn, id string) error {
		var ok sql.NullBool
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", id, myLockWait).Scan(&ok); err != nil {
			return err
		}
		if !ok.Bool {
			return database.ErrLocked
		}
		return nil
	},
	unlock: func(ctx context.Context, conn *sql.Conn, id string) error {
		_, err := conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", id)
		return err
	},
	args: "?, ?",
}

// newPostgresDriver is golang-migrate's PostgreSQL driver's set-up: the
// table in the current schema, the lock id of database, schema and table.
func newPostgresDriver(ctx context.Context, conn *sql.Conn) (*serverDriver, error) {
	var db string
	var sch sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT current_database(), current_schema()").Scan(&db, &sch); err != nil {
		return nil, err
	}
	if !sch.Valid {
		return nil, errors.New("schema: postgres: no current schema (check search_path)")
	}
	id, err := database.GenerateAdvisoryLockId(db, sch.String, MigrationsTable)
	if err != nil {
		return nil, err
	}
	return newServerDriver(ctx, conn, pgSQL, pgQuote(sch.String)+"."+pgQuote(MigrationsTable), id)
}

// newMySQLDriver is golang-migrate's MySQL driver's set-up: the table in
// the current database, the lock id of "database:table".
func newMySQLDriver(ctx context.Context, conn *sql.Conn) (*serverDriver, error) {
	var db sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&db); err != nil {
		return nil, err
	}
	if db.String == "" {
		return nil, errors.New("schema: mysql: no database selected (name one in the DSN)")
	}
	id, err := database.GenerateAdvisoryLockId(fmt.Sprintf("%s:%s", db.String, MigrationsTable))
	if err != nil {
		return nil, err
	}
	return newServerDriver(ctx, conn, mySQL, "`"+MigrationsTable+"`", id)
}

// newServerDriver creates the migrations table if it is missing, under the
// lock.
func newServerDriver(ctx context.Context, conn *sql.Conn, d dialectSQL, table, id string) (*serverDriver, error) {
	s := &serverDriver{conn: conn, d: d, table: table, lockID: id}
	if err := d.lock(ctx, conn, id); err != nil {
		return nil, err
	}
	_, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (version bigint not null primary key, dirty boolean not null)")
	return s, errors.Join(err, d.unlock(ctx, conn, id))
}

// pgQuote quotes a PostgreSQL identifier.
func pgQuote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Open is not supported: the driver works on a connection it is given.
func (s *serverDriver) Open(string) (database.Driver, error) {
	return nil, fmt.Errorf("schema: %s: opening by URL is not supported", s.d.name)
}

// Close hands the connection back (the lock goes with an Unlock).
func (s *serverDriver) Close() error { return s.conn.Close() }

// Lock takes the migrations' advisory lock: other migrators wait.
func (s *serverDriver) Lock() error {
	if !s.locked.CompareAndSwap(false, true) {
		return database.ErrLocked
	}
	if err := s.d.lock(context.Background(), s.conn, s.lockID); err != nil {
		s.locked.Store(false)
		return err
	}
	return nil
}

// Unlock lets the lock go.
func (s *serverDriver) Unlock() error {
	if !s.locked.CompareAndSwap(true, false) {
		return database.ErrNotLocked
	}
	if err := s.d.unlock(context.Background(), s.conn, s.lockID); err != nil {
		s.locked.Store(true)
		return err
	}
	return nil
}

// Run executes one migration file (one statement, see package doc).
func (s *serverDriver) Run(migration io.Reader) error {
	b, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil
	}
	if _, err := s.conn.ExecContext(context.Background(), string(b)); err != nil {
		return database.Error{OrigErr: err, Err: "migration failed", Query: b}
	}
	return nil
}

// SetVersion records version (database.NilVersion: none) and dirty, in one
// transaction.
func (s *serverDriver) SetVersion(version int, dirty bool) (err error) {
	ctx := context.Background()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+s.table); err != nil {
		return err
	}
	if version >= 0 || version == database.NilVersion && dirty {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+s.table+" (version, dirty) VALUES ("+s.d.args+")", version, dirty); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Version returns the recorded version, database.NilVersion when none.
func (s *serverDriver) Version() (version int, dirty bool, err error) {
	err = s.conn.QueryRowContext(context.Background(), "SELECT version, dirty FROM "+s.table+" LIMIT 1").Scan(&version, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return database.NilVersion, false, nil
	}
	return version, dirty, err
}

// Drop is not supported: it would drop every table of the database.
func (s *serverDriver) Drop() error {
	return fmt.Errorf("schema: %s: Drop is not supported; use MigrateDown", s.d.name)
}
