package sqlstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// commands counts the statements of the server's general log by command
// type and sqlc name ("Execute:ReleaseBells", "Query:ReleaseBells",
// "Prepare:ReleaseBells"), and starts again from zero.
func (g generalLog) commands(t *testing.T) map[string]int {
	t.Helper()
	rows, err := g.db.QueryContext(t.Context(),
		"SELECT command_type, CAST(argument AS CHAR) FROM mysql.general_log WHERE command_type IN ('Execute', 'Query', 'Prepare')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var cmd, q string
		if err := rows.Scan(&cmd, &q); err != nil {
			t.Fatal(err)
		}
		if rest, ok := strings.CutPrefix(q, "-- name: "); ok {
			name, _, _ := strings.Cut(rest, " ")
			n[cmd+":"+name]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.db.ExecContext(t.Context(), "TRUNCATE TABLE mysql.general_log"); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDoorbellReleaseIsPrepared (issue 18): on MariaDB the release of a
// grant whose holder waited runs on the holder's doorbell connection
// (ReleaseBells, which lets the bell go) as a statement prepared on that
// connection, not as text: MariaDB parses the statement's text in about
// as long as it runs it, and the release is on the hand-off's critical
// path (server time 189 µs prepared, 357 µs as text). The preparation is
// made once per doorbell connection, not once per hand-off: a ringer whose
// contender's grant ended parks with its connection for the contender's
// next wait, so two contenders that take turns prepare it at most twice.
// A hand-off is three statements: the release; the releaser's next
// attempt, which queues it again (Acquire); and its doorbell's wait
// (WaitGrant), which takes the lock for it in the same statement once the
// next release lets its predecessor's bell go: the woken waiter runs no
// statement to take the lock (AcquireHead, before).
func TestDoorbellReleaseIsPrepared(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dsn, log := loggedMySQL(t)
	dsn += "?interpolateParams=true" // as bench/ and the package's documentation: text unless prepared
	const name, turns = "prepared/turns", 12
	var ms [2]*lease.Manager
	for i := range ms {
		ms[i], _ = newContender(t, mysqlDB, dsn, i, 4, nil)
	}
	probe := mysqlDB.open(t, dsn)
	queued := func() bool { // someone waits in the lock's queue
		var n int
		err := probe.QueryRowContext(ctx, "SELECT LENGTH(queue) FROM simba_mutex WHERE mutex = ?", name).Scan(&n)
		return err == nil && n > 0
	}
	held, err := ms[0].Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range turns {
		if i == 2 { // from here on each holder got its grant by waiting: its doorbell lets go in the release
			log.commands(t)
		}
		next := make(chan *lease.Lease, 1)
		go func() {
			l, err := ms[(i+1)%2].Acquire(ctx, name)
			if err != nil {
				t.Error(err)
			}
			next <- l
		}()
		for !queued() && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		// The holder's doorbell connection is lent to its release once its
		// ringer holds the bell; give it time, which only makes the case
		// this test judges more likely.
		time.Sleep(200 * time.Millisecond)
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if held = <-next; held == nil {
			t.FailNow()
		}
	}
	got := log.commands(t)
	t.Logf("%d hand-offs: %v", turns-2, got)
	if n := got["Query:ReleaseBells"]; n > 0 {
		t.Errorf("ReleaseBells ran %d times as text, want it prepared", n)
	}
	if got["Execute:ReleaseBells"] == 0 {
		t.Errorf("no release ran ReleaseBells on a doorbell connection in %d hand-offs: %v", turns-2, got)
	}
	// Each hand-off's waiter waits in WaitGrant, which takes the lock when
	// the release lets its predecessor's bell go, so its Acquire needs no
	// AcquireHead. On a loaded machine a waiter's poll may come first and
	// interrupt a wait (a wait and an acquire more, an AcquireHead then);
	// without the push every hand-off runs AcquireHead.
	waits, heads := got["Query:WaitGrant"]+got["Execute:WaitGrant"], got["Execute:AcquireHead"]+got["Query:AcquireHead"]
	if waits < turns-2 || heads >= turns-2 {
		t.Errorf("%d hand-offs ran WaitGrant %d times and AcquireHead %d times, want at least %[1]d and fewer than %[1]d: %v",
			turns-2, waits, heads, got)
	}
	if n := got["Prepare:ReleaseBells"]; n > len(ms) {
		t.Errorf("ReleaseBells was prepared %d times in %d hand-offs of %d contenders, want once per doorbell connection at most",
			n, turns-2, len(ms))
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// The last holder goes on alone: its ringer is parked, and its grants,
	// which nobody waits for, do no doorbell work (an uncontended cycle is
	// two small statements, as without a ringer).
	alone := ms[(turns-1)%2]
	log.commands(t)
	for range 5 {
		l, err := alone.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // time for a ringer told to hold to take its bell
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got = log.commands(t)
	t.Logf("5 cycles alone: %v", got)
	for k, n := range got {
		if strings.Contains(k, "Bell") {
			t.Errorf("5 uncontended cycles after the hand-offs ran %s %d times, want no doorbell work (%v)", k, n, got)
		}
	}
}

// TestRefusedPrepareRunsAsText: a server that refuses to prepare (here
// max_prepared_stmt_count = 0, as a server at its limit does) gets its
// statements as text (with interpolateParams, as the package documents),
// and costs one refused preparation per statement, not one per call: the
// statement runs as text for a minute before the Store asks again. The
// server does not count refused preparations, so the client's round trips
// are counted. Before, every call of a fixed statement sent a preparation
// first (4 round trips per uncontended cycle instead of 2).
func TestRefusedPrepareRunsAsText(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, log := loggedMySQL(t)
	if _, err := log.db.ExecContext(ctx, "SET GLOBAL max_prepared_stmt_count = 0"); err != nil {
		t.Fatal(err)
	}
	db, trips, _ := countingPool(t, mysqlDB, dsn+"?interpolateParams=true", 4)
	s, err := mysqlDB.store(db, sqlstore.WithPush(false))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cycle := func() {
		r, err := s.Acquire(ctx, "refused/prepare", "a", ttl, tr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		if err := s.Release(ctx, "refused/prepare", "a", r.Token); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // creates the row: Acquire and Release, each refused once
	cycle() // AcquireFree and ReleaseIdle, each refused once
	before := trips.Load()
	const cycles = 10
	for range cycles {
		cycle()
	}
	n := trips.Load() - before
	t.Logf("%d round trips in %d uncontended cycles", n, cycles)
	if n > 2*cycles+2 { // a cycle may take a third statement (AcquireFree finds the lock changed)
		t.Errorf("%d round trips in %d uncontended cycles, want about 2 a cycle: a refused preparation is asked for again on every call", n, cycles)
	}
}

// TestParkedDoorbellMakesRoom: a parked doorbell connection does not keep
// a waiter of another lock from having one. With room for one doorbell,
// the waiter's doorbell of lock x parks after its release; its wait for
// lock y then ends that one and takes its place, and is woken at y's
// release. Without the room made, the waiter of y has no doorbell and
// polls at the owner's transition end, 30 s after it lost.
func TestParkedDoorbellMakesRoom(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dsn := mysqlDB.migrated(t) + "?interpolateParams=true"
	manager := func(id string, opts ...sqlstore.Option) *lease.Manager {
		db := mysqlDB.open(t, dsn)
		db.SetMaxOpenConns(4) // with the holder loop's connection: room for one doorbell
		db.SetMaxIdleConns(4)
		s, err := mysqlDB.store(db, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		m, err := lease.NewManager(s, lease.WithTTL(20*time.Second), lease.WithTransition(10*time.Second), lease.WithContenderID(id))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}
	holder, waiter := manager("holder"), manager("waiter", sqlstore.WithDoorbells(1))
	probe := mysqlDB.open(t, dsn)
	// handOff: holder holds name until waiter waits for it, then releases;
	// it returns how long waiter took from the release to its grant.
	handOff := func(name string) time.Duration {
		h, err := holder.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *lease.Lease, 1)
		go func() {
			l, err := waiter.Acquire(ctx, name)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		for ctx.Err() == nil {
			var n int
			if err := probe.QueryRowContext(ctx, "SELECT LENGTH(queue) FROM simba_mutex WHERE mutex = ?", name).Scan(&n); err == nil && n > 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // the waiter's doorbell waits by now, most likely; a late one probes the row
		start := time.Now()
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l := <-got
		took := time.Since(start)
		if l == nil {
			t.FailNow()
		}
		if err := l.Release(ctx); err != nil { // the waiter's doorbell of name parks
			t.Fatal(err)
		}
		return took
	}
	handOff("room/x")
	if took := handOff("room/y"); took > 10*time.Second {
		t.Errorf("the waiter of room/y got it %v after its release, want a push (milliseconds), not its poll (30 s): the parked doorbell of room/x kept the only room", took)
	}
}
