package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
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
	// timed out, -1 when nobody held it. With g (g.owner not empty) and
	// when the dialect can (grants), a bell that rang also grants the lock
	// to g.owner in the same statement when id's key heads its queue:
	// token is the grant's (0: none), and its expiries run from the
	// statement's start, no later than the caller's time before the call.
	wait(ctx context.Context, conn *sql.Conn, id bellID, pred string, have bool, g grantReq) (mine bool, rang, token int64, err error)
	// grants reports whether wait grants (and then must not be
	// interrupted by its context: see session).
	grants() bool
	// session returns the server's id of conn's session, by which another
	// connection interrupts a wait that grants (KILL QUERY).
	session(ctx context.Context, conn *sql.Conn) (int64, error)
	// interrupt ends the statement that session runs, if any, from
	// another connection of db, leaving the session usable.
	interrupt(ctx context.Context, db *sql.DB, session int64) error
	// release ends owner's grant with token on on, as Release does, for a
	// grant that wait made and nobody took.
	release(ctx context.Context, on dbtx, id bellID, owner string, token, windowMs int64) error
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
	// warm readies on, a ringer's connection as lendable returned it,
	// for the release that will run on it: a release on the critical
	// path of a hand-off must not wait for its statement's preparation.
	// Errors are the release's to meet.
	warm(ctx context.Context, on dbtx, id bellID)
}

// myBells are MySQL's bells: named locks (GET_LOCK), named by the
// statements from the database, the table (scope), the mutex and the key.
type myBells struct {
	q     mydb.Queries
	scope string
}

func (m myBells) wait(ctx context.Context, conn *sql.Conn, id bellID, pred string, _ bool, g grantReq) (bool, int64, int64, error) {
	if g.owner == "" {
		res, err := m.q.WaitBell(ctx, conn, mydb.WaitBellParams{Scope: m.scope, Mutex: []byte(id.mutex),
			Self: id.key, Pred: pred, TimeoutS: int64(bellWait.Seconds())})
		return res.Mine == 1, res.Rang, 0, err
	}
	res, err := m.q.WaitGrant(ctx, rewrite(conn, m.scope), mydb.WaitGrantParams{Scope: m.scope, Mutex: []byte(id.mutex),
		Self: id.key, Pred: pred, TimeoutS: int64(bellWait.Seconds()), TtlMs: g.ttlMs, TransitionMs: g.transitionMs,
		OwnerID: []byte(g.owner), Wkey: id.key})
	if err != nil {
		return false, 0, 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, 0, 0, err
	}
	id64, err := res.LastInsertId()
	if err != nil {
		return false, 0, 0, err
	}
	if n > 0 { // granted: the bell rang, and the statement had taken ours first
		return true, 1, id64, nil
	}
	// Not granted: the insert id is 10 + 3 × mine + rang + 1.
	c := id64 - 10
	if c < 0 || c > 5 {
		return false, 0, 0, fmt.Errorf("sqlstore: doorbell wait replied %d", id64)
	}
	return c/3 == 1, c%3 - 1, 0, nil
}

func (myBells) grants() bool { return true }

func (m myBells) release(ctx context.Context, on dbtx, id bellID, owner string, token, windowMs int64) error {
	_, err := m.q.Release(ctx, rewrite(on, m.scope), mydb.ReleaseParams{Mutex: []byte(id.mutex), OwnerID: []byte(owner), Token: token,
		Wkey: id.key, WindowMs: windowMs})
	return err
}

func (myBells) session(ctx context.Context, conn *sql.Conn) (int64, error) {
	var id int64
	err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
	return id, err
}

// interrupt sends KILL QUERY, which a session may send for its own user's
// sessions without any privilege: the statement ends with an error (1317,
// interrupted) or, if it had done its work, as it would have anyway; the
// session stays.
func (myBells) interrupt(ctx context.Context, db *sql.DB, session int64) error {
	_, err := db.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(session, 10))
	return err
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

