package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testhooks"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// The SQLite push path polls the file. These tests stretch the longest
// interval between two looks to an hour, so that a wake-up within the
// tests' bound can only come from the looks the behaviour under test
// adds.
const litePollNever = time.Hour

// liteWatch subscribes contender to lock through s and returns the
// channel once s's poller has looked at the file at least once (its
// first look, on a queue without contender, sets it to the long
// interval).
func liteWatch(t *testing.T, s *sqlstore.Store, name, contender string) <-chan lease.Event {
	t.Helper()
	ch, err := s.Watch(t.Context(), name, contender)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(i5Bound); testhooks.SQLLitePolls(s) < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the poller never read data_version")
		}
	}
	select { // the event of the session's start: commits before it were unseen
	case <-ch:
	case <-time.After(i5Bound):
		t.Fatal("no event when the poller started")
	}
	return ch
}

// liteLose makes contender's Acquire through s lose, which queues it.
func liteLose(t *testing.T, s *sqlstore.Store, name, contender string) {
	t.Helper()
	r, err := s.Acquire(t.Context(), name, contender, pushTTL, pushTr)
	if err != nil || r.OwnerID == contender {
		t.Fatalf("Acquire(%s) = %+v, %v; want a loss", contender, r, err)
	}
}

// awaitEvent waits for an event on ch, failing with why after i5Bound.
func awaitEvent(t *testing.T, ch <-chan lease.Event, why string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(i5Bound):
		t.Fatalf("no event within %v: %s", i5Bound, why)
	}
}

// TestLiteQueuedWaiterIsSeenAtOnce: a Store whose waiter has just joined
// a queue looks at the file at once, not at its next tick, so that a
// release right after finds the waiter's Store looking every
// millisecond. (With two contenders, the one that had just released
// waited the whole 20 ms tick for every hand-off: bench/ measured a gap
// p50 of 21 ms at K = 2.)
func TestLiteQueuedWaiterIsSeenAtOnce(t *testing.T) {
	ctx := t.Context()
	dsn := sqlite.migrated(t)
	a, b := sqlite.newStore(t, dsn), sqlite.newStore(t, dsn)
	testhooks.SQLLitePollEvery(b, litePollNever)
	const mx = "lite/queued"
	held, err := a.Acquire(ctx, mx, "a", pushTTL, pushTr)
	if err != nil || !held.Held("a") {
		t.Fatalf("Acquire(a) = %+v, %v", held, err)
	}
	ch := liteWatch(t, b, mx, "b")
	liteLose(t, b, mx, "b")
	if err := a.Release(ctx, mx, "a", held.Token); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, ch, "the waiter's Store did not look at the file after its waiter queued")
	if r, err := b.Acquire(ctx, mx, "b", pushTTL, pushTr); err != nil || !r.Held("b") {
		t.Fatalf("Acquire(b) after the wake-up = %+v, %v", r, err)
	}
}

