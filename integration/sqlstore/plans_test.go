package sqlstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	pgdb "github.com/simba-go/simba/internal/db/postgres"
)

// TestPlansStayOnTheIndex (issue 18): PostgreSQL plans a prepared
// statement once per connection (after five custom plans, a generic one
// that it keeps until the table's statistics change), so a plan made
// while simba_mutex held a handful of rows is still the one a pooled
// connection runs once the table holds thousands. Every statement that
// reads one lock by name must then still find it through the primary key:
// a sequential scan there makes each call cost in proportion to the
// number of locks. Before, Acquire read the token floor and the lock's own
// row with `mutex IN (”, $1)`, which such a plan scans sequentially:
// scenario (b) of the benchmark, which grows the table by thousands of
// names a second on a fresh server, spent up to 1 ms per acquire there.
func TestPlansStayOnTheIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := postgres.migrated(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Statistics stay those of the new table (no autovacuum run between
	// the plans and the growth), and every execution takes the generic
	// plan, as a pooled connection does from its sixth on.
	for _, q := range []string{
		"ALTER TABLE simba_mutex SET (autovacuum_enabled = false)",
		"INSERT INTO simba_mutex (mutex) SELECT 'small/' || i FROM generate_series(1, 5) AS i",
		"SET plan_cache_mode = force_generic_plan",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	stmts := map[string]string{
		"Acquire": pgdb.Acquire, "AcquireHead": pgdb.AcquireHead, "Release": pgdb.Release, "ReleaseIdle": pgdb.ReleaseIdle,
		"Renew": pgdb.Renew, "Get": pgdb.Get,
	}
	args := map[string]string{}
	for name, sql := range stmts {
		sd, err := conn.Prepare(ctx, name, sql)
		if err != nil {
			t.Fatalf("prepare %s: %v", name, err)
		}
		// A literal per parameter, of its type; the lock is small/1.
		var lits []string
		for i, oid := range sd.ParamOIDs {
			dt, ok := conn.TypeMap().TypeForOID(oid)
			switch {
			case !ok:
				t.Fatalf("%s: parameter $%d has unknown type %d", name, i+1, oid)
			case dt.Name == "int8":
				lits = append(lits, "1")
			case dt.Name == "bool":
				lits = append(lits, "false")
			case i == 0:
				lits = append(lits, "'small/1'")
			default:
				lits = append(lits, "'abcdefghijklmnop'")
			}
		}
		args[name] = strings.Join(lits, ", ")
		// The generic plan is made at the first execution: now, on the
		// small table.
		if _, err := conn.Exec(ctx, fmt.Sprintf("EXECUTE %q(%s)", name, args[name]), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("EXECUTE %s: %v", name, err)
		}
	}

	if _, err := conn.Exec(ctx, "INSERT INTO simba_mutex (mutex) SELECT 'grown/' || i FROM generate_series(1, 20000) AS i"); err != nil {
		t.Fatal(err)
	}
	for name := range stmts {
		rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE %q(%s)", name, args[name]), pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", name, err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", name, err)
		}
		if text := strings.Join(plan, "\n"); strings.Contains(text, "Seq Scan on simba_mutex") {
			t.Errorf("%s, planned on a table of a few rows, scans simba_mutex sequentially:\n%s", name, text)
		}
	}
}
