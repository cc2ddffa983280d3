package sqlstore

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// prepared runs the statements it is given on db (a *sql.DB, or a
// *sql.Conn) as prepared statements: database/sql prepares each once per
// connection and keeps it, so the
// server parses the long statements of the MySQL and SQLite stores once
// per connection instead of once per call (with go-sql-driver/mysql, one
// round trip per execution whatever the DSN's interpolateParams). Other
// texts (those that vary: the IN lists of a batch) run as they are. A
// statement whose preparation fails runs as it is, and is not prepared
// again for prepareRetry: a server at its max_prepared_stmt_count, or a
// proxy without prepared statements, costs no failed prepare per call.
type prepared struct {
	db    dbtx
	fixed map[string]bool // the texts to prepare; never written after newPrepared

	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	failed map[string]time.Time // when a text's preparation last failed
}

// prepareRetry is how long a text whose preparation failed runs unprepared.
const prepareRetry = time.Minute

// newPrepared prepares queries (generated texts, on the default table) on
// table.
func newPrepared(db dbtx, table string, queries ...string) *prepared {
	p := &prepared{db: db, fixed: make(map[string]bool, len(queries)), stmts: map[string]*sql.Stmt{}}
	for _, q := range queries {
		if table != DefaultTable {
			q = tableWord.ReplaceAllLiteralString(q, table)
		}
		p.fixed[q] = true
	}
	return p
}

// stmt returns the prepared statement of query, or nil to run it as it is.
func (p *prepared) stmt(ctx context.Context, query string) *sql.Stmt {
	if !p.fixed[query] {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.stmts[query]; s != nil {
		return s
	}
	if t, ok := p.failed[query]; ok && time.Since(t) < prepareRetry {
		return nil
	}
	s, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		if ctx.Err() == nil { // the server's or the driver's refusal, not the caller's
			if p.failed == nil {
				p.failed = map[string]time.Time{}
			}
			p.failed[query] = time.Now()
		}
		return nil
	}
	delete(p.failed, query)
	p.stmts[query] = s
	return s
}

// warm prepares every text not prepared yet, so that their first call
// does not wait for a preparation.
func (p *prepared) warm(ctx context.Context) {
	for q := range p.fixed {
		p.stmt(ctx, q)
	}
}

func (p *prepared) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := p.stmt(ctx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return p.db.ExecContext(ctx, query, args...)
}

func (p *prepared) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.db.PrepareContext(ctx, query)
}

func (p *prepared) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := p.stmt(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return p.db.QueryContext(ctx, query, args...)
}

func (p *prepared) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := p.stmt(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

// close closes the prepared statements.
func (p *prepared) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for q, s := range p.stmts {
		s.Close()
		delete(p.stmts, q)
	}
}
