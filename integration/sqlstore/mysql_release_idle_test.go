package sqlstore_test

import (
	"database/sql"
	"fmt"
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
// is two statements, Acquire and ReleaseIdle, the first cycle of a name
// included: a new row starts with its acquirer's own entry (see
// queries/mysql/mutex.sql), which ReleaseIdle takes away (before, the
// first release of every name ran ReleaseIdle and then Release: three
// statements a cycle over many names). A grant made while others were
// queued is released by Release alone (one statement per hand-off), and
// one made alone that finds a waiter queued since, even a waiter alone in
// the queue, falls back to Release, which hands over. Before, every
// release ran Release.
func TestMySQLReleaseIdleStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, log := loggedMySQL(t)
	// Its releases reserve the lock for 30 s, not the default 1 s: the
	// last check must fall inside the window on a loaded machine.
	s := mysqlDB.newStore(t, dsn, sqlstore.WithHandoff(30*time.Second))
	plain := mysqlDB.open(t, dsn)
	acquire := func(name, who string) uint64 {
		t.Helper()
		r, err := s.Acquire(ctx, name, who, ttl, tr)
		if err != nil || !r.Held(who) {
			t.Fatalf("Acquire(%s, %s) = %+v, %v", name, who, r, err)
		}
		return r.Token
	}
	// cycle takes name for a and releases it.
	cycle := func(name string) {
		t.Helper()
		if err := s.Release(ctx, name, "a", acquire(name, "a")); err != nil {
			t.Fatal(err)
		}
	}
	// release releases who's grant with token and returns the statements
	// it ran.
	release := func(name, who string, token uint64) map[string]int {
		t.Helper()
		log.take(t)
		if err := s.Release(ctx, name, who, token); err != nil {
			t.Fatal(err)
		}
		return log.take(t)
	}
	// reserved checks that name is held back for the first of the n
	// entries of its queue: a is told so.
	reserved := func(name string, n int) {
		t.Helper()
		if got := queueLen(t, plain, name); got != n {
			t.Errorf("queue of %s holds %d entries after the release, want %d", name, got, n)
		}
		if r, err := s.Acquire(ctx, name, "a", ttl, tr); err != nil || r.OwnerID != "" || r.Transition <= 0 {
			t.Errorf("Acquire(%s, a) during the hand-off window = %+v, %v; want an empty owner with a positive transition", name, r, err)
		}
	}

	// The first grant creates the row, which starts with the acquirer's
	// own entry (see queries/mysql/mutex.sql): its release drops it.
	log.take(t)
	for i := range 20 {
		cycle("idle/solo")
		if i == 0 {
			if n := queueLen(t, plain, "idle/solo"); n != 0 {
				t.Errorf("the queue of a new row holds %d entries after its first release, want 0", n)
			}
		}
	}
	// (Acquire or, after an idle release, AcquireFree: see TestMySQLAcquireFree.)
	if got := log.take(t); got["ReleaseIdle"] != 20 || got["Release"] != 0 || got["Acquire"]+got["AcquireFree"] != 20 {
		t.Errorf("20 uncontended cycles, a new row's first included, ran Acquire %d times, AcquireFree %d times, ReleaseIdle %d times and Release %d times, want 20 acquires, 20 and 0 (all: %v)",
			got["Acquire"], got["AcquireFree"], got["ReleaseIdle"], got["Release"], got)
	}
	// Fifty new names: a statement to take each and one to free it.
	for i := range 50 {
		name := fmt.Sprintf("idle/new/%d", i)
		cycle(name)
	}
	if got := log.take(t); got["Acquire"] != 50 || got["ReleaseIdle"] != 50 || got["Release"] != 0 {
		t.Errorf("50 cycles on new names ran Acquire %d, ReleaseIdle %d and Release %d times, want 50, 50 and 0 (all: %v)",
			got["Acquire"], got["ReleaseIdle"], got["Release"], got)
	}

	// One waiter alone in the queue (an entry of the length of the
	// holder's own, but not its key): ReleaseIdle leaves it to Release,
	// which reserves the lock for that waiter.
	const one = "idle/one"
	cycle(one) // a new row: the next grant finds the queue empty
	tok := acquire(one, "a")
	enqueueGone(t, mysqlDB, dsn, plain, one, "w1", 1)
	if got := release(one, "a", tok); got["ReleaseIdle"] != 1 || got["Release"] != 1 {
		t.Errorf("a release that found one waiter queued ran ReleaseIdle %d times and Release %d times, want 1 and 1",
			got["ReleaseIdle"], got["Release"])
	}
	reserved(one, 1)

	// A stale release: ReleaseIdle finds no grant, Release confirms.
	if err := s.Release(ctx, "idle/solo", "a", 1); err == nil {
		t.Error("a stale release succeeded")
	}
	log.take(t)

	// a holds; w1 and w2 queue behind it. a's grant saw nobody queued:
	// ReleaseIdle finds the queue, Release hands over to w1.
	const mx = "idle/crowded"
	tok = acquire(mx, "a")
	enqueueGone(t, mysqlDB, dsn, plain, mx, "w1", 1)
	enqueueGone(t, mysqlDB, dsn, plain, mx, "w2", 2)
	if got := release(mx, "a", tok); got["ReleaseIdle"] != 1 || got["Release"] != 1 {
		t.Errorf("a release that found waiters queued since its grant ran ReleaseIdle %d times and Release %d times, want 1 and 1",
			got["ReleaseIdle"], got["Release"])
	}
	// w1's grant saw w2 queued: its release is Release alone, and the
	// lock is reserved for w2.
	if got := release(mx, "w1", acquire(mx, "w1")); got["ReleaseIdle"] != 0 || got["Release"] != 1 {
		t.Errorf("the release of a grant made with others queued ran ReleaseIdle %d times and Release %d times, want 0 and 1",
			got["ReleaseIdle"], got["Release"])
	}
	reserved(mx, 1)
}
