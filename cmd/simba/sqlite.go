//go:build unix

package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

	"github.com/simba-go/simba/internal/backoff"
	"github.com/simba-go/simba/internal/sqlitebusy"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

const sqliteDialect = schema.SQLite

// sqliteParams: wait briefly (100 ms) for other processes' writes before
// failing with SQLITE_BUSY — the store retries that under the call's
// context, while the driver's own wait ignores it —, let readers run beside
// a writer (WAL), and take the write lock when a transaction begins.
const sqliteParams = "?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)&_txlock=immediate"

// openSQLite opens the SQLite file of t, creating the default file's
// directory (private to the user) when needed.
func openSQLite(t target) (*sql.DB, error) {
	if t.defPath {
		if err := os.MkdirAll(filepath.Dir(t.dsn), 0o700); err != nil {
			return nil, err
		}
	}
	return sql.Open("sqlite", "file:"+t.dsn+sqliteParams)
}

func newSQLiteStore(db *sql.DB) (*sqlstore.Store, error) {
	s, err := sqlstore.NewSQLite(db)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return s, nil
}

// pingSQLite makes the first connection to the file, waiting under ctx
// while another process holds its lock (the driver's own wait, the busy
// timeout, is short: it ignores ctx). Several simba processes starting at
// once on a new file each set WAL mode on their first connection, which
// takes the lock: one of them failed with SQLITE_BUSY before.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	for n := 0; ; n++ {
		err := db.PingContext(ctx)
		if err == nil || !sqlitebusy.Is(err) {
			return err
		}
		t := time.NewTimer(backoff.Exp(time.Millisecond, 50*time.Millisecond, n))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
