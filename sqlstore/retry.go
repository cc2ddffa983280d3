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
func (s *Store) retry(ctx context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || attempt >= s.retries || !transient(err) || ctx.Err() != nil {
			return err
		}
		backoff := time.Duration(2<<attempt)*time.Millisecond + rand.N(2*time.Millisecond)
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
