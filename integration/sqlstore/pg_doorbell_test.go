package sqlstore_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// syncBuffer is a bytes.Buffer for a logger that goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPostgresDoorbellWaitIsBounded (issue 18, WithPostgresDoorbells): a
// statement that waits keeps its snapshot, which holds back what VACUUM
// may remove in the whole database. A doorbell's wait is one statement, so
// a waiter behind a long grant (a standby of a leader election) would hold
// the horizon for as long as the grant lasts. WaitBell bounds its own wait
// (lock_timeout, local to its transaction) and the waiter waits again: the
// waiting statement is never older than about 10 s.
func TestPostgresDoorbellWaitIsBounded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dsn := postgres.migrated(t)
	admin := postgres.open(t, dsn)
	holder := newManager(t, postgres.newStore(t, dsn), "holder")
	waiter := newManager(t, postgres.newStore(t, dsn), "waiter")
	const mx = "doorbell/bounded"
	// The holder learns of the waiter at its renewal (a third of the ttl)
	// and takes its bell; from then on the waiter's doorbell blocks.
	lh, err := holder.Acquire(ctx, mx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lease.Lease, 1)
	go func() {
		l, err := waiter.Acquire(ctx, mx)
		if err != nil && ctx.Err() == nil {
			t.Errorf("waiter Acquire: %v", err)
		}
		got <- l
	}()
	started := func() (time.Time, bool) {
		var at time.Time
		err := admin.QueryRowContext(ctx, `SELECT query_start FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%name: Wait%'
			  AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&at)
		return at, err == nil
	}
	var first time.Time
	for deadline := time.Now().Add(2 * i5Bound); ; time.Sleep(20 * time.Millisecond) {
		var ok bool
		if first, ok = started(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v no doorbell blocks on the holder's", 2*i5Bound)
		}
	}
	// The same wait, a statement later: within the 10 s bound plus slack.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if at, ok := started(); ok && at.After(first) {
			t.Logf("the doorbell's statement started again %v after the first", at.Sub(first))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the doorbell's statement that started at %v still waits 30 s later: its snapshot holds back VACUUM", first)
		}
	}
	if err := lh.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l != nil {
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// TestPostgresDoorbellOutlastsStatementTimeout (WithPostgresDoorbells): a
// statement_timeout set for the application's sessions ends a doorbell's
// wait like its own bound does. The doorbell waits again on the same
// connection and still wakes its waiter at the release, with no warning
// and no reconnection.
func TestPostgresDoorbellOutlastsStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dsn := postgres.migrated(t)
	admin := postgres.open(t, dsn)
	if _, err := admin.ExecContext(ctx, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET statement_timeout = 500', current_database()); END $$"); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	first := newManager(t, postgres.newStore(t, dsn, sqlstore.WithLogger(log)), "first")
	holder := newManager(t, postgres.newStore(t, dsn, sqlstore.WithLogger(log)), "holder")
	waiter := newManager(t, postgres.newStore(t, dsn, sqlstore.WithLogger(log)), "waiter")
	const mx = "doorbell/statement-timeout"
	// The holder gets the lock by waiting, so that it holds its bell.
	lf, err := first.Acquire(ctx, mx)
	if err != nil {
		t.Fatal(err)
	}
	plain := postgres.open(t, dsn)
	gotHolder := make(chan *lease.Lease, 1)
	go func() { l, _ := holder.Acquire(ctx, mx); gotHolder <- l }()
	for deadline := time.Now().Add(i5Bound); queueLen(t, plain, mx) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the holder never queued")
		}
	}
	if err := lf.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lh := <-gotHolder
	if lh == nil {
		t.Fatal("the holder got no lease")
	}
	got := make(chan *lease.Lease, 1)
	go func() { l, _ := waiter.Acquire(ctx, mx); got <- l }()
	time.Sleep(2 * time.Second) // several statement timeouts of the waiter's doorbell
	released := time.Now()
	if err := lh.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.Fatal("the waiter got no lease")
	}
	if took := time.Since(released); took > pushed {
		t.Errorf("hand-off took %v, want < %v: was the waiter woken by the release?", took, pushed)
	}
	if w := logs.String(); strings.Contains(w, "doorbell") {
		t.Errorf("the doorbells logged:\n%s", w)
	}
	_ = l.Release(ctx)
}
