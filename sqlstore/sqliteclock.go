package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/lease"
)

// errClockOffset refuses WithSQLiteClockOffset on a server's dialect,
// whose clock is the server's to step.
var errClockOffset = fmt.Errorf("%w: sqlstore: WithSQLiteClockOffset is for SQLite only", lease.ErrInvalidArgument)

// liteNow is how every statement of queries/sqlite reads the clock.
const liteNow = "unixepoch('subsec')"

// shiftClock returns db, or, with an offset (WithSQLiteClockOffset), a
// dbtx that runs every query with the clock it reads shifted by offset().
func shiftClock(db dbtx, offset func() time.Duration) dbtx {
	if offset == nil {
		return db
	}
	return shifted{db: db, offset: offset}
}

// shifted runs the SQLite statements on a stepped clock (tests only).
type shifted struct {
	db     dbtx
	offset func() time.Duration
}

// q returns query reading the clock plus the offset, in seconds with
// microseconds (as unixepoch('subsec') counts); unchanged at offset 0.
func (s shifted) q(query string) string {
	d := s.offset()
	if d == 0 {
		return query
	}
	return strings.ReplaceAll(query, liteNow, "("+liteNow+" + "+strconv.FormatFloat(d.Seconds(), 'f', 6, 64)+")")
}

func (s shifted) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return s.db.ExecContext(ctx, s.q(query), args...)
}

func (s shifted) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return s.db.PrepareContext(ctx, s.q(query))
}

func (s shifted) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, s.q(query), args...)
}

func (s shifted) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return s.db.QueryRowContext(ctx, s.q(query), args...)
}
