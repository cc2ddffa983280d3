//go:build unix

package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testhooks"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// liteNoWait returns a migrated SQLite file and its DSN with busy_timeout
// 0: SQLite then returns SQLITE_BUSY at once instead of sleeping, and
// every collision of two writers shows in the Stores' busy counts.
func liteNoWait(t *testing.T) (path, dsn string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "simba.db")
	dsn = "file:" + path + "?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)&_txlock=immediate"
	sqlite.migrate(t, dsn)
	return path, dsn
}

// liteWriter returns a Store without push on a pool of one connection of
// its own, opened before the test's writes begin (opening runs pragmas
// that may collide too).
func liteWriter(t *testing.T, dsn string, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err := sqlstore.NewSQLite(db, append([]sqlstore.Option{sqlstore.WithPush(false)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestLiteWritersTakeTurns: the writes of SQLite Stores of one file (each
// on a pool of its own, as in separate processes) take turns through the
// lock file, so that none of them finds SQLite's write lock taken: with
// SQLite's wait switched off, not one busy error over 8 × 100 acquires
// and releases on distinct locks. (Without the lock file they collide,
// and SQLite's wait sleeps 1, 2, 5 … 100 ms at a time: bench/ measured an
// acquire p99 of 0.7 s with 64 contenders.)
func TestLiteWritersTakeTurns(t *testing.T) {
	path, dsn := liteNoWait(t)
	const writers, cycles = 8, 100
	stores := make([]*sqlstore.Store, writers)
	for i := range stores {
		stores[i] = liteWriter(t, dsn)
	}
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			name := fmt.Sprint("turns/", i)
			for range cycles {
				r, err := s.Acquire(t.Context(), name, "c", pushTTL, pushTr)
				if err != nil || !r.Held("c") {
					t.Errorf("Acquire(%s) = %+v, %v", name, r, err)
					return
				}
				if err := s.Release(t.Context(), name, "c", r.Token); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var busy int64
	for _, s := range stores {
		busy += testhooks.SQLBusyRetries(s)
	}
	if busy != 0 {
		t.Errorf("%d writes of %d found SQLite's write lock taken; want the Stores to take turns through the lock file", busy, 2*writers*cycles)
	}
	if _, err := os.Stat(path + "-simba-writes"); err != nil {
		t.Errorf("the lock file: %v", err)
	}
}

// TestLiteWriteTurnEndsWithContext: a write waiting for its turn (another
// process holds the lock file, as one stopped in the middle of a write
// would) ends with its context, and once the lock file is let go the
// Store writes again: the wait it gave up did not keep the turn.
func TestLiteWriteTurnEndsWithContext(t *testing.T) {
	path, dsn := liteNoWait(t)
	s := liteWriter(t, dsn)
	if _, err := s.Acquire(t.Context(), "turn/first", "c", pushTTL, pushTr); err != nil { // opens the lock file
		t.Fatal(err)
	}
	f, err := os.Open(path + "-simba-writes")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if r, err := s.Acquire(ctx, "turn/blocked", "c", pushTTL, pushTr); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while another holds the lock file = %+v, %v; want the context's deadline", r, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), i5Bound)
	defer cancel2()
	if r, err := s.Acquire(ctx2, "turn/after", "c", pushTTL, pushTr); err != nil || !r.Held("c") {
		t.Fatalf("Acquire after the lock file was let go = %+v, %v", r, err)
	}
}

// TestLiteWithoutLockFile: a Store that cannot open the lock file (here a
// dangling link into a missing directory stands where it would be; root
// ignores a read-only directory) goes on without it, as its documentation
// says: SQLite's own wait orders its writes.
func TestLiteWithoutLockFile(t *testing.T) {
	path, dsn := liteNoWait(t)
	if err := os.Symlink(filepath.Join(t.TempDir(), "missing", "x"), path+"-simba-writes"); err != nil {
		t.Fatal(err)
	}
	s := liteWriter(t, dsn)
	r, err := s.Acquire(t.Context(), "nolock/a", "c", pushTTL, pushTr)
	if err != nil || !r.Held("c") {
		t.Fatalf("Acquire without a lock file = %+v, %v", r, err)
	}
	if err := s.Release(t.Context(), "nolock/a", "c", r.Token); err != nil {
		t.Fatal(err)
	}
}

// TestLiteForeignWriterIsWaitedFor: a writer that does not take the lock
// file (another program, an older version of this package) is waited for
// as before, as WithSQLiteWriteLock says: while another connection holds
// SQLite's write lock in an open transaction, a Store's Acquire (its turn
// in the lock file taken) finds the file busy and keeps trying, and once
// that transaction commits, the Acquire gets its grant.
func TestLiteForeignWriterIsWaitedFor(t *testing.T) {
	_, dsn := liteNoWait(t)
	s := liteWriter(t, dsn)
	foreign, err := sql.Open("sqlite", dsn) // _txlock=immediate: BEGIN takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	tx, err := foreign.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	type result struct {
		rec lease.Record
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(t.Context(), i5Bound)
	defer cancel()
	go func() {
		r, err := s.Acquire(ctx, "foreign/a", "c", pushTTL, pushTr)
		done <- result{r, err}
	}()
	for testhooks.SQLBusyRetries(s) == 0 {
		select {
		case r := <-done:
			t.Fatalf("Acquire while another connection writes = %+v, %v; want it to wait", r.rec, r.err)
		case <-ctx.Done():
			t.Fatal("the Store never found the file busy")
		case <-time.After(time.Millisecond):
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || !r.rec.Held("c") {
		t.Fatalf("Acquire once the other connection committed = %+v, %v", r.rec, r.err)
	}
}
