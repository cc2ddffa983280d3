//go:build unix

package sqlstore

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// writeLock makes the write statements of the SQLite Stores that share a
// file, in every process, take turns through an exclusive flock(2) on a
// file beside it ([WithSQLiteWriteLock]). SQLite's own wait for its write
// lock is a sleep of 1, 2, 5, 10 … 100 ms whatever happens meanwhile, so
// under contention a writer sleeps through the moments the lock is free
// and loses to newer writers again and again (a p99 acquire of 0.7 s with
// 64 writers); the kernel wakes a flock waiter when the lock is let go.
// The flock only orders writers: SQLite's locks still guard the data, and
// a writer that does not take the flock (an older version, another
// program) is waited for as before. flock excludes open files, not
// goroutines, so a Store's own writers take turns on sem first.
type writeLock struct {
	f   *os.File
	sem chan struct{}
}

// lockFileSuffix names a database's lock file: the database's path and
// this.
const lockFileSuffix = "-simba-writes"

// openWriteLock opens the lock file of the database at path, creating it
// (empty; it is never removed: a process may be waiting on the file, and
// one that then locked a new file of the same name would not exclude it).
// It returns nil for a database without a file, or when the file cannot
// be opened: the Store then relies on SQLite's wait alone. Read access is
// enough for flock.
func openWriteLock(path string) *writeLock {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path+lockFileSuffix, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil
	}
	return &writeLock{f: f, sem: make(chan struct{}, 1)}
}

// lock waits for the lock until ctx ends. A flock still pending then is
// let go as soon as the kernel grants it, and the Store's next writer
// waits for that. An error of flock itself is not returned: the writer
// then goes on without it.
func (l *writeLock) lock(ctx context.Context) error {
	if l == nil {
		return nil
	}
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := flock(l.f, syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- flock(l.f, syscall.LOCK_EX) }() // blocks a thread; the kernel gives no context
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				_ = flock(l.f, syscall.LOCK_UN)
			}
			<-l.sem
		}()
		return ctx.Err()
	}
}

// unlock lets the lock go; only after a lock that returned nil.
func (l *writeLock) unlock() {
	if l == nil {
		return
	}
	_ = flock(l.f, syscall.LOCK_UN)
	<-l.sem
}

// flock runs flock(2) on f, again when a signal interrupted it.
func flock(f *os.File, how int) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := c.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Flock(int(fd), how); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}
