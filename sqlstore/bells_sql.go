package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"time"

	mydb "github.com/simba-go/simba/internal/db/mysql"
	pgdb "github.com/simba-go/simba/internal/db/postgres"
)

// bellSQL runs one dialect's doorbell statements (queries/*/bells.sql) on
// a ringer's or the holder loop's connection. A bell is id's; pred is the
// key of whom a waiter waits behind.
type bellSQL interface {
	// wait takes id's bell unless have (the session holds it already),
	// then waits for pred's bell: mine reports whether the session holds
	// id's bell; rang is 1 when pred's session let it go, 0 when the wait
	// timed out, -1 when nobody held it.
	wait(ctx context.Context, conn *sql.Conn, id bellID, pred string, have bool) (mine bool, rang int64, err error)
	// take takes id's bell if nobody holds it; called only when the
	// session does not hold it.
	take(ctx context.Context, conn *sql.Conn, id bellID) (bool, error)
	// drop lets id's bell go: true when the session held it.
	drop(ctx context.Context, conn *sql.Conn, id bellID) (bool, error)
	// dropAll lets every bell of the session go.
	dropAll(ctx context.Context, conn *sql.Conn) error
	// lendable returns conn, a ringer's connection, as a Release runs on
	// it when lent (see lender): with the dialect's release statement
	// prepared where the server would otherwise parse it on every call.
	lendable(conn *sql.Conn) dbtx
}

// myBells are MySQL's bells: named locks (GET_LOCK), named by the
// statements from the database, the table (scope), the mutex and the key.
type myBells struct {
	q     mydb.Queries
	scope string
}

func (m myBells) wait(ctx context.Context, conn *sql.Conn, id bellID, pred string, _ bool) (bool, int64, error) {
	res, err := m.q.WaitBell(ctx, conn, mydb.WaitBellParams{Scope: m.scope, Mutex: []byte(id.mutex),
		Self: id.key, Pred: pred, TimeoutS: int64(bellWait.Seconds())})
	return res.Mine == 1, res.Rang, err
}

func (m myBells) take(ctx context.Context, conn *sql.Conn, id bellID) (bool, error) {
	n, err := m.q.TakeBell(ctx, conn, mydb.TakeBellParams{Scope: m.scope, Mutex: []byte(id.mutex), Self: id.key})
	return n == 1, err
}

func (m myBells) drop(ctx context.Context, conn *sql.Conn, id bellID) (bool, error) {
	n, err := m.q.DropBell(ctx, conn, mydb.DropBellParams{Scope: m.scope, Mutex: []byte(id.mutex), Self: id.key})
	return n == 1, err
}

func (m myBells) dropAll(ctx context.Context, conn *sql.Conn) error {
	_, err := m.q.DropBells(ctx, conn)
	return err
}

// lendable prepares ReleaseBells on conn: MariaDB parses the statement's
// text in about as long as it runs it (server time per call, prepared
// against as text: 189 against 357 µs on the benchmarks' server).
func (m myBells) lendable(conn *sql.Conn) dbtx {
	return newPrepared(conn, m.scope, mydb.ReleaseBells)
}

// pgBells are PostgreSQL's bells: session-level advisory locks on
// pgBellKey.
type pgBells struct {
	q     pgdb.Queries
	scope string
}

// pgBellKey is the advisory lock key of the bell of key for mutex in the
// table scope: the first 8 bytes of a SHA-256 of the three.
func pgBellKey(scope, mutex, key string) int64 {
	h := sha256.New()
	for _, s := range []string{scope, mutex, key} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

// pgBellWait is the longest wait of one WaitBell statement on PostgreSQL:
// its snapshot holds back VACUUM's horizon for as long. A waiter that
// waits longer runs it again, a statement every pgBellWait.
const pgBellWait = 10 * time.Second

func (p pgBells) wait(ctx context.Context, conn *sql.Conn, id bellID, pred string, have bool) (bool, int64, error) {
	res, err := p.q.WaitBell(ctx, conn, pgdb.WaitBellParams{Have: have,
		Self: pgBellKey(p.scope, id.mutex, id.key), Pred: pgBellKey(p.scope, id.mutex, pred),
		TimeoutMs: pgBellWait.Milliseconds()})
	var state interface{ SQLState() string }
	if err != nil && ctx.Err() == nil && errors.As(err, &state) {
		switch state.SQLState() {
		case "55P03", // lock_not_available: our lock_timeout
			"57014": // query_canceled: the session's statement_timeout
			// Timed out: wait again. Whether the statement took our bell
			// is unknown; taking it again is harmless, since a session
			// lets its bells go all at once (pg_advisory_unlock_all).
			return false, 0, nil
		}
	}
	return res.Mine, res.Rang, err
}

func (p pgBells) take(ctx context.Context, conn *sql.Conn, id bellID) (bool, error) {
	return p.q.TakeBell(ctx, conn, pgBellKey(p.scope, id.mutex, id.key))
}

func (p pgBells) drop(ctx context.Context, conn *sql.Conn, id bellID) (bool, error) {
	return p.q.DropBell(ctx, conn, pgBellKey(p.scope, id.mutex, id.key))
}

// lendable is conn itself: pgx's stdlib prepares and keeps a connection's
// statements on its own (with lib/pq the release is parsed on each call,
// as the Store's other statements are).
func (p pgBells) lendable(conn *sql.Conn) dbtx { return conn }

func (p pgBells) dropAll(ctx context.Context, conn *sql.Conn) error {
	return p.q.DropBells(ctx, conn)
}
