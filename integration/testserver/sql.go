package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
)

// SQLServer is a PostgreSQL or MySQL/MariaDB server with a database created
// for one test. Open it with database/sql:
//
//	db, err := sql.Open("pgx", srv.DSN())   // Postgres, pgx v5 stdlib
//	db, err := sql.Open("mysql", srv.DSN()) // MySQL, go-sql-driver
type SQLServer struct {
	*Process // Addr; control methods work for private servers only
	dsn, db  string
}

// DSN returns the data source name of the test's database:
// postgres://postgres@127.0.0.1:PORT/DB?sslmode=disable for PostgreSQL,
// root@tcp(127.0.0.1:PORT)/DB for MySQL (servers from the environment keep
// their user, password and parameters).
func (s *SQLServer) DSN() string { return s.dsn }

// Database returns the name of the test's database.
func (s *SQLServer) Database() string { return s.db }

// sqlBackend is a running SQL server this package can create databases on.
type sqlBackend struct {
	proc    *Process
	driver  string                   // "pgx" or "mysql"
	admin   string                   // DSN of a database to run CREATE DATABASE in
	dsnFor  func(db string) string   // DSN of database db
	dropSQL func(db string) string   // nil: never drop (private servers die with the test)
	quote   func(name string) string // identifier quoting
}

// newDatabase creates a fresh database for the test and, for servers that
// outlive it, drops it when the test ends.
func (b *sqlBackend) newDatabase(t testing.TB) *SQLServer {
	t.Helper()
	name := unique("simba_")
	if err := b.exec(b.admin, "CREATE DATABASE "+b.quote(name)); err != nil {
		t.Fatalf("testserver: create database on %s: %v", b.proc, err)
	}
	if b.dropSQL != nil {
		t.Cleanup(func() {
			if err := b.exec(b.admin, b.dropSQL(b.quote(name))); err != nil {
				t.Logf("testserver: drop database %s on %s: %v", name, b.proc, err)
			}
		})
	}
	return &SQLServer{Process: b.proc, dsn: b.dsnFor(name), db: name}
}

// exec runs one statement on a connection of its own.
func (b *sqlBackend) exec(dsn, stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open(b.driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// pingSQL opens dsn and runs SELECT 1: the server accepts connections and
// answers queries (PostgreSQL refuses them while it starts or recovers).
func pingSQL(ctx context.Context, driver, dsn string) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return fmt.Errorf("SELECT 1 returned %d", one)
	}
	return nil
}

// privateSQL starts a SQL server for t alone with start, under the clock
// of opts (st: the single-threaded libfaketime), stopped when t ends, and
// returns a fresh database on it through backend.
func privateSQL(t testing.TB, opts []ServerOption, st bool,
	start func(env []string) (*group, error), backend func(*Process, bool) *sqlBackend) *SQLServer {
	t.Helper()
	var cfg serverConfig
	for _, o := range opts {
		o(&cfg)
	}
	begin := time.Now()
	g, err := start(clockEnv(cfg.clock, false, false, st))
	need(t, err)
	private(t, g)
	logStart(t, "private "+g.procs[0].String(), begin)
	return backend(g.procs[0], false).newDatabase(t)
}
