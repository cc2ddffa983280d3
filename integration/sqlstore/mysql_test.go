package sqlstore_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
)

// mysqlRow is a simba_mutex row as stored.
type mysqlRow struct {
	owner                         string
	acquired, ttlAt, transitionAt int64
	token, version                int64
}

func readMySQLRow(t *testing.T, db *sql.DB, name string) mysqlRow {
	t.Helper()
	var r mysqlRow
	err := db.QueryRowContext(t.Context(),
		"SELECT owner_id, acquired_at, ttl_at, transition_at, token, version FROM simba_mutex WHERE mutex = ?", name).
		Scan(&r.owner, &r.acquired, &r.ttlAt, &r.transitionAt, &r.token, &r.version)
	if err != nil {
		t.Fatalf("read row %q: %v", name, err)
	}
	return r
}

// TestMySQLClientFoundRows: with clientFoundRows=true, RowsAffected counts
// matched rows, so an upsert that changed nothing reports 1 like an
// insert. The Store must not trust it: a loser is still told the owner,
// and stale renewals and releases still fail.
func TestMySQLClientFoundRows(t *testing.T) {
	d := mysqlDB
	ctx := t.Context()
	dsn := d.migrated(t)
	s := d.newStore(t, dsn+"?clientFoundRows=true")
	a, err := s.Acquire(ctx, "found/rows", "a", ttl, tr)
	if err != nil || !a.Held("a") {
		t.Fatalf("Acquire(a) = %+v, %v", a, err)
	}
	if r, err := s.Acquire(ctx, "found/rows", "b", ttl, tr); err != nil || r.OwnerID != "a" || r.Token != a.Token {
		t.Errorf("Acquire(b) while a holds = %+v, %v; want a's grant (RowsAffected trusted?)", r, err)
	}
	if _, err := s.Renew(ctx, "found/rows", "b", a.Token, ttl, tr); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Renew(b) = %v, want ErrNotHeld", err)
	}
	if err := s.Release(ctx, "found/rows", "b", a.Token); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Release(b) = %v, want ErrNotHeld", err)
	}
	if r, err := s.Renew(ctx, "found/rows", "a", a.Token, ttl, tr); err != nil || !r.Held("a") {
		t.Errorf("Renew(a) = %+v, %v", r, err)
	}
	if err := s.Release(ctx, "found/rows", "a", a.Token); err != nil {
		t.Errorf("Release(a) = %v", err)
	}
}

// TestMySQLAssignmentOrder: ON DUPLICATE KEY UPDATE assigns left to right
// and later assignments see earlier ones. Row by row: a losing upsert
// changes nothing, an extension keeps token and acquired_at, and a
// takeover writes the new owner's times and a greater token — each column
// judged by the row as it was, not as half-updated.
func TestMySQLAssignmentOrder(t *testing.T) {
	d := mysqlDB
	ctx := t.Context()
	dsn := d.migrated(t)
	s, db := d.newStore(t, dsn), d.open(t, dsn)
	const mx = "assign/order"
	ttlMs, trMs := ttl.Milliseconds(), tr.Milliseconds()

	if _, err := s.Acquire(ctx, mx, "a", ttl, tr); err != nil {
		t.Fatal(err)
	}
	first := readMySQLRow(t, db, mx)
	if first.owner != "a" || first.token != 1 || first.ttlAt-first.acquired != ttlMs || first.transitionAt-first.acquired != ttlMs+trMs {
		t.Fatalf("first grant row = %+v", first)
	}
	time.Sleep(20 * time.Millisecond)
	if r, err := s.Acquire(ctx, mx, "b", ttl, tr); err != nil || r.OwnerID != "a" {
		t.Fatalf("Acquire(b) = %+v, %v", r, err)
	}
	if lost := readMySQLRow(t, db, mx); lost != first {
		t.Errorf("a losing upsert changed the row:\n got %+v\nwant %+v", lost, first)
	}
	if _, err := s.Acquire(ctx, mx, "a", ttl, tr); err != nil {
		t.Fatal(err)
	}
	ext := readMySQLRow(t, db, mx)
	if ext.owner != "a" || ext.token != first.token || ext.acquired != first.acquired ||
		ext.transitionAt-ext.ttlAt != trMs || ext.ttlAt <= first.ttlAt || ext.version != first.version+1 {
		t.Errorf("extension row = %+v after %+v; want token and acquired_at kept, times moved", ext, first)
	}

	// Takeover of a lapsed grant.
	short := 30 * time.Millisecond
	if _, err := s.Acquire(ctx, mx+"/2", "a", short, short); err != nil {
		t.Fatal(err)
	}
	old := readMySQLRow(t, db, mx+"/2")
	time.Sleep(3 * short)
	if r, err := s.Acquire(ctx, mx+"/2", "b", ttl, tr); err != nil || !r.Held("b") {
		t.Fatalf("takeover Acquire(b) = %+v, %v", r, err)
	}
	took := readMySQLRow(t, db, mx+"/2")
	if took.owner != "b" || took.token != old.token+1 || took.acquired <= old.acquired ||
		took.ttlAt-took.acquired != ttlMs || took.transitionAt-took.acquired != ttlMs+trMs {
		t.Errorf("takeover row = %+v after %+v; want b's times from its acquired_at and token %d", took, old, old.token+1)
	}
}

// TestMySQLWithoutReturning: the acquire MySQL 8 runs (no RETURNING; the
// token of a grant comes back as the reply's insert id, a loss is read
// back) keeps the contract on MariaDB: grant, extension with the token
// kept, a loser told the owner and queued, and a hand-off by push.
func TestMySQLWithoutReturning(t *testing.T) {
	d := mysqlDB
	ctx := t.Context()
	dsn := d.migrated(t)
	a, b := d.newStore(t, dsn), d.newStore(t, dsn)
	mysqlWithoutReturning(a)
	mysqlWithoutReturning(b)
	r, err := a.Acquire(ctx, "plain/m", "a", ttl, tr)
	if err != nil || !r.Held("a") || r.Token != 1 || r.TTL != ttl || r.Transition != ttl+tr {
		t.Fatalf("Acquire(a) = %+v, %v; want a's first grant", r, err)
	}
	if again, err := a.Acquire(ctx, "plain/m", "a", ttl, tr); err != nil || !again.Held("a") || again.Token != 1 {
		t.Errorf("Acquire(a) again = %+v, %v; want the grant extended, token kept", again, err)
	}
	if lost, err := b.Acquire(ctx, "plain/m", "b", ttl, tr); err != nil || lost.OwnerID != "a" || lost.Token != 1 {
		t.Errorf("Acquire(b) = %+v, %v; want a's grant", lost, err)
	}
	if err := a.Release(ctx, "plain/m", "a", 1); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Acquire(ctx, "plain/m", "b", ttl, tr); err != nil || !r.Held("b") || r.Token != 2 {
		t.Errorf("Acquire(b) after the release = %+v, %v; want token 2", r, err)
	}
	took := handoff(t, newManager(t, a, "holder"), newManager(t, b, "waiter"), a, "plain/handoff", nil)
	if took > pushed {
		t.Errorf("hand-off took %v, want < %v", took, pushed)
	}
}
