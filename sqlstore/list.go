package sqlstore

import (
	"context"
	"fmt"

	mydb "github.com/simba-go/simba/internal/db/mysql"
	pgdb "github.com/simba-go/simba/internal/db/postgres"
	litedb "github.com/simba-go/simba/internal/db/sqlite"
	"github.com/simba-go/simba/lease"
)

var _ lease.Lister = (*Store)(nil)

// ListPage implements [lease.Lister]: at most limit locks with a live
// grant, by name, after the lock named by cursor (the last name of the
// previous page; "" for the first), with remaining durations on the
// server's clock. Each page is one indexed range read of the table (the
// primary key), unlike [Store.List], which reads the whole table.
func (s *Store) ListPage(ctx context.Context, cursor string, limit int) ([]lease.NamedRecord, string, error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: sqlstore: list: limit %d is not positive", lease.ErrInvalidArgument, limit)
	}
	limit = min(limit, lease.MaxListPage)
	var ls []listed
	err := s.retry(ctx, func() (err error) {
		ls, err = s.listPage(ctx, cursor, limit)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("sqlstore: %s list: %w", s.dialect, err)
	}
	page := make([]lease.NamedRecord, 0, len(ls))
	for _, l := range ls {
		if rec := l.record(); rec.OwnerID != "" {
			page = append(page, lease.NamedRecord{Name: l.mutex, Record: rec})
		}
	}
	next := ""
	if len(ls) == limit {
		next = ls[len(ls)-1].mutex
	}
	return page, next, nil
}

// listPage reads one page of live grants of the Store's dialect.
func (s *Store) listPage(ctx context.Context, after string, limit int) ([]listed, error) {
	var out []listed
	add := func(name, owner string, token, ttlAt, transitionAt, now int64) {
		out = append(out, listed{name, row{found: true, owner: owner, token: token, ttlAt: ttlAt, transitionAt: transitionAt, now: now}})
	}
	switch e := s.eng.(type) {
	case pgEngine:
		rs, err := e.q.ListPage(ctx, e.db, pgdb.ListPageParams{AfterMutex: after, MaxRows: int64(limit)})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			add(r.Mutex, r.OwnerID, r.Token, r.TtlAt, r.TransitionAt, r.NowMs)
		}
	case myEngine:
		rs, err := e.q.ListPage(ctx, e.db, mydb.ListPageParams{AfterMutex: []byte(after), Limit: int32(limit)})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			add(string(r.Mutex), string(r.OwnerID), r.Token, r.TtlAt, r.TransitionAt, r.NowMs)
		}
	case liteEngine:
		rs, err := e.q.ListPage(ctx, e.db, litedb.ListPageParams{AfterMutex: after, MaxRows: int64(limit)})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			add(r.Mutex, r.OwnerID, r.Token, r.TtlAt, r.TransitionAt, r.NowMs)
		}
	default:
		return nil, fmt.Errorf("no paged listing for %T", s.eng)
	}
	return out, nil
}
