package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	mydb "github.com/simba-go/simba/internal/db/mysql"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// The queue keys of the WaitGrant tests: the holder H, the waiter W, and
// X, another waiter.
const (
	keyH = "hhhhhhhhhhhhhhhh"
	keyW = "aaaaaaaaaaaaaaaa"
	keyX = "bbbbbbbbbbbbbbbb"
)

// waitGrantRig is a MariaDB lock "wg" held by H (token 5) with the given
// queue (keys, oldest first), a connection that holds H's bell, and a
// connection for W's doorbell.
type waitGrantRig struct {
	db   *sql.DB
	h, w *sql.Conn
	wid  int64 // W's connection id
}

func newWaitGrantRig(t *testing.T, queue ...string) waitGrantRig {
	t.Helper()
	ctx := t.Context()
	r := waitGrantRig{db: mysqlDB.open(t, mysqlDB.migrated(t))}
	r.h, r.w = grantRigConns(t, r.db, "?", queue)
	if n, err := mydb.New().TakeBell(ctx, r.h, mydb.TakeBellParams{Scope: "simba_mutex", Mutex: []byte("wg"), Self: keyH}); err != nil || n != 1 {
		t.Fatalf("TakeBell(H) = %d, %v", n, err)
	}
	if err := r.w.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&r.wid); err != nil {
		t.Fatal(err)
	}
	return r
}

// grantRigConns writes lock "wg", held by H (token 5) with the given queue
// (keys, oldest first, live for ever), and returns two connections of db,
// for H's bell and W's doorbell. ph is the dialect's first placeholder.
func grantRigConns(t *testing.T, db *sql.DB, ph string, queue []string) (h, w *sql.Conn) {
	t.Helper()
	ctx := t.Context()
	q := ""
	for _, k := range queue {
		q += k + "9999999999999"
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO simba_mutex (mutex, owner_id, acquired_at, ttl_at, transition_at, token, version, queue) "+
		"VALUES ('wg', 'H', 0, 9999999999998, 9999999999999, 5, 1, "+ph+")", q); err != nil {
		t.Fatal(err)
	}
	var err error
	if h, err = db.Conn(ctx); err != nil {
		t.Fatal(err)
	}
	if w, err = db.Conn(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); w.Close() })
	return h, w
}

// waitGrant runs W's WaitGrant behind H's bell (ttl 5 s, transition 3 s).
func (r waitGrantRig) waitGrant(ctx context.Context, timeoutS int64) (rows, id int64, err error) {
	res, err := mydb.New().WaitGrant(ctx, r.w, mydb.WaitGrantParams{Scope: "simba_mutex", Mutex: []byte("wg"), Self: keyW, Pred: keyH,
		TimeoutS: timeoutS, TtlMs: 5000, TransitionMs: 3000, OwnerID: []byte("W"), Wkey: keyW})
	if err != nil {
		return 0, 0, err
	}
	rows, _ = res.RowsAffected()
	id, _ = res.LastInsertId()
	return rows, id, nil
}

// waitGrantResult is the reply of a WaitGrant that changed rows rows.
type waitGrantResult struct{ rows, id int64 }

// waitGrantAsync starts W's WaitGrant (timeout 30 s) and returns the
// function that waits for its reply, failing the test on an error.
func (r waitGrantRig) waitGrantAsync() func(t *testing.T) waitGrantResult {
	type reply struct {
		waitGrantResult
		err error
	}
	done := make(chan reply, 1)
	go func() {
		rows, id, err := r.waitGrant(context.Background(), 30)
		done <- reply{waitGrantResult{rows, id}, err}
	}()
	return func(t *testing.T) waitGrantResult {
		t.Helper()
		got := <-done
		if got.err != nil {
			t.Fatal(got.err)
		}
		return got.waitGrantResult
	}
}

