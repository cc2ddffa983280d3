package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	pgdb "github.com/simba-go/simba/internal/db/postgres"
)

// pgEngine runs the PostgreSQL statements of queries/postgres: every
// operation is one statement that returns the row with the server's now
// (an acquire that lost returns the owner's row in the same statement).
type pgEngine struct {
	db      dbtx
	q       pgdb.Queries
	channel string // of the NOTIFY sent by a release
}

func (e pgEngine) acquire(ctx context.Context, mutex, owner string, ttlMs, transitionMs int64) (row, error) {
	r, err := e.q.Acquire(ctx, e.db, pgdb.AcquireParams{Mutex: mutex, OwnerID: owner, TtlMs: ttlMs, TransitionMs: transitionMs})
	if errors.Is(err, sql.ErrNoRows) {
		// Lost to a grant the statement's snapshot does not show: read it.
		return e.get(ctx, mutex)
	}
	if err != nil {
		return row{}, err
	}
	got := row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs}
	if got.owner != owner && got.record().Owner == "" {
		// Lost, yet the snapshot shows a free mutex: a grant committed
		// after the snapshot holds it. Read who.
		return e.get(ctx, mutex)
	}
	return got, nil
}

func (e pgEngine) renew(ctx context.Context, mutex, owner string, token, ttlMs, transitionMs int64) (row, bool, error) {
	r, err := e.q.Renew(ctx, e.db, pgdb.RenewParams{Mutex: mutex, OwnerID: owner, Token: token, TtlMs: ttlMs, TransitionMs: transitionMs})
	if errors.Is(err, sql.ErrNoRows) {
		cur, err := e.get(ctx, mutex)
		return cur, false, err
	}
	if err != nil {
		return row{}, false, err
	}
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs}, true, nil
}

func (e pgEngine) release(ctx context.Context, mutex, owner string, token int64) (bool, error) {
	n, err := e.q.Release(ctx, e.db, pgdb.ReleaseParams{Channel: e.channel, Mutex: mutex, OwnerID: owner, Token: token})
	return n > 0, err
}

func (e pgEngine) get(ctx context.Context, mutex string) (row, error) {
	r, err := e.q.Get(ctx, e.db, mutex)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, nil
	}
	if err != nil {
		return row{}, err
	}
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs}, nil
}

func (e pgEngine) list(ctx context.Context) ([]listed, error) {
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
