package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// queueLen reads how many live entries (not yet expired) the wait queue
// of lock holds: 29 characters each, a key and an expiry in epoch ms.
func queueLen(t *testing.T, db *sql.DB, name string) int {
	t.Helper()
	q := rawQueue(t, db, name)
	now := time.Now().UnixMilli() // the servers run on this host
	n := 0
	for i := 0; i+29 <= len(q); i += 29 {
		if exp, err := strconv.ParseInt(string(q[i+16:i+29]), 10, 64); err == nil && exp > now {
			n++
		}
	}
	return n
}

// awaitQueue waits until lock's queue holds n entries.
func awaitQueue(t *testing.T, db *sql.DB, name string, n int) {
	t.Helper()
	for deadline := time.Now().Add(i5Bound); queueLen(t, db, name) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("the queue of %q never held %d entries (%d)", name, n, queueLen(t, db, name))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// enqueue makes contender, through store, a waiter of lock that is held
// by another: it watches the lock and tries until it is in the queue (a
// Store queues a waiter only once it can hear releases).
func enqueue(t *testing.T, store *sqlstore.Store, db *sql.DB, name, contender string, n int) {
	t.Helper()
	enqueueFor(t, store, db, name, contender, n, 10*time.Second, 6*time.Second)
}

// enqueueGone is enqueue through a Store of its own that is closed once
// contender is queued: the entry stays in the queue until it expires, and
// nothing of contender's takes a reservation made for it (a watching
// Store's doorbell would, at a time of its own), so a test can look at the
// reservation itself.
func enqueueGone(t *testing.T, d dialect, dsn string, db *sql.DB, name, contender string, n int) {
	t.Helper()
	s := d.newStore(t, dsn)
	enqueue(t, s, db, name, contender, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := queueLen(t, db, name); got != n {
		t.Fatalf("closing %s's Store left %d entries in the queue of %q, want %d", contender, got, name, n)
	}
}

// enqueueFor is enqueue with the waiter's ttl and transition.
func enqueueFor(t *testing.T, store *sqlstore.Store, db *sql.DB, name, contender string, n int, ttl, transition time.Duration) {
	t.Helper()
	if _, err := store.Watch(t.Context(), name, contender); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(i5Bound); ; {
		if r, err := store.Acquire(t.Context(), name, contender, ttl, transition); err != nil || r.OwnerID == contender {
			t.Fatalf("Acquire(%s) = %+v, %v; want a loss", contender, r, err)
		}
		if queueLen(t, db, name) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never joined the queue of %q", contender, name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReleaseHoldsBackForFirstWaiter (issue 18): a release that leaves a
// waiter queued reserves the lock for it for the hand-off window: the
// releaser itself (or anyone else) trying at once gets an empty Owner and
// a positive Transition, and the waiter gets the lock. Today's code lets
// the releaser take it straight back.
func TestReleaseHoldsBackForFirstWaiter(t *testing.T) {
	forPush(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		a, b, c := d.newStore(t, dsn), d.newStore(t, dsn), d.newStore(t, dsn)
		db := d.open(t, dsn)
		const mx = "fair/hold-back"
		held, err := a.Acquire(ctx, mx, "a", pushTTL, pushTr)
		if err != nil || !held.Held("a") {
			t.Fatalf("Acquire(a) = %+v, %v", held, err)
		}
		got := make(chan *lease.Lease, 1)
		go func() {
			l, err := newManager(t, b, "waiter").Acquire(ctx, mx)
			if err != nil {
				t.Errorf("waiter Acquire: %v", err)
			}
			got <- l
		}()
		awaitQueue(t, db, mx, 1)
		if err := a.Release(ctx, mx, "a", held.Token); err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			store *sqlstore.Store
			id    string
		}{{a, "a"}, {c, "c"}} {
			r, err := s.store.Acquire(ctx, mx, s.id, pushTTL, pushTr)
			if err != nil || r.OwnerID == s.id || r.Transition <= 0 {
				if r.OwnerID != "waiter" { // the waiter may be that quick
					t.Errorf("Acquire(%s) right after the release = %+v, %v; want the lock held back (empty Owner, positive Transition)", s.id, r, err)
				}
			}
		}
		select {
		case l := <-got:
			if l == nil || l.Token() <= held.Token {
				t.Fatalf("waiter's lease %v, want a token above %d", l, held.Token)
			}
		case <-time.After(i5Bound):
			t.Fatal("the waiter never got the lock reserved for it")
		}
	})
}

// TestReleaseDropsExpiredHeads (issue 18): entries at the head of the
// queue whose waiters stopped renewing them (dead processes) leave it at
// the next release, and the lock is held back for the first live waiter
// behind them, or, with none, is free at once. On PostgreSQL every expired
// entry leaves; the test asks what every dialect does (up to three at the
// head).
func TestReleaseDropsExpiredHeads(t *testing.T) {
	forPush(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		db := d.open(t, dsn)
		// A window far longer than a stall of the machine between the
		// release and the Get, which must still find the lock held back.
		s := d.newStore(t, dsn, sqlstore.WithHandoff(time.Minute))
		expired := "dead00000000000a0000000000001" + "dead00000000000b0000000000002"
		live := fmt.Sprintf("live00000000000c%013d", time.Now().Add(time.Minute).UnixMilli())
		for _, c := range []struct {
			name, queue, left string
			heldBack          bool
		}{
			{"fair/expired-only", expired, "", false},
			{"fair/expired-then-live", expired + live, live, true},
		} {
			held, err := s.Acquire(ctx, c.name, "a", pushTTL, pushTr)
			if err != nil || !held.Held("a") {
				t.Fatalf("Acquire(a) = %+v, %v", held, err)
			}
			setQueue(t, db, c.name, c.queue)
			if err := s.Release(ctx, c.name, "a", held.Token); err != nil {
				t.Fatal(err)
			}
			if q := rawQueue(t, db, c.name); q != c.left {
				t.Errorf("%s: queue after the release %q, want %q", c.name, q, c.left)
			}
			r, err := s.Get(ctx, c.name)
			if err != nil || r.OwnerID != "" || (r.Transition > 0) != c.heldBack {
				t.Errorf("%s: Get after the release = %+v, %v; want it free, held back for a waiter: %v", c.name, r, err, c.heldBack)
			}
		}
	})
}

// rawQueue reads the wait queue of lock as it is stored.
func rawQueue(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var q []byte
	err := db.QueryRowContext(t.Context(), "SELECT queue FROM simba_mutex WHERE mutex = ?", name).Scan(&q)
	if err != nil {
		err = db.QueryRowContext(t.Context(), "SELECT queue FROM simba_mutex WHERE mutex = $1", name).Scan(&q)
	}
	if err != nil {
		t.Fatalf("read the queue of %q: %v", name, err)
	}
	return string(q)
}

// setQueue overwrites the wait queue of lock.
func setQueue(t *testing.T, db *sql.DB, name, queue string) {
	t.Helper()
	_, err := db.ExecContext(t.Context(), "UPDATE simba_mutex SET queue = ? WHERE mutex = ?", queue, name)
	if err != nil {
		_, err = db.ExecContext(t.Context(), "UPDATE simba_mutex SET queue = $1 WHERE mutex = $2", queue, name)
	}
	if err != nil {
		t.Fatalf("write the queue of %q: %v", name, err)
	}
}

// TestReservedLockRefusesTheSecondWaiter: a lock held back for the first
// waiter is not granted to the second, queued too, whose Store knows it
// queued it (on MySQL and PostgreSQL such a Store tries AcquireHead
// first, which must grant the head of the queue alone); the first then
// gets it, with a greater token.
func TestReservedLockRefusesTheSecondWaiter(t *testing.T) {
	forPush(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		// A 30 s window: the checks below fall inside it on a loaded machine.
		h := d.newStore(t, dsn, sqlstore.WithHandoff(30*time.Second))
		w1, w2 := d.newStore(t, dsn), d.newStore(t, dsn)
		db := d.open(t, dsn)
		const mx = "fair/second"
		held, err := h.Acquire(ctx, mx, "h", pushTTL, pushTr)
		if err != nil || !held.Held("h") {
			t.Fatalf("Acquire(h) = %+v, %v", held, err)
		}
		enqueue(t, w1, db, mx, "w1", 1)
		enqueue(t, w2, db, mx, "w2", 2)
		if err := h.Release(ctx, mx, "h", held.Token); err != nil {
			t.Fatal(err)
		}
		if r, err := w2.Acquire(ctx, mx, "w2", pushTTL, pushTr); err != nil || r.OwnerID != "" || r.Transition <= 0 {
			t.Errorf("Acquire(w2), second in the queue, of the lock held back for w1 = %+v, %v; want an empty owner with a positive transition", r, err)
		}
		if r, err := w1.Acquire(ctx, mx, "w1", pushTTL, pushTr); err != nil || !r.Held("w1") || r.Token <= held.Token {
			t.Errorf("Acquire(w1), first in the queue = %+v, %v; want the lock with a token above %d", r, err, held.Token)
		}
	})
}

