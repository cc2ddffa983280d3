package sqlstore

import (
	"context"
	"database/sql"
	"regexp"
	"sync"
)

// dbtx is what the generated queries run on (the DBTX of internal/db).
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// tableWord matches the default table name as a whole word of a query.
var tableWord = regexp.MustCompile(`\b` + DefaultTable + `\b`)

// rewrite returns db itself for the default table, else a dbtx that runs
// every query (the generated query texts, all of which name the default
// table) with table in place of the default name. Fixed texts are
// rewritten once and remembered; texts that vary (the IN lists of a batch)
// are rewritten each time.
func rewrite(db dbtx, table string) dbtx {
	if table == DefaultTable {
		return db
	}
	return &renamed{db: db, table: table}
}

// maxRenamed bounds the texts a renamed remembers.
const maxRenamed = 256

// renamed runs the generated queries on another table.
type renamed struct {
	db    dbtx
	table string
	seen  sync.Map // query → rewritten query
	n     int      // entries in seen, approximately
	mu    sync.Mutex
}

func (r *renamed) q(query string) string {
	if s, ok := r.seen.Load(query); ok {
		return s.(string)
	}
	s := tableWord.ReplaceAllLiteralString(query, r.table)
	r.mu.Lock()
	if r.n < maxRenamed {
		r.n++
		r.seen.Store(query, s)
	}
	r.mu.Unlock()
	return s
}

func (r *renamed) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.db.ExecContext(ctx, r.q(query), args...)
}

func (r *renamed) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return r.db.PrepareContext(ctx, r.q(query))
}

func (r *renamed) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.db.QueryContext(ctx, r.q(query), args...)
}

func (r *renamed) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return r.db.QueryRowContext(ctx, r.q(query), args...)
}