// warm prepares the statements of on (lendable's).
func (myBells) warm(ctx context.Context, on dbtx, _ bellID) {
	if p, ok := on.(*prepared); ok {
		p.warm(ctx)
	}
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

func (pgBells) grants() bool { return true }

// session returns the process id of conn's backend, by which interrupt
// cancels its wait.
func (pgBells) session(ctx context.Context, conn *sql.Conn) (int64, error) {
	var pid int64
	err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid)
	return pid, err
}

// interrupt cancels the statement that the backend session runs with
// pg_cancel_backend, which a role may call for its own backends without
// any privilege: the statement fails with query_canceled (57014) and its
// transaction rolls back, or, if it had done its work, ends as it would
// have anyway (a cancel that comes while the backend waits for the next
// command is discarded); the session stays.
func (pgBells) interrupt(ctx context.Context, db *sql.DB, session int64) error {
	_, err := db.ExecContext(ctx, "SELECT pg_cancel_backend($1)", session)
	return err
}

func (p pgBells) release(ctx context.Context, on dbtx, id bellID, owner string, token, windowMs int64) error {
	_, err := p.q.Release(ctx, rewrite(on, p.scope), pgdb.ReleaseParams{Mutex: id.mutex, OwnerID: owner, Token: token,
		Wkey: id.key, WindowMs: windowMs})
	return err
}

func (p pgBells) wait(ctx context.Context, conn *sql.Conn, id bellID, pred string, have bool, g grantReq) (bool, int64, int64, error) {
	var (
		mine        bool
		rang, token int64
		err         error
	)
	self, predKey := pgBellKey(p.scope, id.mutex, id.key), pgBellKey(p.scope, id.mutex, pred)
	if g.owner == "" {
		var res pgdb.WaitBellRow
		res, err = p.q.WaitBell(ctx, conn, pgdb.WaitBellParams{Have: have, Self: self, Pred: predKey,
			TimeoutMs: pgBellWait.Milliseconds()})
		mine, rang = res.Mine, res.Rang
	} else {
		var res pgdb.WaitGrantRow
		res, err = p.q.WaitGrant(ctx, rewrite(conn, p.scope), pgdb.WaitGrantParams{Have: have, Self: self, Pred: predKey,
			TimeoutMs: pgBellWait.Milliseconds(), TtlMs: g.ttlMs, TransitionMs: g.transitionMs,
			OwnerID: g.owner, Mutex: id.mutex, Wkey: id.key})
		mine, rang, token = res.Mine, res.Rang, res.Token
	}
	var state interface{ SQLState() string }
	if err != nil && ctx.Err() == nil && errors.As(err, &state) {
		switch state.SQLState() {
		case "55P03", // lock_not_available: our lock_timeout
			"57014": // query_canceled: the session's statement_timeout, or interrupt
			// Timed out: wait again. Whether the statement took our bell
			// is unknown; taking it again is harmless, since a session
			// lets its bells go all at once (pg_advisory_unlock_all).
			// A statement that would have granted rolled back.
			return false, 0, 0, nil
		case "40001": // serialization_failure: WaitGrant under REPEATABLE READ
			// The bell rang; the contender's own acquire takes the lock.
			return false, 1, 0, nil
		}
	}
	return mine, rang, token, err
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

// warm runs ReleaseHead on on for a grant that cannot exist (token -1:
// tokens are never negative), which changes nothing: pgx's stdlib
// prepares a statement on a connection at its first use, one more round
// trip, and the server plans it then.
func (p pgBells) warm(ctx context.Context, on dbtx, id bellID) {
	_, _ = p.q.ReleaseHead(ctx, rewrite(on, p.scope), pgdb.ReleaseHeadParams{Mutex: id.mutex, Token: -1, Wkey: id.key,
		LetGo: true})
}

func (p pgBells) dropAll(ctx context.Context, conn *sql.Conn) error {
	return p.q.DropBells(ctx, conn)
}
