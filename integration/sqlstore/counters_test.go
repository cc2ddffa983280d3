package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/schema"
)

// serverOps returns a function that reads how many statements the server
// of dsn has run, as the benchmark of bench/ counts them: PostgreSQL
// transactions of the test's database (pg_stat_database, published by
// pg_stat_force_next_flush), MariaDB's Questions, pings
// (Com_admin_commands) and server-side prepares (Com_stmt_prepare) (the
// server's, so only meaningful while nothing else uses it). The reader's
// own statements are not counted. SQLite has no server: nil.
func serverOps(tb testing.TB, d dialect, dsn string) func() int64 {
	tb.Helper()
	if d.server == nil {
		return nil
	}
	db := d.open(tb, dsn)
	db.SetMaxOpenConns(1)
	var own int64
	return func() int64 {
		tb.Helper()
		ctx := context.Background()
		var n int64
		var err error
		switch d.schema {
		case schema.Postgres:
			// A busy backend publishes its counters at most once a second;
			// one that goes idle less than a second after its last publish
			// waits up to 10 s (PGSTAT_IDLE_INTERVAL) or for its next
			// statement, and one that ends publishes as it exits. So the
			// count is complete only once the backends of the counted work
			// have ended or stayed busy: runHandoffs closes them first.
			time.Sleep(1100 * time.Millisecond)
			err = db.QueryRowContext(ctx, `SELECT (SELECT sum(xact_commit + xact_rollback)::bigint
				FROM pg_stat_database WHERE datname = current_database()), pg_stat_force_next_flush() IS NULL`,
				pgx.QueryExecModeSimpleProtocol).Scan(&n, new(bool))
		default:
			err = db.QueryRowContext(ctx, `SELECT CAST(SUM(VARIABLE_VALUE) AS SIGNED) FROM information_schema.GLOBAL_STATUS
				WHERE VARIABLE_NAME IN ('QUESTIONS', 'COM_ADMIN_COMMANDS', 'COM_STMT_PREPARE')`).Scan(&n)
		}
		if err != nil {
			tb.Fatalf("server counters: %v", err)
		}
		n -= own
		own++
		return n
	}
}
