// Package sqlitebusy tells SQLite's "the file is locked" errors apart, for
// the packages that wait for another process's write lock under their own
// context rather than in the driver, which ignores it.
package sqlitebusy

import "errors"

// SQLite's primary result codes for a lock another connection holds.
const (
	codeBusy   = 5 // SQLITE_BUSY
	codeLocked = 6 // SQLITE_LOCKED
)

// Is reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED (any
// extended code) from a driver whose errors have a Code method
// (modernc.org/sqlite, github.com/ncruces/go-sqlite3).
func Is(err error) bool {
	var c interface{ Code() int }
	if !errors.As(err, &c) {
		return false
	}
	code := c.Code() & 0xff
	return code == codeBusy || code == codeLocked
}
