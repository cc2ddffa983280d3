package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"

	mydb "github.com/simba-go/simba/internal/db/mysql"
)

// myAcquireReturning is the MariaDB (10.5+) form of mydb.Acquire: the same
// statement, which sqlc checks and generates, with a RETURNING clause that
// returns the row after the upsert in the same round trip (also when it
// changed nothing). It is written here because sqlc's MySQL parser has no
// RETURNING (sqlc-dev/sqlc#693, closed as won't fix; #3157). The clause
// names only columns of the row and the server's now.
var myAcquireReturning = mydb.Acquire +
	"RETURNING owner_id, token, ttl_at, transition_at, queue, " +
	"CAST((UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000) AS SIGNED) AS now_ms"

// myParseError is ER_PARSE_ERROR: MySQL has no RETURNING.
const myParseError = 1064

// Which acquire statement a MySQL server takes (myEngine.flavor).
const (
	flavorUnknown   int32 = iota
	flavorReturning       // MariaDB 10.5+: myAcquireReturning
	flavorPlain           // MySQL: mydb.Acquire, then Get after a loss
)

// myEngine runs the MySQL statements of queries/mysql. On MariaDB an
// acquire is one round trip (myAcquireReturning); on MySQL, which has no
// RETURNING, a grant is one round trip (the reply's insert id carries the
// token) and a loss two (the upsert, then Get). Renew and release are one
// conditional UPDATE each, judged by their affected-row count and insert
// id, never by RowsAffected of an upsert; on MariaDB the release of a
// grant made while nobody was queued is a plain UPDATE (ReleaseIdle), and
// Release only when that finds someone queued since. After such a
// release the next acquire of the lock by the same contender tries
// AcquireFree first, a plain UPDATE that grants a free lock nobody queues
// for, and runs Acquire only when that changes nothing: an uncontended
// cycle is two small statements. A contender that this Store queued tries
// AcquireHead first, a plain UPDATE that grants the free mutex to the
// head of its queue: a waiter woken by its doorbell is almost always the
// head, and its acquire is on the hand-off's critical path.
type myEngine struct {
	db     dbtx
	floor  *sync.Once // creates the token floor row before the first acquire
	table  string
	q      mydb.Queries
	flavor *atomic.Int32 // flavorUnknown until the first acquire
	// free: the (lock, contender) pairs whose last release ended the grant
	// with nobody queued (ReleaseIdle), so that the lock is likely free
	// for their next acquire. A hint only: the statement decides.
	free *waitSet
}

// maxFree bounds myEngine.free: beyond it, a lock's next acquire runs
// Acquire alone.
const maxFree = 4096

func (e myEngine) acquire(ctx context.Context, a acquireArgs) (row, error) {
	e.floor.Do(func() { _ = e.q.EnsureFloor(ctx, e.db) }) // best effort: only a gap lock is at stake
	p := mydb.AcquireParams{Mutex: []byte(a.mutex), OwnerID: []byte(a.owner), Wkey: a.key,
		TtlMs: a.ttlMs, TransitionMs: a.transitionMs}
	if a.waitMs > 0 { // the statement derives the expiry from ttl and transition
		p.Enqueue = 1
	}
	if e.free.take(a.mutex, a.owner) {
		res, err := e.q.AcquireFree(ctx, e.db, mydb.AcquireFreeParams{Mutex: p.Mutex, OwnerID: p.OwnerID, TtlMs: a.ttlMs, TransitionMs: a.transitionMs})
		if err != nil {
			return row{}, err
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			if tok, err := res.LastInsertId(); err == nil && tok > 0 {
				return grantRow(a, tok), nil
			}
		}
	}
	if a.queued {
		res, err := e.q.AcquireHead(ctx, e.db, mydb.AcquireHeadParams{TtlMs: a.ttlMs, TransitionMs: a.transitionMs,
			OwnerID: p.OwnerID, Mutex: p.Mutex, Wkey: a.key})
		if err != nil {
			return row{}, err
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			if tok, err := res.LastInsertId(); err == nil && tok > 0 {
				r := grantRow(a, tok)
				r.crowd = true // others may wait behind: its release hands over
				return r, nil
			}
		}
	}
	if e.flavor.Load() != flavorPlain {
		r, err := e.acquireReturning(ctx, p)
		if n, ok := myErrNumber(err); !ok || n != myParseError {
			if err == nil {
				e.flavor.Store(flavorReturning)
			}
			return r, err
		}
		e.flavor.Store(flavorPlain) // MySQL: nothing ran
	}
	res, err := e.q.Acquire(ctx, e.db, p)
	if err != nil {
		return row{}, err
	}
	if tok, err := res.LastInsertId(); err == nil && tok > 0 {
		return grantRow(a, tok), nil
	}
	r, err := e.get(ctx, a.mutex)
	if err == nil && !r.found {
		err = errNoRow
	}
	return r, err
}

