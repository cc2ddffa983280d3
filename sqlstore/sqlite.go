package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	litedb "github.com/simba-go/simba/internal/db/sqlite"
)

// liteEngine runs the SQLite statements of queries/sqlite: every operation
// is one statement that returns the row with the clock's now (an acquire
// that lost without queueing reads the owner with a second one: a local
// read).
type liteEngine struct {
	db dbtx
	q  litedb.Queries
	wl *writeLock // nil: none
}

// write runs f holding the engine's write lock.
func (e liteEngine) write(ctx context.Context, f func() error) error {
	if err := e.wl.lock(ctx); err != nil {
		return err
	}
	defer e.wl.unlock()
	return f()
}

func (e liteEngine) acquire(ctx context.Context, a acquireArgs) (row, error) {
	var r litedb.AcquireRow
	err := e.write(ctx, func() (err error) {
		r, err = e.q.Acquire(ctx, e.db, litedb.AcquireParams{Mutex: a.mutex, OwnerID: a.owner, Wkey: a.key,
			TtlMs: a.ttlMs, TransitionMs: a.transitionMs, WaitMs: a.waitMs})
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return e.get(ctx, a.mutex) // held by someone else: report who
	}
	if err != nil {
		return row{}, err
	}
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt,
		now: r.Column6, queue: queued(r.Queue)}, nil
}

func (e liteEngine) renew(ctx context.Context, name, owner string, token, ttlMs, transitionMs int64) (row, bool, error) {
	var r litedb.RenewRow
	err := e.write(ctx, func() (err error) {
		r, err = e.q.Renew(ctx, e.db, litedb.RenewParams{Mutex: name, OwnerID: owner, Token: token, TtlMs: ttlMs, TransitionMs: transitionMs})
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		cur, err := e.get(ctx, name)
		return cur, false, err
	}
	if err != nil {
		return row{}, false, err
	}
	return row{found: true, owner: r.OwnerID, token: r.Token, ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.Column5}, true, nil
}

// grantKey is the grant_key column of a grant: lock, NUL, owner, NUL,
// token in decimal.
func grantKey(name, owner string, token int64) string {
	return name + "\x00" + owner + "\x00" + strconv.FormatInt(token, 10)
}

// renewMany renews with one UPDATE per group of equal durations (one, from
// a lease.Manager) and reads the grants it did not renew.
func (e liteEngine) renewMany(ctx context.Context, reqs []renewArgs) ([]renewed, error) {
	results := make(map[string]renewed, len(reqs))
	for _, g := range byDurations(reqs) {
		p := litedb.RenewBatchParams{TtlMs: g[0].ttlMs, TransitionMs: g[0].transitionMs}
		for _, r := range g {
			p.Mutexes = append(p.Mutexes, r.mutex)
			p.Grants = append(p.Grants, sql.NullString{String: grantKey(r.mutex, r.owner, r.token), Valid: true})
		}
		var rs []litedb.RenewBatchRow
		err := e.write(ctx, func() (err error) {
			rs, err = e.q.RenewBatch(ctx, e.db, p)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			results[r.Mutex] = renewed{ok: true, row: row{found: true, owner: r.OwnerID, token: r.Token,
				ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.Column6}}
		}
	}
	var missing []string
	for _, r := range reqs {
		if _, ok := results[r.mutex]; !ok {
			missing = append(missing, r.mutex)
		}
	}
	if len(missing) > 0 {
		rs, err := e.q.GetMany(ctx, e.db, missing)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			results[r.Mutex] = renewed{row: row{found: true, owner: r.OwnerID, token: r.Token,
				ttlAt: r.TtlAt, transitionAt: r.TransitionAt, now: r.NowMs}}
		}
		for _, m := range missing {
			if _, ok := results[m]; !ok {
				results[m] = renewed{} // unknown lock
			}
		}
	}
	return inOrder(reqs, results)
}

func (e liteEngine) release(ctx context.Context, a releaseArgs) (bool, error) {
	var released int64
	err := e.write(ctx, func() (err error) {
		released, err = e.q.Release(ctx, e.db, litedb.ReleaseParams{Mutex: a.mutex, OwnerID: a.owner, Token: a.token,
			Wkey: a.key, WindowMs: a.windowMs})
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // nothing to end or withdraw
	}
	return released == 1, err
}

func (e liteEngine) get(ctx context.Context, name string) (row, error) {
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

func (e liteEngine) prune(ctx context.Context, retentionMs, maxRows int64) (int64, bool, error) {
	var n int64
	err := e.write(ctx, func() error {
		floor, err := e.q.RaiseFloor(ctx, e.db, retentionMs)
		if err != nil {
			return err
		}
		n, err = e.q.Prune(ctx, e.db, litedb.PruneParams{RetentionMs: retentionMs, Floor: floor, MaxRows: maxRows})
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil // no row free for so long
	}
	return n, n == maxRows, err
}

// byDurations groups renewals by their ttl and transition, in order of
// first appearance.
func byDurations(reqs []renewArgs) [][]renewArgs {
	type durations struct{ ttl, tr int64 }
	idx := map[durations]int{}
	var groups [][]renewArgs
	for _, r := range reqs {
		d := durations{r.ttlMs, r.transitionMs}
		i, ok := idx[d]
		if !ok {
			i = len(groups)
			idx[d] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

// liteFile returns the path of db's main database file, "" for a
// database in memory or when it cannot be read.
func liteFile(db *sql.DB) string {
	rows, err := db.Query("PRAGMA database_list")
	if err != nil {
		return ""
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if rows.Scan(&seq, &name, &file) == nil && name == "main" {
			return file
		}
	}
	return ""
}
