package sqlstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/simba-go/simba/sqlstore"
)

// namedQueries counts the statements a pgx connection runs by their sqlc
// name (the "-- name: X" line that opens each generated statement).
type namedQueries struct {
	mu sync.Mutex
	n  map[string]int
}

func (q *namedQueries) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if rest, ok := strings.CutPrefix(d.SQL, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		q.mu.Lock()
		q.n[name]++
		q.mu.Unlock()
	}
	return ctx
}

func (q *namedQueries) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the counts so far and starts again from zero.
func (q *namedQueries) take() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.n
	q.n = map[string]int{}
	return n
}

// namedStore returns a PostgreSQL Store on dsn whose statements are
// counted by name, closed when the test ends. Its waiters are woken by
// LISTEN, as those of the tests' other Stores (pgListen): with doorbells a
// queued waiter's wait takes the lock at the release, and the queue the
// tests read after it would depend on when that wait began.
func namedStore(t *testing.T, dsn string) (*sqlstore.Store, *namedQueries) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	traced := &namedQueries{n: map[string]int{}}
	cfg.Tracer = traced
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	s, err := sqlstore.NewPostgres(db, sqlstore.WithPostgresDoorbells(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, traced
}

// releaseRuns releases contender's grant of mx with token through s and
// returns how many ReleaseIdle and Release statements that ran.
func releaseRuns(t *testing.T, s *sqlstore.Store, traced *namedQueries, mx, contender string, token uint64) (idle, full, head int) {
	t.Helper()
	traced.take()
	if err := s.Release(t.Context(), mx, contender, token); err != nil {
		t.Fatal(err)
	}
	got := traced.take()
	// ReleaseHead is Release's hand-off in a plain update.
	return got["ReleaseIdle"], got["Release"] + got["ReleaseHead"], got["ReleaseHead"]
}

// TestReleaseIdleStatement (issue 18): on PostgreSQL the release of a grant
// made while nobody was queued runs ReleaseIdle, a plain single-row update,
// instead of the Release statement (two updates, the queue rebuilt, the
// notification join): the statement's cost bounds scenario (b) of the
// benchmark. A grant made while others were queued is released by Release
// alone (one statement per hand-off), and one made alone that finds a
// waiter queued since falls back to Release, which hands over. Before,
// every release ran Release.
func TestReleaseIdleStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgListen.migrated(t)
	s, traced := namedStore(t, dsn)

	for range 20 {
		r, err := s.Acquire(ctx, "idle/solo", "a", ttl, tr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		if err := s.Release(ctx, "idle/solo", "a", r.Token); err != nil {
			t.Fatal(err)
		}
	}
	if got := traced.take(); got["ReleaseIdle"] != 20 || got["Release"] != 0 {
		t.Errorf("20 uncontended releases ran ReleaseIdle %d times and Release %d times, want 20 and 0 (all: %v)",
			got["ReleaseIdle"], got["Release"], got)
	}

	// a holds; w1 and w2 queue behind it. a's grant saw nobody queued:
	// ReleaseIdle finds the queue, Release hands over to w1.
	const mx = "idle/crowded"
	r, err := s.Acquire(ctx, mx, "a", ttl, tr)
	if err != nil || !r.Held("a") {
		t.Fatalf("Acquire(a) = %+v, %v", r, err)
	}
	plain := pgListen.open(t, dsn)
	enqueue(t, s, plain, mx, "w1", 1)
	enqueue(t, pgListen.newStore(t, dsn), plain, mx, "w2", 2)
	if idle, full, _ := releaseRuns(t, s, traced, mx, "a", r.Token); idle != 1 || full != 1 {
		t.Errorf("a release that found waiters queued since its grant ran ReleaseIdle %d times and Release %d times, want 1 and 1", idle, full)
	}
	// w1's grant saw w2 queued: its release is Release alone.
	r, err = s.Acquire(ctx, mx, "w1", ttl, tr)
	if err != nil || !r.Held("w1") {
		t.Fatalf("Acquire(w1) after the hand-off = %+v, %v", r, err)
	}
	if idle, full, head := releaseRuns(t, s, traced, mx, "w1", r.Token); idle != 0 || full != 1 || head != 1 {
		t.Errorf("the release of a grant made with others queued ran ReleaseIdle %d times and Release or ReleaseHead %d times (ReleaseHead %d), want 0, 1 and 1 (w2's entry is live)",
			idle, full, head)
	}
	if n := queueLen(t, plain, mx); n != 1 {
		t.Errorf("queue of %s holds %d entries after w1's release, want 1 (w2)", mx, n)
	}
}

// TestReleaseAfterWaitRunsRelease (issue 18): a grant made to a contender
// that watched the lock (it waited its turn) is released by Release alone
// even when nobody was queued at the grant: under contention the one it
// took the lock from queues again meanwhile (two contenders alternating,
// scenario (c) at K = 2), and ReleaseIdle would only find the queue and
// cost a round trip before Release hands over. Before, such a release ran
// ReleaseIdle, then Release.
func TestReleaseAfterWaitRunsRelease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgListen.migrated(t)
	s, traced := namedStore(t, dsn)
	other := pgListen.newStore(t, dsn)
	plain := pgListen.open(t, dsn)

	// a (another Store) holds; w waits in s; a hands over to w, which
	// finds nobody else queued; then a queues behind w.
	const mx = "idle/alternate"
	r, err := other.Acquire(ctx, mx, "a", ttl, tr)
	if err != nil || !r.Held("a") {
		t.Fatalf("Acquire(a) = %+v, %v", r, err)
	}
	enqueue(t, s, plain, mx, "w", 1)
	if err := other.Release(ctx, mx, "a", r.Token); err != nil {
		t.Fatal(err)
	}
	r, err = s.Acquire(ctx, mx, "w", ttl, tr)
	if err != nil || !r.Held("w") {
		t.Fatalf("Acquire(w) after the hand-off = %+v, %v", r, err)
	}
	if n := queueLen(t, plain, mx); n != 0 {
		t.Fatalf("queue of %s holds %d entries after w's grant, want 0", mx, n)
	}
	enqueue(t, other, plain, mx, "a", 1)
	if idle, full, _ := releaseRuns(t, s, traced, mx, "w", r.Token); idle != 0 || full != 1 {
		t.Errorf("the release of a grant w waited for ran ReleaseIdle %d times and Release or ReleaseHead %d times, want 0 and 1", idle, full)
	}
	r, err = other.Acquire(ctx, mx, "a", ttl, tr)
	if err != nil || !r.Held("a") {
		t.Fatalf("Acquire(a) after w's release = %+v, %v: the release did not hand over", r, err)
	}
}
