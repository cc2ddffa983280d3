package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/simba-go/simba/internal/sqlitebusy"
)

// liteDriver is a golang-migrate database driver for SQLite on one
// connection of a *sql.DB the caller opened with any SQLite driver. It is
// written here, small, because golang-migrate's own SQLite drivers import a
// SQLite driver (cgo or a large pure-Go one) into every user of this
// package. Lock is BEGIN IMMEDIATE, so two processes migrating one file at
// once take turns (busy errors are retried, with backoff, until ctx ends or
// liteOpenMax has passed, whatever the busy timeout); everything until
// Unlock (COMMIT) is one transaction, DDL included.
type liteDriver struct {
	ctx  context.Context // of the migration: bounds Lock's wait
	conn *sql.Conn
	tx   bool // inside BEGIN IMMEDIATE
}

func newLiteDriver(ctx context.Context, conn *sql.Conn) (*liteDriver, error) {
	err := liteWait(ctx, func() error {
		_, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+MigrationsTable+
			" (version INTEGER NOT NULL, dirty INTEGER NOT NULL)")
		return err
	})
	if err != nil {
		return nil, err
	}
	return &liteDriver{ctx: ctx, conn: conn}, nil
}

// Open is not supported: the driver works on a connection it is given.
func (d *liteDriver) Open(string) (database.Driver, error) {
	return nil, errors.New("schema: sqlite: opening by URL is not supported")
}

// Close ends an open transaction and hands the connection back.
func (d *liteDriver) Close() error {
	var err error
	if d.tx {
		_, err = d.conn.ExecContext(context.Background(), "ROLLBACK")
		d.tx = false
	}
	return errors.Join(err, d.conn.Close())
}

// Lock starts a write transaction: other writers wait (busy timeout,
// then liteWait).
func (d *liteDriver) Lock() error {
	err := liteWait(d.ctx, func() error {
		_, err := d.conn.ExecContext(d.ctx, "BEGIN IMMEDIATE")
		return err
	})
	if err != nil {
		return err
	}
	d.tx = true
	return nil
}

// Unlock commits what was done since Lock.
func (d *liteDriver) Unlock() error {
	if !d.tx {
		return nil
	}
	d.tx = false
	_, err := d.conn.ExecContext(context.Background(), "COMMIT")
	return err
}

// Run executes one migration file.
func (d *liteDriver) Run(migration io.Reader) error {
	b, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	if _, err := d.conn.ExecContext(context.Background(), string(b)); err != nil {
		return &database.Error{OrigErr: err, Query: b}
	}
	return nil
}

// SetVersion records version (database.NilVersion: none) and dirty.
func (d *liteDriver) SetVersion(version int, dirty bool) error {
	ctx := context.Background()
	if _, err := d.conn.ExecContext(ctx, "DELETE FROM "+MigrationsTable); err != nil {
		return err
	}
	if version < 0 && !dirty {
		return nil
	}
	_, err := d.conn.ExecContext(ctx, "INSERT INTO "+MigrationsTable+" (version, dirty) VALUES (?, ?)", version, dirty)
	return err
}

// Version returns the recorded version, database.NilVersion when none.
func (d *liteDriver) Version() (version int, dirty bool, err error) {
	err = d.conn.QueryRowContext(context.Background(),
		"SELECT version, dirty FROM "+MigrationsTable+" LIMIT 1").Scan(&version, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return database.NilVersion, false, nil
	}
	return version, dirty, err
}

// Drop is not supported: it would drop every table of the file.
func (d *liteDriver) Drop() error {
	return fmt.Errorf("schema: sqlite: Drop is not supported; use MigrateDown")
}

// liteOpenMax bounds how long connect waits for a SQLite file that other
// connections keep locked.
const liteOpenMax = 30 * time.Second

// connect borrows a connection of db. On SQLite, opening one runs the
// DSN's pragmas, and switching the file to WAL (journal_mode) while
// another connection holds its write lock — another process migrating —
// fails at once with SQLITE_BUSY whatever the busy timeout: SQLite does
// not wait where waiting could deadlock. connect waits for the lock
// instead, with backoff, until ctx ends or liteOpenMax has passed.
func connect(ctx context.Context, db *sql.DB, d Dialect) (*sql.Conn, error) {
	if d != SQLite {
		return db.Conn(ctx)
	}
	var conn *sql.Conn
	err := liteWait(ctx, func() error {
		var err error
		conn, err = db.Conn(ctx)
		return err
	})
	return conn, err
}

// liteWait runs f until it fails with anything but SQLite's busy errors,
// with backoff (1 ms doubling to 50 ms), until ctx ends or liteOpenMax has
// passed: the DSN's busy timeout may be short (the store recommends
// 100 ms, since the driver's busy wait ignores the context).
func liteWait(ctx context.Context, f func() error) error {
	start := time.Now()
	for n := 0; ; n++ {
		err := f()
		if err == nil || !sqlitebusy.Is(err) || time.Since(start) > liteOpenMax {
			return err
		}
		t := time.NewTimer(min(time.Millisecond<<min(n, 6), 50*time.Millisecond) + rand.N(time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}
