//go:build unix

package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

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
