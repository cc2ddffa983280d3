package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	pgdb "github.com/simba-go/simba/internal/db/postgres"
)

// pgGrantRig is a PostgreSQL lock "wg" held by H (token 5) with the given
// queue (keys, oldest first, live for ever), a connection that holds H's
// bell (advisory lock pgBellH), and a connection for W's doorbell.
type pgGrantRig struct {
	db   *sql.DB
	h, w *sql.Conn
	wpid int64 // W's backend
}

const pgBellH, pgBellW = 7001, 7002

func newPGGrantRig(t *testing.T, queue ...string) pgGrantRig {
	t.Helper()
	ctx := t.Context()
	r := pgGrantRig{db: postgres.open(t, postgres.migrated(t))}
	r.h, r.w = grantRigConns(t, r.db, "$1", queue)
	if ok, err := pgdb.New().TakeBell(ctx, r.h, pgBellH); err != nil || !ok {
		t.Fatalf("TakeBell(H) = %v, %v", ok, err)
	}
	if err := r.w.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&r.wpid); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitGrant starts W's WaitGrant behind H's bell (ttl 5 s, transition
// 3 s, at most 30 s) and returns the function that waits for its reply.
func (r pgGrantRig) waitGrant() func() (pgdb.WaitGrantRow, error) {
	type reply struct {
		row pgdb.WaitGrantRow
		err error
	}
	done := make(chan reply, 1)
	go func() {
		row, err := pgdb.New().WaitGrant(context.Background(), r.w, pgdb.WaitGrantParams{Self: pgBellW, Pred: pgBellH,
			TimeoutMs: 30000, TtlMs: 5000, TransitionMs: 3000, OwnerID: "W", Mutex: "wg", Wkey: keyW})
		done <- reply{row, err}
	}()
	return func() (pgdb.WaitGrantRow, error) { got := <-done; return got.row, got.err }
}

// waiting waits until W's backend blocks on an advisory lock, for a
// minute at most.
func (r pgGrantRig) waiting(t *testing.T) {
	t.Helper()
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(time.Millisecond) {
		var n int
		if err := r.db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'advisory'", r.wpid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
	}
	t.Fatal("W's WaitGrant did not block on H's bell within a minute")
}

func (r pgGrantRig) row(t *testing.T) wgRow { return wgRowOf(t, r.db) }

// TestPGWaitGrantGrantsWhoComesFirstAfterItBegan: W's WaitGrant begins
// while H holds the lock and X heads the queue; X then takes the lock, and
// X's release (ReleaseHead, on the connection of the bell W waits on) lets
// the bell go. W was not first when its statement's snapshot was taken,
// yet the same statement grants it the lock (token 7), with the ttl and
// transition asked, from the row as the release committed it.
func TestPGWaitGrantGrantsWhoComesFirstAfterItBegan(t *testing.T) {
	r := newPGGrantRig(t, keyX, keyW)
	wait := r.waitGrant()
	r.waiting(t)
	if _, err := r.db.ExecContext(t.Context(), "UPDATE simba_mutex SET owner_id = 'X', token = 6, queue = substr(queue, 30) WHERE mutex = 'wg'"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgdb.New().ReleaseHead(t.Context(), r.h, pgdb.ReleaseHeadParams{Mutex: "wg", OwnerID: "X", Token: 6, Wkey: keyX,
		WindowMs: 1000, LetGo: true}); err != nil {
		t.Fatalf("ReleaseHead(X) = %v; want the grant ended", err)
	}
	got, err := wait()
	if err != nil || got.Rang != 1 || got.Token != 7 {
		t.Fatalf("WaitGrant after the release = %+v, %v; want rang 1, token 7", got, err)
	}
	w := r.row(t)
	if w.owner != "W" || w.token != 7 || w.queue != "" || w.ttlAt-w.acquired != 5000 || w.transitionAt-w.ttlAt != 3000 {
		t.Fatalf("row after the grant: %+v; want W with token 7, nobody queued, ttl 5000 and transition 3000 ms", w)
	}
}

// TestPGWaitGrantLeavesTheLockToTheHead: a waiter whose predecessor's bell
// rings but who does not head the queue gets no grant (token 0, rang 1),
// and the lock stays reserved for the head.
func TestPGWaitGrantLeavesTheLockToTheHead(t *testing.T) {
	r := newPGGrantRig(t, keyX, keyW)
	wait := r.waitGrant()
	r.waiting(t)
	if _, err := pgdb.New().ReleaseHead(t.Context(), r.h, pgdb.ReleaseHeadParams{Mutex: "wg", OwnerID: "H", Token: 5, Wkey: keyH,
		WindowMs: 1000, LetGo: true}); err != nil {
		t.Fatal(err)
	}
	got, err := wait()
	if err != nil || got.Rang != 1 || got.Token != 0 {
		t.Fatalf("WaitGrant behind the head = %+v, %v; want rang 1, no grant", got, err)
	}
	if w := r.row(t); w.owner != "" || w.token != 5 || w.queue != keyX+"9999999999999"+keyW+"9999999999999" {
		t.Fatalf("row: %+v; want it free, reserved for X, W still queued", w)
	}
}

// TestPGWaitGrantIsCancelled: a wait cancelled by pg_cancel_backend from
// another connection (how a ringer ends a wait that grants) fails with
// query_canceled, grants nothing even once the bell rings, and leaves its
// connection usable.
func TestPGWaitGrantIsCancelled(t *testing.T) {
	r := newPGGrantRig(t, keyW)
	wait := r.waitGrant()
	r.waiting(t)
	if _, err := r.db.ExecContext(t.Context(), "SELECT pg_cancel_backend($1)", r.wpid); err != nil {
		t.Fatal(err)
	}
	_, err := wait()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("cancelled WaitGrant: %v; want query_canceled (57014)", err)
	}
	var one int
	if err := r.w.QueryRowContext(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("W's connection after the cancel: %d, %v", one, err)
	}
	if _, err := pgdb.New().ReleaseHead(t.Context(), r.h, pgdb.ReleaseHeadParams{Mutex: "wg", OwnerID: "H", Token: 5, Wkey: keyH,
		WindowMs: 1000, LetGo: true}); err != nil {
		t.Fatal(err)
	}
	if w := r.row(t); w.owner != "" || w.token != 5 {
		t.Fatalf("row: %+v; want H's release, and no grant to W", w)
	}
}

// TestPGWaitGrantUnderRepeatableReadFails: with REPEATABLE READ as the
// session's default, the grant's UPDATE cannot take the row the release
// changed after the statement's snapshot: WaitGrant fails with
// serialization_failure (which the doorbell takes as a ring without a
// grant) and grants nothing, and the release stands.
func TestPGWaitGrantUnderRepeatableReadFails(t *testing.T) {
	r := newPGGrantRig(t, keyW)
	if _, err := r.w.ExecContext(t.Context(), "SET default_transaction_isolation = 'repeatable read'"); err != nil {
		t.Fatal(err)
	}
	wait := r.waitGrant()
	r.waiting(t)
	if _, err := pgdb.New().ReleaseHead(t.Context(), r.h, pgdb.ReleaseHeadParams{Mutex: "wg", OwnerID: "H", Token: 5, Wkey: keyH,
		WindowMs: 1000, LetGo: true}); err != nil {
		t.Fatal(err)
	}
	_, err := wait()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "40001" {
		t.Fatalf("WaitGrant under REPEATABLE READ after the release: %v; want serialization_failure (40001)", err)
	}
	if w := r.row(t); w.owner != "" || w.token != 5 || w.queue != keyW+"9999999999999" {
		t.Fatalf("row: %+v; want H's release, reserved for W, and no grant", w)
	}
}

// TestPGReleaseHeadLeavesAnExpiredHeadToRelease: ReleaseHead ends nothing
// when the first waiter's entry expired (a dead waiter), nor when the
// holder is queued itself: Release, which cuts the queue, decides then.
func TestPGReleaseHeadLeavesAnExpiredHeadToRelease(t *testing.T) {
	r := newPGGrantRig(t)
	for _, q := range []string{"dead00000000000a0000000000001" + keyW + "9999999999999", keyW + "9999999999999" + keyH + "9999999999999"} {
		if _, err := r.db.ExecContext(t.Context(), "UPDATE simba_mutex SET queue = $1 WHERE mutex = 'wg'", q); err != nil {
			t.Fatal(err)
		}
		_, err := pgdb.New().ReleaseHead(t.Context(), r.db, pgdb.ReleaseHeadParams{Mutex: "wg", OwnerID: "H", Token: 5, Wkey: keyH, WindowMs: 1000})
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("ReleaseHead with queue %q = %v; want no row", q, err)
		}
		if w := r.row(t); w.owner != "H" {
			t.Fatalf("row: %+v; want H's grant unchanged", w)
		}
	}
}
