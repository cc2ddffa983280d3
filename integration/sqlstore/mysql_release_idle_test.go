package sqlstore_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/sqlstore"
)

// generalLog counts the statements a MariaDB server runs by their sqlc
// name (the "-- name: X" line that opens each generated statement), from
// the server's general log (a table: mysql.general_log), so that prepared
// executions count as the server sees them. The server must be the test's
// own: the log is the whole server's.
type generalLog struct{ db *sql.DB }

func newGeneralLog(t *testing.T, dsn string) generalLog {
	t.Helper()
	db := mysqlDB.open(t, dsn)
	db.SetMaxOpenConns(1)
	for _, q := range []string{"SET GLOBAL log_output = 'TABLE'", "SET GLOBAL general_log = 1", "TRUNCATE TABLE mysql.general_log"} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return generalLog{db}
}

// loggedMySQL returns the DSN of a migrated database on a private MariaDB
// server of the test's, and that server's general log.
func loggedMySQL(t *testing.T) (string, generalLog) {
	t.Helper()
	dsn := testserver.PrivateMySQL(t).DSN()
	mysqlDB.migrate(t, dsn)
	return dsn, newGeneralLog(t, dsn)
}

// take returns the counts so far and starts again from zero.
func (g generalLog) take(t *testing.T) map[string]int {
	t.Helper()
	rows, err := g.db.QueryContext(t.Context(), "SELECT CAST(argument AS CHAR) FROM mysql.general_log WHERE command_type IN ('Execute', 'Query')")
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		if rest, ok := strings.CutPrefix(q, "-- name: "); ok {
			name, _, _ := strings.Cut(rest, " ")
			n[name]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if _, err := g.db.ExecContext(t.Context(), "TRUNCATE TABLE mysql.general_log"); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMySQLReleaseIdleStatement (issue 18): on MariaDB the release of a
// grant made while nobody was queued runs ReleaseIdle, a plain single-row
// update, instead of the Release statement (its queue arithmetic costs the
// server about as much CPU again), as on PostgreSQL: an uncontended cycle
// is two statements, Acquire and ReleaseIdle. A grant made while others
// were queued is released by Release alone (one statement per hand-off),
// and one made alone that finds a waiter queued since (or the expired
// entry a new row starts with) falls back to Release, which hands over.
// Before, every release ran Release.
func TestMySQLReleaseIdleStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, log := loggedMySQL(t)
	// Its releases reserve the lock for 30 s, not the default 1 s: the
	// last check must fall inside the window on a loaded machine.
	s := mysqlDB.newStore(t, dsn, sqlstore.WithHandoff(30*time.Second))

	// The first grant creates the row, which starts with the acquirer's
	// own entry, expired (see queries/mysql/mutex.sql): its release finds
	// the queue not empty and runs Release, which drops the entry.
	for i := range 21 {
		if i == 1 {
			log.take(t)
		}
		r, err := s.Acquire(ctx, "idle/solo", "a", ttl, tr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		if err := s.Release(ctx, "idle/solo", "a", r.Token); err != nil {
			t.Fatal(err)
		}
	}
	// (Acquire or, after an idle release, AcquireFree: see TestMySQLAcquireFree.)
	if got := log.take(t); got["ReleaseIdle"] != 20 || got["Release"] != 0 || got["Acquire"]+got["AcquireFree"] != 20 {
		t.Errorf("20 uncontended cycles ran Acquire %d times, AcquireFree %d times, ReleaseIdle %d times and Release %d times, want 20 acquires, 20 and 0 (all: %v)",
			got["Acquire"], got["AcquireFree"], got["ReleaseIdle"], got["Release"], got)
	}

	// A stale release: ReleaseIdle finds no grant, Release confirms.
	if err := s.Release(ctx, "idle/solo", "a", 1); err == nil {
		t.Error("a stale release succeeded")
	}
	log.take(t)

	// a holds; w1 and w2 queue behind it. a's grant saw nobody queued:
	// ReleaseIdle finds the queue, Release hands over to w1.
	const mx = "idle/crowded"
	r, err := s.Acquire(ctx, mx, "a", ttl, tr)
	if err != nil || !r.Held("a") {
		t.Fatalf("Acquire(a) = %+v, %v", r, err)
	}
	plain := mysqlDB.open(t, dsn)
	enqueue(t, mysqlDB.newStore(t, dsn), plain, mx, "w1", 1)
	enqueue(t, mysqlDB.newStore(t, dsn), plain, mx, "w2", 2)
	log.take(t)
	if err := s.Release(ctx, mx, "a", r.Token); err != nil {
		t.Fatal(err)
	}
	if got := log.take(t); got["ReleaseIdle"] != 1 || got["Release"] != 1 {
		t.Errorf("a release that found waiters queued since its grant ran ReleaseIdle %d times and Release %d times, want 1 and 1",
			got["ReleaseIdle"], got["Release"])
	}
	// w1's grant saw w2 queued: its release is Release alone.
	r, err = s.Acquire(ctx, mx, "w1", ttl, tr)
	if err != nil || !r.Held("w1") {
		t.Fatalf("Acquire(w1) after the hand-off = %+v, %v", r, err)
	}
	log.take(t)
	if err := s.Release(ctx, mx, "w1", r.Token); err != nil {
		t.Fatal(err)
	}
	if got := log.take(t); got["ReleaseIdle"] != 0 || got["Release"] != 1 {
		t.Errorf("the release of a grant made with others queued ran ReleaseIdle %d times and Release %d times, want 0 and 1",
			got["ReleaseIdle"], got["Release"])
	}
	if n := queueLen(t, plain, mx); n != 1 {
		t.Errorf("queue of %s holds %d entries after w1's release, want 1 (w2)", mx, n)
	}
	// The lock is reserved for w2: w1 and a are told so.
	if r, err := s.Acquire(ctx, mx, "a", ttl, tr); err != nil || r.OwnerID != "" || r.Transition <= 0 {
		t.Errorf("Acquire(a) during w2's hand-off window = %+v, %v; want an empty owner with a positive transition", r, err)
	}
}