// waiting waits until W's connection blocks in GET_LOCK and returns the
// server's clock once it did, in epoch ms: read by a statement of its own
// after the one that saw W waiting (that statement's NOW is its own
// start, which can come before W's statement began: it failed so beside
// a make test, the grant 1 ms after it). It gives up after a minute: the
// wait failed before it began.
func (r waitGrantRig) waiting(t *testing.T) int64 {
	t.Helper()
	for start := time.Now(); time.Since(start) < time.Minute; {
		var n, now int64
		if err := r.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
			"WHERE ID = ? AND STATE = 'User lock'", r.wid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if err := r.db.QueryRowContext(t.Context(), "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)").Scan(&now); err != nil {
				t.Fatal(err)
			}
			return now
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("W's WaitGrant did not block in GET_LOCK within a minute")
	return 0
}

// release ends H's grant as a Release on H's doorbell connection does
// (ReleaseBells: the bell goes before the commit).
func (r waitGrantRig) release(t *testing.T) {
	t.Helper()
	res, err := mydb.New().ReleaseBells(t.Context(), r.h, mydb.ReleaseBellsParams{Mutex: []byte("wg"), OwnerID: []byte("H"), Token: 5,
		Wkey: keyH, WindowMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := res.LastInsertId(); d != 1 {
		t.Fatalf("ReleaseBells: decision %d, want 1 (released)", d)
	}
}

type wgRow struct {
	owner                         string
	token                         int64
	acquired, ttlAt, transitionAt int64
	queue                         string
}

func (r waitGrantRig) row(t *testing.T) wgRow { return wgRowOf(t, r.db) }

// wgRowOf reads lock "wg" of a WaitGrant rig.
func wgRowOf(t *testing.T, db *sql.DB) wgRow {
	t.Helper()
	var w wgRow
	if err := db.QueryRowContext(t.Context(), "SELECT owner_id, token, acquired_at, ttl_at, transition_at, queue FROM simba_mutex WHERE mutex = 'wg'").
		Scan(&w.owner, &w.token, &w.acquired, &w.ttlAt, &w.transitionAt, &w.queue); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWaitGrantGrantsTheHeadWhenItsBellRings: WaitGrant waits for the bell
// of the waiter's predecessor and, once the holder's release lets it go,
// grants the head of the queue in the same statement (insert id: the new
// token), with expiries from the statement's start, which came before the
// wait: so a deadline taken from the statement's send time is never later
// than the server's.
func TestWaitGrantGrantsTheHeadWhenItsBellRings(t *testing.T) {
	r := newWaitGrantRig(t, keyW, keyX)
	wait := r.waitGrantAsync()
	seen := r.waiting(t)
	time.Sleep(20 * time.Millisecond) // the release comes later than seen, by more than the clock's millisecond
	r.release(t)
	got := wait(t)
	if got.rows != 1 || got.id != 6 {
		t.Fatalf("WaitGrant after the release: %d rows, insert id %d; want 1 row, token 6", got.rows, got.id)
	}
	w := r.row(t)
	if w.owner != "W" || w.token != 6 || w.queue != keyX+"9999999999999" {
		t.Fatalf("row after the grant: %+v; want W with token 6 and X alone queued", w)
	}
	if w.acquired > seen {
		t.Fatalf("the grant starts at %d, after the server saw the waiter waiting (%d): its expiries must come from the statement's start", w.acquired, seen)
	}
	if w.ttlAt-w.acquired != 5000 || w.transitionAt-w.ttlAt != 3000 {
		t.Fatalf("row after the grant: %+v; want ttl 5000 and transition 3000 ms from acquired_at", w)
	}
}

// TestWaitGrantLeavesTheLockToTheHead: a waiter whose predecessor's bell
// rings but who does not head the queue gets no grant; the reply's insert
// id says the bell rang (10 + 3 × mine + rang + 1 = 15), and the lock
// stays reserved for the head.
func TestWaitGrantLeavesTheLockToTheHead(t *testing.T) {
	r := newWaitGrantRig(t, keyX, keyW)
	wait := r.waitGrantAsync()
	r.waiting(t)
	r.release(t)
	got := wait(t)
	if got.rows != 0 || got.id != 15 {
		t.Fatalf("WaitGrant behind the head: %d rows, insert id %d; want 0 rows, code 15 (mine, rang)", got.rows, got.id)
	}
	if w := r.row(t); w.owner != "" || w.token != 5 || w.queue != keyX+"9999999999999"+keyW+"9999999999999" {
		t.Fatalf("row: %+v; want it free, reserved for X, W still queued", w)
	}
}

// TestWaitGrantTimesOutAndIsKilled: a wait that times out grants nothing
// and says so (code 14: mine, not rung); a wait interrupted by KILL QUERY
// from another connection returns an error, grants nothing, and leaves its
// connection usable: so a ringer can end its wait without losing the
// outcome of the grant, as closing the connection would.
func TestWaitGrantTimesOutAndIsKilled(t *testing.T) {
	r := newWaitGrantRig(t, keyW)
	rows, id, err := r.waitGrant(t.Context(), 0)
	if err != nil || rows != 0 || id != 14 {
		t.Fatalf("WaitGrant with timeout 0 while H holds its bell: %d rows, insert id %d, %v; want 0 rows, code 14", rows, id, err)
	}
	errs := make(chan error, 1)
	go func() {
		_, _, err := r.waitGrant(context.Background(), 30)
		errs <- err
	}()
	r.waiting(t)
	if _, err := r.db.ExecContext(t.Context(), "KILL QUERY ?", r.wid); err != nil {
		t.Fatal(err)
	}
	err = <-errs
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1317 {
		t.Fatalf("killed WaitGrant: %v; want error 1317 (query execution was interrupted)", err)
	}
	var one int
	if err := r.w.QueryRowContext(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("W's connection after KILL QUERY: %d, %v", one, err)
	}
	if w := r.row(t); w.owner != "H" || w.token != 5 {
		t.Fatalf("row: %+v; want H's grant unchanged", w)
	}
}

// pushDoorbells are the dialects whose doorbell waits take the lock.
var pushDoorbells = []dialect{mysqlDB, postgres}

// forDoorbells runs f as a subtest for each of pushDoorbells.
func forDoorbells(t *testing.T, f func(t *testing.T, d dialect)) {
	for _, d := range pushDoorbells {
		t.Run(d.name, func(t *testing.T) { f(t, d) })
	}
}

// pushWaiter sets up a push on d: "h" holds lock name through a
// Store of its own for a minute; "w", through Store w, is queued behind it
// (ttl, transition) and its doorbell waits in WaitGrant. It returns w, h's
// grant, h's Store and the database.
func pushWaiter(t *testing.T, d dialect, name string, ttl, transition time.Duration) (w *sqlstore.Store, held lease.Record, h *sqlstore.Store, db *sql.DB) {
	t.Helper()
	dsn := d.migrated(t)
	h, w, db = d.newStore(t, dsn), d.newStore(t, dsn), d.open(t, dsn)
	held, err := h.Acquire(t.Context(), name, "h", time.Minute, time.Minute)
	if err != nil || !held.Held("h") {
		t.Fatalf("Acquire(h) = %+v, %v", held, err)
	}
	enqueueFor(t, w, db, name, "w", 1, ttl, transition)
	// h took the lock without waiting: its Store takes h's bell once it
	// learns of a waiter (a renewal), and w's next attempt waits on it.
	if _, err := h.Renew(t.Context(), name, "h", held.Token, time.Minute, time.Minute); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); waitGrants(t, db) != 1; time.Sleep(20 * time.Millisecond) {
		if r, err := w.Acquire(t.Context(), name, "w", ttl, transition); err != nil || r.OwnerID == "w" {
			t.Fatalf("Acquire(w) = %+v, %v; want a loss", r, err)
		}
		if time.Since(start) > time.Minute {
			t.Fatal("w's doorbell never waited on h's bell")
		}
	}
	return w, held, h, db
}

// waitGrants counts the WaitGrant statements of the test's database that
// wait for a bell (in GET_LOCK, or on an advisory lock).
func waitGrants(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() "+
		"AND STATE = 'User lock' AND INFO LIKE '%name: WaitGrant%'").Scan(&n)
	if err != nil { // PostgreSQL
		err = db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "+
			"AND wait_event = 'advisory' AND query LIKE '%name: WaitGrant%'").Scan(&n)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitWaitGrants waits until n WaitGrant statements of the test's
// database wait in GET_LOCK, for a minute at most.
func awaitWaitGrants(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	for start := time.Now(); waitGrants(t, db) != n; time.Sleep(time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatalf("%d WaitGrant statements wait, want %d", waitGrants(t, db), n)
		}
	}
}

// awaitOwner polls s's Get of name until its owner is owner, for a minute
// at most, and returns the record.
func awaitOwner(t *testing.T, s *sqlstore.Store, name, owner string) lease.Record {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		r, err := s.Get(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if r.OwnerID == owner {
			return r
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("Get(%s) = %+v, want owner %q", name, r, owner)
		}
	}
}

// TestPushedGrantCountsFromTheWait: a waiter's doorbell takes the lock
// when the holder's release lets its bell go (WaitGrant), before the
// waiter's next Acquire; that Acquire reports the grant with the time
// left counted from when the wait was sent, which came before the wait:
// a deadline taken from the Acquire's start would otherwise outlive the
// server's grant by the wait's length.
func TestPushedGrantCountsFromTheWait(t *testing.T) {
	forDoorbells(t, func(t *testing.T, d dialect) {
		const name, ttl, wait = "push/from-the-wait", time.Minute, 300 * time.Millisecond
		w, held, h, _ := pushWaiter(t, d, name, ttl, time.Minute)
		time.Sleep(wait) // the wait lasts at least this long
		if err := h.Release(t.Context(), name, "h", held.Token); err != nil {
			t.Fatal(err)
		}
		pushed := awaitOwner(t, h, name, "w") // the doorbell's statement took it
		got, err := w.Acquire(t.Context(), name, "w", ttl, time.Minute)
		if err != nil || !got.Held("w") || got.Token != pushed.Token {
			t.Fatalf("Acquire(w) after the push = %+v, %v; want w's grant %d", got, err, pushed.Token)
		}
		if got.TTL > ttl-wait {
			t.Fatalf("Acquire(w) reports %v left of a grant whose wait began more than %v ago: want at most %v", got.TTL, wait, ttl-wait)
		}
	})
}

// TestPushedGrantAfterALongWaitIsExtended: when half the ttl or more has
// passed since the wait was sent, the waiter's Acquire does not take the
// pushed grant as it is (too little of it may be left): it runs its
// statement, which extends the grant (same token, the whole ttl).
func TestPushedGrantAfterALongWaitIsExtended(t *testing.T) {
	forDoorbells(t, func(t *testing.T, d dialect) {
		const name, ttl = "push/long-wait", time.Second
		w, held, h, _ := pushWaiter(t, d, name, ttl, time.Minute)
		time.Sleep(ttl/2 + 100*time.Millisecond)
		if err := h.Release(t.Context(), name, "h", held.Token); err != nil {
			t.Fatal(err)
		}
		pushed := awaitOwner(t, h, name, "w")
		got, err := w.Acquire(t.Context(), name, "w", ttl, time.Minute)
		if err != nil || !got.Held("w") || got.Token != pushed.Token {
			t.Fatalf("Acquire(w) after the push = %+v, %v; want w's grant %d", got, err, pushed.Token)
		}
		if got.TTL < ttl*9/10 {
			t.Fatalf("Acquire(w) reports %v left: want the grant extended by its statement (%v)", got.TTL, ttl)
		}
	})
}

// TestPushedGrantNobodyTakesIsReleased: a waiter that leaves the queue
// (Release with token 0, as a Manager whose caller gave up does) after its
// doorbell took the lock for it, but before an Acquire took that grant,
// does not keep the lock: the doorbell releases the grant, long before it
// would lapse.
func TestPushedGrantNobodyTakesIsReleased(t *testing.T) {
	forDoorbells(t, func(t *testing.T, d dialect) {
		const name = "push/nobody-takes"
		w, held, h, _ := pushWaiter(t, d, name, time.Minute, time.Minute)
		if err := h.Release(t.Context(), name, "h", held.Token); err != nil {
			t.Fatal(err)
		}
		awaitOwner(t, h, name, "w")
		if err := w.Release(t.Context(), name, "w", 0); err != nil && !errors.Is(err, lease.ErrNotHeld) {
			t.Fatal(err)
		}
		for start := time.Now(); ; time.Sleep(time.Millisecond) {
			r, err := h.Get(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if r.OwnerID != "w" {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("w left, yet after %v the grant its doorbell took is still held: %+v", time.Since(start), r)
			}
		}
	})
}

// TestWaitGrantEndsWhenTheWaiterLeaves: a waiter that leaves the queue
// ends its doorbell's wait (which would otherwise wait an hour), from the
// server's side, and nothing is granted to it.
func TestWaitGrantEndsWhenTheWaiterLeaves(t *testing.T) {
	forDoorbells(t, func(t *testing.T, d dialect) {
		const name = "push/leaves"
		w, _, h, db := pushWaiter(t, d, name, time.Minute, time.Minute)
		if err := w.Release(t.Context(), name, "w", 0); err != nil && !errors.Is(err, lease.ErrNotHeld) {
			t.Fatal(err)
		}
		awaitWaitGrants(t, db, 0)
		if r, err := h.Get(t.Context(), name); err != nil || !r.Held("h") {
			t.Fatalf("Get = %+v, %v; want h's grant", r, err)
		}
	})
}
