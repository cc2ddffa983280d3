package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	pgdb "github.com/simba-go/simba/internal/db/postgres"
	"github.com/simba-go/simba/lease"
)

// pgEngine runs the PostgreSQL statements of queries/postgres: every
// operation is one statement that returns the row with the server's now
// (an acquire that lost returns the owner's row in the same statement). A
// contender that this Store queued tries AcquireHead first, a plain UPDATE
// that grants the free mutex to the head of its queue: a waiter woken by a
// hand-off is almost always the head, and its acquire is on the
// hand-off's critical path.
type pgEngine struct {
	db      dbtx
	table   string
	q       pgdb.Queries
	channel string // of the NOTIFY sent by a release; "" with doorbells
}

func (e pgEngine) acquire(ctx context.Context, a acquireArgs) (row, error) {
	if a.queued {
		h, err := e.q.AcquireHead(ctx, e.db, pgdb.AcquireHeadParams{TtlMs: a.ttlMs, TransitionMs: a.transitionMs,
			OwnerID: a.owner, Mutex: a.mutex, Wkey: a.key})
		switch {
		case err == nil:
			// others may wait behind: its release hands over
			return row{found: true, owner: a.owner, token: h.Token, ttlAt: h.TtlAt, transitionAt: h.TransitionAt,
				now: h.NowMs, queue: queued(h.Queue), crowd: true}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return row{}, err
		}
	}
	r, err := e.q.Acquire(ctx, e.db, pgdb.AcquireParams{Mutex: a.mutex, OwnerID: a.owner, Wkey: a.key,
		TtlMs: a.ttlMs, TransitionMs: a.transitionMs, WaitMs: a.waitMs})
	if errors.Is(err, sql.ErrNoRows) {
		// Lost to a grant the statement's snapshot does not show: read it.
		return e.get(ctx, a.mutex)
	}
	if err != nil {
		return row{}, err
	}
	got := row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt,
		now: r.NowMs, queue: queued(r.Queue)}
	if got.owner != a.owner && got.remaining() == (lease.Record{}) {
		// Lost, yet the snapshot shows a free lock: a grant committed
		// after the snapshot holds it. Read who.
		return e.get(ctx, a.mutex)
	}
	return got, nil
}

func (e pgEngine) renew(ctx context.Context, name, owner string, token, ttlMs, transitionMs int64) (row, bool, error) {
	r, err := e.q.Renew(ctx, e.db, pgdb.RenewParams{Mutex: name, OwnerID: owner, Token: token, TtlMs: ttlMs, TransitionMs: transitionMs})
	if errors.Is(err, sql.ErrNoRows) {
		cur, err := e.get(ctx, name)
		return cur, false, err
	}
	if err != nil {
		return row{}, false, err
	}
	q := queued(r.Queue)
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs,
		queue: q, waited: q.live(r.NowMs)}, true, nil
}

// pgBatchItem is one element of RenewMany's JSON batch.
type pgBatchItem struct {
	Mutex        string `json:"mutex"`
	OwnerID      string `json:"owner_id"`
	Token        int64  `json:"token"`
	TtlMs        int64  `json:"ttl_ms"`
	TransitionMs int64  `json:"transition_ms"`
}

func (e pgEngine) renewMany(ctx context.Context, reqs []renewArgs) ([]renewed, error) {
	items := make([]pgBatchItem, len(reqs))
	for i, r := range reqs {
		items[i] = pgBatchItem{r.mutex, r.owner, r.token, r.ttlMs, r.transitionMs}
	}
	batch, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	rs, err := e.q.RenewMany(ctx, e.db, batch)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]renewed, len(rs))
	for _, r := range rs {
		byName[r.Mutex] = renewed{ok: r.Renewed, row: row{found: r.OwnerID != "" || r.Token != 0, owner: r.OwnerID,
			token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs, queue: queued(r.Queue)}}
	}
	return inOrder(reqs, byName)
}

func (e pgEngine) release(ctx context.Context, a releaseArgs) (bool, error) {
	db, letGo, channel := e.db, false, e.channel
	if !a.notify {
		channel = ""
	}
	switch {
	case a.on != nil:
		// On the connection that holds the holder's doorbell: the
		// statement lets it go once the grant has ended.
		db, letGo = rewrite(a.on, e.table), true
	case a.token > 0 && !a.crowded:
		// Nobody was queued at the grant, which did not go to a waiter:
		// most likely nobody is queued now, and ReleaseIdle, a plain
		// update, does what Release would. When it finds someone queued
		// (or the grant gone), the hand-off below decides.
		_, err := e.q.ReleaseIdle(ctx, e.db, pgdb.ReleaseIdleParams{Mutex: a.mutex, OwnerID: a.owner, Token: a.token})
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
	}
	if a.token > 0 {
		// A hand-off (or a queue that ReleaseIdle found): ReleaseHead, a
		// plain update, does what Release would unless the first
		// waiter's entry expired (or the grant is gone, or the holder is
		// queued too); then Release decides.
		_, err := e.q.ReleaseHead(ctx, db, pgdb.ReleaseHeadParams{Mutex: a.mutex, OwnerID: a.owner, Token: a.token,
			Wkey: a.key, WindowMs: a.windowMs, Channel: channel, LetGo: letGo})
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
	}
	r, err := e.q.Release(ctx, db, pgdb.ReleaseParams{Mutex: a.mutex, OwnerID: a.owner, Token: a.token,
		Wkey: a.key, WindowMs: a.windowMs, Channel: channel, LetGo: letGo})
	return r.Released > 0, err
}

func (e pgEngine) get(ctx context.Context, name string) (row, error) {
	r, err := e.q.Get(ctx, e.db, name)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, nil
	}
	if err != nil {
		return row{}, err
	}
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt,
		now: r.NowMs, queue: queued(r.Queue)}, nil
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

func (e pgEngine) prune(ctx context.Context, retentionMs, maxRows int64) (int64, bool, error) {
	n, err := e.q.Prune(ctx, e.db, pgdb.PruneParams{RetentionMs: retentionMs, MaxRows: maxRows})
	return n, n == maxRows, err
}