// TestLiteDeepWaiterLooksSooner: a Store whose waiter is third in the
// queue looks at the file every few milliseconds, not at the slow tick,
// so that it has seen itself come second (and then first) by the time
// the lock is handed to it. (At K = 32 the waiters that were third or
// later missed their turn by up to the tick.)
func TestLiteDeepWaiterLooksSooner(t *testing.T) {
	ctx := t.Context()
	dsn := sqlite.migrated(t)
	db := sqlite.open(t, dsn)
	a, b, c, d := sqlite.newStore(t, dsn), sqlite.newStore(t, dsn), sqlite.newStore(t, dsn), sqlite.newStore(t, dsn)
	testhooks.SQLLitePollEvery(d, litePollNever)
	const mx = "lite/deep"
	held, err := a.Acquire(ctx, mx, "a", pushTTL, pushTr)
	if err != nil || !held.Held("a") {
		t.Fatalf("Acquire(a) = %+v, %v", held, err)
	}
	bCh := liteWatch(t, b, mx, "b")
	liteLose(t, b, mx, "b")
	cCh := liteWatch(t, c, mx, "c")
	liteLose(t, c, mx, "c")
	dCh := liteWatch(t, d, mx, "d")
	liteLose(t, d, mx, "d")
	awaitQueue(t, db, mx, 3)
	owner, tok := a, held.Token
	for _, w := range []struct {
		s  *sqlstore.Store
		ch <-chan lease.Event
	}{{b, bCh}, {c, cCh}} { // the first two take their turns
		id := map[*sqlstore.Store]string{a: "a", b: "b", c: "c"}
		if err := owner.Release(ctx, mx, id[owner], tok); err != nil {
			t.Fatal(err)
		}
		awaitEvent(t, w.ch, id[w.s]+" was not woken")
		r, err := w.s.Acquire(ctx, mx, id[w.s], pushTTL, pushTr)
		if err != nil || !r.Held(id[w.s]) {
			t.Fatalf("Acquire(%s) after its wake-up = %+v, %v", id[w.s], r, err)
		}
		owner, tok = w.s, r.Token
	}
	if err := c.Release(ctx, mx, "c", tok); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(i5Bound); ; {
		awaitEvent(t, dCh, "the third waiter's Store did not look at the file while it came nearer its turn")
		r, err := d.Acquire(ctx, mx, "d", pushTTL, pushTr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Held("d") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire(d) after its wake-ups = %+v", r)
		}
	}
}

// TestLitePollerParsesOnce: the poller prepares its two statements (the
// read of data_version and of a changed lock's row) once per session
// instead of having SQLite parse them at every look (at K = 32, parsing
// them was 40% of the process's CPU).
func TestLitePollerParsesOnce(t *testing.T) {
	ctx := t.Context()
	dsn := sqlite.migrated(t)
	var parses atomic.Int64
	db := sql.OpenDB(parsing{liteConnector{dsn}, &parses})
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	t.Cleanup(func() { db.Close() })
	a := sqlite.newStore(t, dsn)
	b, err := sqlstore.NewSQLite(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	const mx = "lite/parse"
	held, err := a.Acquire(ctx, mx, "a", pushTTL, pushTr)
	if err != nil || !held.Held("a") {
		t.Fatalf("Acquire(a) = %+v, %v", held, err)
	}
	liteWatch(t, b, mx, "b")
	liteLose(t, b, mx, "b") // first in the queue: b's Store looks every millisecond
	// The holder renews: every renewal is a commit, after which b's
	// poller reads the lock's row as well as data_version.
	before := parses.Load()
	const looks = 50
	for i := range looks {
		r, err := a.Renew(ctx, mx, "a", held.Token, pushTTL, pushTr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Renew(a) = %+v, %v", r, err)
		}
		polls := testhooks.SQLLitePolls(b)
		for deadline := time.Now().Add(i5Bound); testhooks.SQLLitePolls(b) < polls+2; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("renewal %d: the poller did not look in %v", i, i5Bound)
			}
		}
	}
	if n := parses.Load() - before; n > looks/10 {
		t.Errorf("SQLite parsed %d statements while the poller looked after %d commits; want its statements prepared once", n, looks)
	}
}

// parsing counts the statements that SQLite parses: preparations, and
// statements run without one.
type parsing struct {
	driver.Connector
	n *atomic.Int64
}

func (c parsing) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return parsingConn{conn.(fullConn), c.n}, nil
}

type parsingConn struct {
	fullConn
	n *atomic.Int64
}

func (c parsingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	c.count(q)
	return c.fullConn.PrepareContext(ctx, q)
}

func (c parsingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.count(q)
	return c.fullConn.QueryContext(ctx, q, args)
}

func (c parsingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.count(q)
	return c.fullConn.ExecContext(ctx, q, args)
}

// count counts q unless it is a transaction's BEGIN or COMMIT.
func (c parsingConn) count(q string) {
	if !strings.HasPrefix(q, "BEGIN") && !strings.HasPrefix(q, "COMMIT") {
		c.n.Add(1)
	}
}