// TestWaitersServedInOrder: waiters that queue one after another get the
// lock in the order they came.
func TestWaitersServedInOrder(t *testing.T) {
	forPush(t, func(t *testing.T, d dialect) {
		ctx, cancel := context.WithTimeout(t.Context(), 4*i5Bound)
		defer cancel()
		dsn := d.migrated(t)
		db := d.open(t, dsn)
		const mx = "fair/order"
		holder := newManager(t, d.newStore(t, dsn), "holder")
		l, err := holder.Acquire(ctx, mx)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range 4 {
			m := newManager(t, d.newStore(t, dsn), fmt.Sprint("w", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.Acquire(ctx, mx)
				if err != nil {
					t.Errorf("w%d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				l.Release(ctx)
			}()
			awaitQueue(t, db, mx, i+1) // w0 is first, then w1, ...
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for i, w := range order {
			if w != i {
				t.Fatalf("waiters got the lock in the order %v, want 0 1 2 3", order)
			}
		}
	})
}

// TestDeadHeadDoesNotStall (issue 14, S17): the first waiter of the queue
// died (its entry stays until it expires); a release reserves the lock
// for it, and the next live waiter still gets the lock within about the
// hand-off window, not at the old owner's transition end.
func TestDeadHeadDoesNotStall(t *testing.T) {
	forPush(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		db := d.open(t, dsn)
		const mx = "fair/dead-head"
		const window = 300 * time.Millisecond
		a := d.newStore(t, dsn, sqlstore.WithHandoff(window))
		held, err := a.Acquire(ctx, mx, "a", 10*time.Second, 6*time.Second)
		if err != nil || !held.Held("a") {
			t.Fatalf("Acquire(a) = %+v, %v", held, err)
		}
		// The dead waiter: queued through a Watch, then its Store goes
		// away without withdrawing, as a killed process would.
		dead := d.newStore(t, dsn)
		enqueue(t, dead, db, mx, "dead", 1)
		dead.Close()
		got := make(chan time.Time, 1)
		go func() {
			m := newManager(t, d.newStore(t, dsn, sqlstore.WithHandoff(window)), "live")
			l, err := m.Acquire(ctx, mx)
			if err != nil {
				t.Errorf("live Acquire: %v", err)
			}
			got <- time.Now()
			l.Release(ctx)
		}()
		awaitQueue(t, db, mx, 2)
		released := time.Now()
		if err := a.Release(ctx, mx, "a", held.Token); err != nil {
			t.Fatal(err)
		}
		// At most the window, a poll's late jitter (1 s) and a probe (1 s):
		// well under the 16 s the old owner's grant had left.
		const bound = window + 3*time.Second
		select {
		case at := <-got:
			t.Logf("%s: the live waiter got the lock %v after the release", d.name, at.Sub(released))
			if took := at.Sub(released); took > bound {
				t.Errorf("the live waiter waited %v behind a dead head, want under %v", took, bound)
			}
		case <-time.After(4 * i5Bound):
			t.Fatal("the live waiter never got the lock")
		}
	})
}

// TestDeepWaiterPollsAfterAGrant (issue 18): while a released lock is
// held back for its first waiter, the second one is told the rest of the
// window (it polls then, should the first not come), and a waiter behind
// them the window plus a grant as long as the one it asks: it cannot have
// the lock sooner, and its Manager polled at the window's end before (an
// Acquire per waiter per hand-off at K = 32).
func TestDeepWaiterPollsAfterAGrant(t *testing.T) {
	forPush(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		const window = 5 * time.Second // longer than the calls below take under load
		a := d.newStore(t, dsn, sqlstore.WithHandoff(window))
		db := d.open(t, dsn)
		const mx = "fair/deep"
		held, err := a.Acquire(ctx, mx, "a", pushTTL, pushTr)
		if err != nil || !held.Held("a") {
			t.Fatalf("Acquire(a) = %+v, %v", held, err)
		}
		ids := []string{"w1", "w2", "w3"}
		stores := make([]*sqlstore.Store, len(ids))
		for i, id := range ids {
			stores[i] = d.newStore(t, dsn)
			enqueue(t, stores[i], db, mx, id, i+1)
		}
		if err := a.Release(ctx, mx, "a", held.Token); err != nil {
			t.Fatal(err)
		}
		for i := 2; i >= 1; i-- { // w1 is woken, but nobody acquires for it
			r, err := stores[i].Acquire(ctx, mx, ids[i], pushTTL, pushTr)
			switch {
			case err != nil || r.OwnerID != "" || r.Transition <= 0:
				t.Fatalf("Acquire(%s) in the window = %+v, %v; want the lock held back", ids[i], r, err)
			case i == 1 && r.Transition > window:
				t.Errorf("second waiter told %v, want at most the window %v", r.Transition, window)
			case i == 2 && r.Transition <= window:
				t.Errorf("third waiter told %v, want the rest of the window %v plus a grant of %v", r.Transition, window, pushTTL+pushTr)
			}
		}
	})
}
