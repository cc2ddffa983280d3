package main

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestRunWaitsForLockedFile: simba run on an SQLite file whose write lock
// another process holds (several simba processes starting at once on a new
// file: each sets WAL mode on its first connection) waits for it under its
// context instead of failing at once. Seen in a make test beside CI:
// 'simba run: exit 69: simba: sqlite:///…/locks.db: unreachable: database
// is locked (5) (SQLITE_BUSY)' (the recommended busy_timeout is 100 ms).
func TestRunWaitsForLockedFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	path := e.path("locks.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(100)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	p := e.start("run", "--store", "sqlite://"+path, "job", "--", "true")
	time.Sleep(time.Second) // well past the 100 ms busy timeout
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t, time.Minute); r.code != 0 {
		t.Fatalf("simba run while another process held the file's lock: exit %d: %s; want it to wait, then run", r.code, r.stderr)
	}
}
