package sqlstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

// TestPruneKeepsTokensIncreasing (issue 14, item 9): rows of locks freed
// long enough ago are deleted, so a table of one name per order stays
// bounded; a name that comes back after its row was deleted gets a token
// greater than every token it had (the token floor), and live grants are
// never pruned. Today's code keeps every row forever (and a deleted row
// would start its tokens at 1 again).
func TestPruneKeepsTokensIncreasing(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		s := d.newStore(t, dsn, sqlstore.WithRetention(0))
		db := d.open(t, dsn)
		rows := func() int {
			t.Helper()
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM simba_mutex").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		// One name used many times: its token climbs.
		var last uint64
		for i := range 5 {
			r, err := s.Acquire(ctx, "order/returns", fmt.Sprint("c", i), ttl, tr)
			if err != nil || !r.Held(fmt.Sprint("c", i)) {
				t.Fatalf("Acquire %d = %+v, %v", i, r, err)
			}
			last = r.Token
			if err := s.Release(ctx, "order/returns", fmt.Sprint("c", i), r.Token); err != nil {
				t.Fatal(err)
			}
		}
		// Many names used once each, and one still held.
		const names = 150
		for i := range names {
			name := fmt.Sprint("order/", i)
			r, err := s.Acquire(ctx, name, "a", ttl, tr)
			if err != nil || !r.Held("a") {
				t.Fatalf("Acquire(%s) = %+v, %v", name, r, err)
			}
			if err := s.Release(ctx, name, "a", r.Token); err != nil {
				t.Fatal(err)
			}
		}
		held, err := s.Acquire(ctx, "order/held", "a", ttl, tr)
		if err != nil || !held.Held("a") {
			t.Fatalf("Acquire(order/held) = %+v, %v", held, err)
		}
		if n := rows(); n < names+2 {
			t.Fatalf("%d rows before pruning, want at least %d", n, names+2)
		}
		if n, err := s.Prune(ctx, time.Hour); err != nil || n != 0 {
			t.Errorf("Prune(1h) = %d, %v; want nothing that young pruned", n, err)
		}
		time.Sleep(5 * time.Millisecond) // every release is now older than 1 ms
		n, err := s.Prune(ctx, time.Millisecond)
		if err != nil || n != names+1 {
			t.Errorf("Prune = %d, %v; want %d rows", n, err, names+1)
		}
		if n := rows(); n != 2 { // the held lock and the token floor
			t.Errorf("%d rows after pruning, want 2 (the live grant and the token floor)", n)
		}
		if r, err := s.Get(ctx, "order/held"); err != nil || r.OwnerID != "a" || r.Token != held.Token {
			t.Errorf("Get(order/held) after pruning = %+v, %v; want the live grant", r, err)
		}
		r, err := s.Acquire(ctx, "order/returns", "back", ttl, tr)
		if err != nil || !r.Held("back") || r.Token <= last {
			t.Errorf("Acquire after the row was pruned = %+v, %v; want a token above %d", r, err, last)
		}
		if gs, err := s.List(ctx); err != nil || len(gs) != 2 {
			t.Errorf("List = %+v, %v; want the two live grants (never the token floor)", gs, err)
		}
		if _, err := s.Prune(ctx, -time.Second); err == nil {
			t.Error("Prune(-1s) succeeded")
		}
	})
}

// TestPruneInBackground: a Store with a short retention prunes by itself
// after an Acquire, and Close waits for it.
func TestPruneInBackground(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		s := d.newStore(t, dsn, sqlstore.WithRetention(time.Second))
		db := d.open(t, dsn)
		r, err := s.Acquire(ctx, "bg/old", "a", ttl, tr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		if err := s.Release(ctx, "bg/old", "a", r.Token); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			time.Sleep(200 * time.Millisecond)
			if _, err := s.Acquire(ctx, "bg/other", "a", ttl, tr); err != nil { // a tick
				t.Fatal(err)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM simba_mutex WHERE mutex = 'bg/old'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the row of a lock released long before the retention was not pruned")
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.store(db, sqlstore.WithRetention(-time.Second)); err == nil {
			t.Error("WithRetention(-1s) accepted")
		}
		_ = lease.ErrNotHeld
	})
}