// grantRow is the row of a grant (or extension) to a.owner with token
// that a statement reported by its insert id alone: at the server's now of
// the statement the grant had exactly ttl, then transition, left.
func grantRow(a acquireArgs, token int64) row {
	return row{found: true, owner: a.owner, token: token, ttlAt: a.ttlMs, transitionAt: a.ttlMs + a.transitionMs}
}

// acquireReturning runs myAcquireReturning through the generated
// mydb.Acquire, so that its parameters go in the order sqlc generated.
func (e myEngine) acquireReturning(ctx context.Context, p mydb.AcquireParams) (row, error) {
	rt := &returning{dbtx: e.db, query: myAcquireReturning}
	if _, err := e.q.Acquire(ctx, rt, p); err != nil {
		return row{}, err
	}
	return rt.row, nil
}

// returning is a dbtx whose ExecContext runs query instead (the statement
// it is given plus a RETURNING clause) and scans the row it returns.
type returning struct {
	dbtx
	query string
	row   row
}

func (t *returning) ExecContext(ctx context.Context, _ string, args ...any) (sql.Result, error) {
	var owner, queue []byte
	r := &t.row
	err := t.dbtx.QueryRowContext(ctx, t.query, args...).Scan(&owner, &r.token, &r.ttlAt, &r.transitionAt, &queue, &r.now)
	if err != nil {
		return nil, err
	}
	r.found, r.owner, r.queue = true, string(owner), queued(queue)
	return driver.RowsAffected(1), nil
}

func (e myEngine) renew(ctx context.Context, name, owner string, token, ttlMs, transitionMs int64) (row, bool, error) {
	res, err := e.q.Renew(ctx, e.db, mydb.RenewParams{Mutex: []byte(name), OwnerID: []byte(owner), Token: token, TtlMs: ttlMs, TransitionMs: transitionMs})
	if err != nil {
		return row{}, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return row{}, false, err
	}
	if n == 0 {
		cur, err := e.get(ctx, name)
		return cur, false, err
	}
	// Renewed: at the server's now of the UPDATE (the insert id carries
	// it, and whether others wait) the grant had exactly ttl, then
	// transition, left.
	id, _ := res.LastInsertId()
	now := id / 4
	return row{found: true, owner: owner, token: token, ttlAt: now + ttlMs, transitionAt: now + ttlMs + transitionMs, now: now, waited: id%4 == 2}, true, nil
}

