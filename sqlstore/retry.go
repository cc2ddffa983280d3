package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"
)

// retry runs f until it succeeds, fails with an error that is not
// transient, or has been retried s.retries times, with a short jittered
// backoff between attempts. A transient error means the server rolled the
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
		var backoff time.Duration
		switch {
		case liteBusy(err) && time.Since(start) < liteBusyMax:
			backoff = min(time.Duration(1<<min(busy, 6))*time.Millisecond, 50*time.Millisecond) + rand.N(time.Millisecond)
			busy++
		case transient(err) && attempt < s.retries:
			backoff = time.Duration(2<<attempt)*time.Millisecond + rand.N(2*time.Millisecond)
			attempt++
		default:
			return err
		}
		t := time.NewTimer(backoff)
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

// SQLite primary result codes of a statement refused because another
// connection holds the lock: nothing was done.
const (
	liteBusyCode   = 5 // SQLITE_BUSY
	liteLockedCode = 6 // SQLITE_LOCKED
)

// liteBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED
// (with any extended code), from a driver whose errors have a Code method
// (modernc.org/sqlite, github.com/ncruces/go-sqlite3).
func liteBusy(err error) bool {
	var c interface{ Code() int }
	if !errors.As(err, &c) {
		return false
	}
	code := c.Code() & 0xff
	return code == liteBusyCode || code == liteLockedCode
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
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case myDeadlock, myLockWaitTimeout:
			return true
		}
	}
	return false
}
