package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	mydb "github.com/simba-go/simba/internal/db/mysql"
)

// myEngine runs the MySQL statements of queries/mysql. MySQL has no
// RETURNING: acquire is the conditional upsert followed by a read of the
// row; renew and release are one conditional UPDATE each, judged by their
// affected-row count (which version, bumped on every write, makes the same
// with and without clientFoundRows).
type myEngine struct {
	db dbtx
	q  mydb.Queries
}

func (e myEngine) acquire(ctx context.Context, mutex, owner string, ttlMs, transitionMs int64) (row, error) {
	_, err := e.q.Acquire(ctx, e.db, mydb.AcquireParams{Mutex: []byte(mutex), OwnerID: []byte(owner), TtlMs: ttlMs, TransitionMs: transitionMs})
	if err != nil {
		return row{}, err
	}
	// The row after the upsert says who holds the mutex: owner exactly when
	// this upsert granted or extended it (nobody can take a live grant in
	// between), whatever RowsAffected claims.
	r, err := e.get(ctx, mutex)
	if err == nil && !r.found {
		err = errNoRow
	}
	return r, err
}

func (e myEngine) renew(ctx context.Context, mutex, owner string, token, ttlMs, transitionMs int64) (row, bool, error) {
	n, err := e.q.Renew(ctx, e.db, mydb.RenewParams{Mutex: []byte(mutex), OwnerID: []byte(owner), Token: token, TtlMs: ttlMs, TransitionMs: transitionMs})
	if err != nil {
		return row{}, false, err
	}
	if n == 0 {
		cur, err := e.get(ctx, mutex)
		return cur, false, err
	}
	// Renewed: at the server's now of the UPDATE the grant had exactly ttl,
	// then transition, left.
	return row{found: true, owner: owner, token: token, ttlAt: ttlMs, transitionAt: ttlMs + transitionMs, now: 0}, true, nil
}

func (e myEngine) release(ctx context.Context, mutex, owner string, token int64) (bool, error) {
	n, err := e.q.Release(ctx, e.db, mydb.ReleaseParams{Mutex: []byte(mutex), OwnerID: []byte(owner), Token: token})
	return n > 0, err
}

func (e myEngine) get(ctx context.Context, mutex string) (row, error) {
	r, err := e.q.Get(ctx, e.db, []byte(mutex))
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, nil
	}
	if err != nil {
		return row{}, err
	}
	return row{found: true, owner: string(r.OwnerID), token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs}, nil
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