// renewMany renews with one UPDATE per group of equal durations (one, from
// a lease.Manager) and reads the rows back to tell which it renewed.
func (e myEngine) renewMany(ctx context.Context, reqs []renewArgs) ([]renewed, error) {
	names := make([][]byte, len(reqs))
	for _, g := range byDurations(reqs) {
		p := mydb.RenewBatchParams{TtlMs: g[0].ttlMs, TransitionMs: g[0].transitionMs}
		for _, r := range g {
			p.Mutexes = append(p.Mutexes, []byte(r.mutex))
			p.Grants = append(p.Grants, sql.NullString{String: grantKey(r.mutex, r.owner, r.token), Valid: true})
		}
		if err := e.q.RenewBatch(ctx, e.db, p); err != nil {
			return nil, err
		}
	}
	for i, r := range reqs {
		names[i] = []byte(r.mutex)
	}
	rs, err := e.q.GetMany(ctx, e.db, names)
	if err != nil {
		return nil, err
	}
	rows := make(map[string]row, len(rs))
	for _, r := range rs {
		rows[string(r.Mutex)] = row{found: true, owner: string(r.OwnerID), token: r.Token, ttlAt: r.TtlAt,
			transitionAt: r.TransitionAt, now: r.NowMs, queue: queued(r.Queue)}
	}
	out := make([]renewed, len(reqs))
	for i, r := range reqs {
		out[i] = renewedRow(r, rows[r.mutex])
	}
	return out, nil
}

// Decisions of the release statement (its reply's insert id).
const myReleased = 1

func (e myEngine) release(ctx context.Context, a releaseArgs) (bool, error) {
	if a.on == nil && !a.crowded && a.token > 0 && e.flavor.Load() == flavorReturning {
		// Granted while nobody was queued: the plain update ends it unless
		// someone queued since (or it is not the current grant), which
		// Release then sorts out. Only on MariaDB: on MySQL a grant does
		// not read the queue back, so a crowded grant looks idle.
		n, err := e.q.ReleaseIdle(ctx, e.db, mydb.ReleaseIdleParams{Mutex: []byte(a.mutex), OwnerID: []byte(a.owner), Token: a.token, Wkey: a.key})
		if err == nil && n > 0 {
			e.free.add(a.mutex, a.owner)
		}
		if err != nil || n > 0 {
			return n > 0, err
		}
	}
	var res sql.Result
	var err error
	if a.on != nil {
		res, err = e.q.ReleaseBells(ctx, rewrite(a.on, e.table), mydb.ReleaseBellsParams{Mutex: []byte(a.mutex),
			OwnerID: []byte(a.owner), Token: a.token, Wkey: a.key, WindowMs: a.windowMs})
	} else {
		res, err = e.q.Release(ctx, e.db, mydb.ReleaseParams{Mutex: []byte(a.mutex), OwnerID: []byte(a.owner), Token: a.token,
			Wkey: a.key, WindowMs: a.windowMs})
	}
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	d, err := res.LastInsertId()
	return d == myReleased, err
}

func (e myEngine) get(ctx context.Context, name string) (row, error) {
	r, err := e.q.Get(ctx, e.db, []byte(name))
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, nil
	}
	if err != nil {
		return row{}, err
	}
	return row{found: true, owner: string(r.OwnerID), token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt,
		now: r.NowMs, queue: queued(r.Queue)}, nil
}

func (e myEngine) list(ctx context.Context) ([]listed, error) {
	rs, err := e.q.List(ctx, e.db)
	if err != nil {
		return nil, err
	}
	out := make([]listed, len(rs))
	for i, r := range rs {
		out[i] = listed{string(r.Mutex), row{found: true, owner: string(r.OwnerID), token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs}}
	}
	return out, nil
}

func (e myEngine) prune(ctx context.Context, retentionMs, maxRows int64) (int64, bool, error) {
	rs, err := e.q.Prunable(ctx, e.db, mydb.PrunableParams{RetentionMs: retentionMs, Limit: int32(min(maxRows, 1<<30))})
	if err != nil || len(rs) == 0 {
		return 0, false, err
	}
	var top int64
	names := make([][]byte, len(rs))
	for i, r := range rs {
		names[i], top = r.Mutex, max(top, r.Token)
	}
	res, err := e.q.RaiseFloor(ctx, e.db, top)
	if err != nil {
		return 0, false, err
	}
	floor, err := res.LastInsertId()
	if err != nil {
		return 0, false, err
	}
	n, err := e.q.Prune(ctx, e.db, mydb.PruneParams{Mutexes: names, RetentionMs: retentionMs, Floor: floor})
	return n, int64(len(rs)) == maxRows, err
}
