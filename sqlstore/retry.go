package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/simba-go/simba/internal/backoff"
	"github.com/simba-go/simba/internal/sqlitebusy"
	"github.com/simba-go/simba/lease"
)

// retry runs f until it succeeds, fails with an error that is not
// transient, or has been retried s.retries times, with a short jittered
// backoff between attempts (2 ms doubling to 1 s). A transient error means the server rolled the
// statement back (or never got it), so running it again is safe.
//
// SQLite's busy errors are retried apart from that count, with a backoff
// capped at 50 ms, until ctx ends or liteBusyMax has passed: they only
// mean that another connection is writing.
func (s *Store) retry(ctx context.Context, f func() error) error {
	start := time.Now()
	for attempt, busy := 0, 0; ; {
		err := f()
		if err == nil || ctx.Err() != nil {
			return err
		}
		var pause time.Duration
		switch {
		case sqlitebusy.Is(err) && time.Since(start) < liteBusyMax:
			s.busy.Add(1)
			pause = backoff.Plus(backoff.Exp(time.Millisecond, 50*time.Millisecond, busy), time.Millisecond)
			busy++
		case transient(err) && attempt < s.retries:
			pause = backoff.Plus(backoff.Exp(2*time.Millisecond, time.Second, attempt), 2*time.Millisecond)
			attempt++
		case setupError(err):
			return fmt.Errorf("%w (run the migrations of package schema, or check the grants): %w", lease.ErrStoreSetup, err)
		default:
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// SQLSTATE codes of PostgreSQL errors whose statement was rolled back and
// may be run again.
const (
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
)

// MySQL error numbers whose statement was rolled back.
const (
	myLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT (with innodb_rollback_on_timeout off only the statement)
	myDeadlock        = 1213 // ER_LOCK_DEADLOCK
)

// liteBusyMax bounds the retries of SQLite's busy errors.
const liteBusyMax = 10 * time.Second

// liteBusyWarn is the longest busy timeout NewSQLite accepts without a
// warning: the driver's busy wait does not end with the context.
const liteBusyWarn = time.Second

// warnLiteBusyTimeout logs a warning when a connection of db waits longer
// than liteBusyWarn for a locked file (PRAGMA busy_timeout), since every
// call may then overrun its context by that much. It only warns: the
// pragma is set per connection by the caller's DSN or hooks, which the
// Store does not own, and one connection's value says nothing sure about
// the next one's.
func warnLiteBusyTimeout(db *sql.DB, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var ms int64
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil {
		return // not readable now; the store's own calls will report the file
	}
	if d := time.Duration(ms) * time.Millisecond; d > liteBusyWarn {
		log.Warn("sqlstore: SQLite busy_timeout is long: a call can overrun its context by that much; use busy_timeout(100) and let the store retry under the context",
			"busy_timeout", d)
	}
}

// transient reports whether err says the statement did not take effect and
// may be retried: driver.ErrBadConn (database/sql's own signal that nothing
// was sent), a PostgreSQL serialization failure or deadlock (any driver
// whose errors have a SQLState method: pgx, lib/pq), a MySQL deadlock or
// lock wait timeout.
func transient(err error) bool {
	if errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		switch pg.SQLState() {
		case pgSerializationFailure, pgDeadlockDetected:
			return true
		}
	}
	if n, ok := myErrNumber(err); ok {
		switch n {
		case myDeadlock, myLockWaitTimeout:
			return true
		}
	}
	return false
}

// setupError reports whether err says the store is not set up for this
// client, which no retry fixes: a missing table or column (the migrations
// were not run), a missing privilege, an unknown database, refused
// credentials.
func setupError(err error) bool {
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		switch pg.SQLState() {
		case "42P01", // undefined_table
			"42703", // undefined_column
			"42501", // insufficient_privilege
			"3D000", // invalid_catalog_name
			"28000", // invalid_authorization_specification
			"28P01": // invalid_password
			return true
		}
		return false
	}
	if n, ok := myErrNumber(err); ok {
		switch n {
		case 1044, // ER_DBACCESS_DENIED_ERROR
			1045, // ER_ACCESS_DENIED_ERROR
			1049, // ER_BAD_DB_ERROR
			1054, // ER_BAD_FIELD_ERROR
			1142, // ER_TABLEACCESS_DENIED_ERROR
			1143, // ER_COLUMNACCESS_DENIED_ERROR
			1146: // ER_NO_SUCH_TABLE
			return true
		}
		return false
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		switch lite.Code() & 0xff {
		case 1: // SQLITE_ERROR: a missing table or column, among others
			msg := err.Error()
			return strings.Contains(msg, "no such table") || strings.Contains(msg, "no such column")
		case 3, 8, 23: // SQLITE_PERM, SQLITE_READONLY, SQLITE_AUTH
			return true
		}
	}
	return false
}

// myErrorType is the package path and name of go-sql-driver's error type,
// *mysql.MySQLError. sqlstore recognizes it by name, through reflection,
// so that a binary that uses another dialect does not link the MySQL
// driver for one type.
const (
	myErrorPkg  = "github.com/go-sql-driver/mysql"
	myErrorName = "MySQLError"
)

// myErrNumber returns the server's error number of the first MySQL error
// in err's tree (a *mysql.MySQLError of go-sql-driver/mysql).
func myErrNumber(err error) (uint16, bool) {
	for _, e := range errTree(err, 16) {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			continue
		}
		t := v.Elem().Type()
		if t.Name() != myErrorName || t.PkgPath() != myErrorPkg {
			continue
		}
		if f := v.Elem().FieldByName("Number"); f.IsValid() && f.Kind() == reflect.Uint16 {
			return uint16(f.Uint()), true
		}
	}
	return 0, false
}

// errTree returns err and the errors it wraps, depth first, at most max.
func errTree(err error, max int) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if e == nil || len(out) >= max {
			return
		}
		out = append(out, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}
