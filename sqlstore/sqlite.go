package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	litedb "github.com/simba-go/simba/internal/db/sqlite"
)

// liteEngine runs the SQLite statements of queries/sqlite: every operation
// is one statement that returns the row with the clock's now (an acquire
// that lost reads the owner with a second one: a local read).
type liteEngine struct {
	db dbtx
	q  litedb.Queries
}

func (e liteEngine) acquire(ctx context.Context, mutex, owner string, ttlMs, transitionMs int64) (row, error) {
	r, err := e.q.Acquire(ctx, e.db, litedb.AcquireParams{Mutex: mutex, OwnerID: owner, TtlMs: ttlMs, TransitionMs: transitionMs})
	if errors.Is(err, sql.ErrNoRows) {
		return e.get(ctx, mutex) // held by someone else: report who
	}
	if err != nil {
		return row{}, err
	}
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.Column5}, nil
}

func (e liteEngine) renew(ctx context.Context, mutex, owner string, token, ttlMs, transitionMs int64) (row, bool, error) {
	r, err := e.q.Renew(ctx, e.db, litedb.RenewParams{Mutex: mutex, OwnerID: owner, Token: token, TtlMs: ttlMs, TransitionMs: transitionMs})
	if errors.Is(err, sql.ErrNoRows) {
		cur, err := e.get(ctx, mutex)
		return cur, false, err
	}
	if err != nil {
		return row{}, false, err
	}
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.Column5}, true, nil
}

func (e liteEngine) release(ctx context.Context, mutex, owner string, token int64) (bool, error) {
	n, err := e.q.Release(ctx, e.db, litedb.ReleaseParams{Mutex: mutex, OwnerID: owner, Token: token})
	return n > 0, err
}

func (e liteEngine) get(ctx context.Context, mutex string) (row, error) {
	r, err := e.q.Get(ctx, e.db, mutex)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, nil
	}
	if err != nil {
		return row{}, err
	}
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs}, nil
}

func (e liteEngine) list(ctx context.Context) ([]listed, error) {
	rs, err := e.q.List(ctx, e.db)
	if err != nil {
		return nil, err
	}
	out := make([]listed, len(rs))
	for i, r := range rs {
		out[i] = listed{r.Mutex, row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs}}
	}
	return out, nil
}
