package sqlstore_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/sqlstore"
)

// TestMySQLAcquireFree (issue 18): on MariaDB, a contender's acquire of a
// lock whose last release by the same Store ended its grant with nobody
// queued (ReleaseIdle) runs AcquireFree, a plain UPDATE, instead of the
// Acquire upsert: an uncontended cycle is AcquireFree + ReleaseIdle. The
// statement grants only what Acquire would: a lock held by another, or
// reserved for a queued waiter, falls back to Acquire, which refuses it;
// a lock whose last grant lapsed is granted with the next token.
func TestMySQLAcquireFree(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, log := loggedMySQL(t)
	a := mysqlDB.newStore(t, dsn)
	// b's releases reserve the lock for a waiter for 30 s, not the default
	// 1 s: a's attempt below must fall inside the window on a loaded machine.
	b := mysqlDB.newStore(t, dsn, sqlstore.WithHandoff(30*time.Second))
	plain := mysqlDB.open(t, dsn)
	const mx = "free/x"
	cycle := func() uint64 {
		t.Helper()
		r, err := a.Acquire(ctx, mx, "a", ttl, tr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Acquire(a) = %+v, %v", r, err)
		}
		if err := a.Release(ctx, mx, "a", r.Token); err != nil {
			t.Fatal(err)
		}
		return r.Token
	}
	cycle() // Acquire, then ReleaseIdle: the lock is free, nobody queued
	log.take(t)
	last := uint64(0)
	for i := range 10 {
		tok := cycle()
		if i > 0 && tok != last+1 {
			t.Errorf("cycle %d: token %d after %d, want one more", i, tok, last)
		}
		last = tok
	}
	if got := log.take(t); got["AcquireFree"] != 10 || got["Acquire"] != 0 || got["ReleaseIdle"] != 10 {
		t.Errorf("10 uncontended cycles ran AcquireFree %d, Acquire %d and ReleaseIdle %d times, want 10, 0 and 10 (all: %v)",
			got["AcquireFree"], got["Acquire"], got["ReleaseIdle"], got)
	}

	// Held by b since a's idle release: AcquireFree changes nothing, and
	// Acquire reports b's grant. The next attempt goes to Acquire alone.
	rb, err := b.Acquire(ctx, mx, "b", ttl, tr)
	if err != nil || !rb.Held("b") || rb.Token != last+1 {
		t.Fatalf("Acquire(b) = %+v, %v; want the lock with token %d", rb, err, last+1)
	}
	for _, want := range []int{1, 0} {
		log.take(t)
		if r, err := a.Acquire(ctx, mx, "a", ttl, tr); err != nil || r.OwnerID != "b" || r.Token != rb.Token {
			t.Errorf("Acquire(a) while b holds = %+v, %v; want b's grant", r, err)
		}
		if got := log.take(t); got["AcquireFree"] != want || got["Acquire"] != 1 {
			t.Errorf("an acquire of a lock b holds ran AcquireFree %d and Acquire %d times, want %d and 1", got["AcquireFree"], got["Acquire"], want)
		}
	}

	// Reserved for a waiter: b releases while w is queued. a's AcquireFree
	// (a released idle just before) must not take it.
	if err := b.Release(ctx, mx, "b", rb.Token); err != nil {
		t.Fatal(err)
	}
	last = cycle()
	rb, err = b.Acquire(ctx, mx, "b", ttl, tr)
	if err != nil || !rb.Held("b") {
		t.Fatalf("Acquire(b) = %+v, %v", rb, err)
	}
	enqueueGone(t, mysqlDB, dsn, plain, mx, "w", 1) // its doorbell would take the reservation at a time of its own
	if err := b.Release(ctx, mx, "b", rb.Token); err != nil {
		t.Fatal(err)
	}
	log.take(t)
	if r, err := a.Acquire(ctx, mx, "a", ttl, tr); err != nil || r.OwnerID != "" || r.Transition <= 0 {
		t.Errorf("Acquire(a) of a lock reserved for a waiter = %+v, %v; want an empty owner with a positive transition", r, err)
	}
	if got := log.take(t); got["AcquireFree"] != 1 || got["Acquire"] != 1 {
		t.Errorf("an acquire of a reserved lock ran AcquireFree %d and Acquire %d times, want 1 and 1", got["AcquireFree"], got["Acquire"])
	}

	// A grant that lapsed with nobody queued (set in place: b's, long
	// over): AcquireFree grants it to a with the next token.
	if _, err := plain.ExecContext(ctx, "UPDATE simba_mutex SET queue = '' WHERE mutex = ?", mx); err != nil {
		t.Fatal(err)
	}
	last = cycle()
	if _, err := plain.ExecContext(ctx, "UPDATE simba_mutex SET owner_id = 'b', token = token + 5, ttl_at = 1, transition_at = 1 WHERE mutex = ?", mx); err != nil {
		t.Fatal(err)
	}
	log.take(t)
	if r, err := a.Acquire(ctx, mx, "a", ttl, tr); err != nil || !r.Held("a") || r.Token != last+6 {
		t.Errorf("Acquire(a) of a lapsed grant = %+v, %v; want the lock with token %d", r, err, last+6)
	}
	if got := log.take(t); got["AcquireFree"] != 1 || got["Acquire"] != 0 {
		t.Errorf("an acquire of a lapsed grant ran AcquireFree %d and Acquire %d times, want 1 and 0", got["AcquireFree"], got["Acquire"])
	}
}
