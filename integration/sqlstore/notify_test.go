package sqlstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/sqlstore"
)

// TestNotifyOnlyWhenWaiting (issue 18): PostgreSQL serializes the commits
// of notifying transactions on one server-wide lock, so a release sends
// NOTIFY only when a waiter is queued, and then one notification, naming
// the lock (and the waiter), on the channel of the waiter's Store alone
// (every listening session would otherwise process it). A Store with
// WithPush(false) never notifies. Today's code notifies on every release.
func TestNotifyOnlyWhenWaiting(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgListen.migrated(t)
	listen, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer listen.Close(context.Background())
	// The channel of earlier versions, and the one of an empty queue key.
	if _, err := listen.Exec(ctx, `LISTEN simba_mutex; LISTEN "simba_mutex_"`); err != nil {
		t.Fatal(err)
	}
	heard := func() []string {
		t.Helper()
		var got []string
		for {
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			n, err := listen.WaitForNotification(wctx)
			cancel()
			if err != nil {
				return got // none for half a second: all delivered
			}
			got = append(got, n.Payload)
		}
	}
	s := pgListen.newStore(t, dsn)
	for range 20 {
		r, err := s.Acquire(ctx, "notify/solo", "a", ttl, tr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		if err := s.Release(ctx, "notify/solo", "a", r.Token); err != nil {
			t.Fatal(err)
		}
	}
	if got := heard(); len(got) != 0 {
		t.Errorf("20 uncontended releases sent %d notifications, want none: %q", len(got), got)
	}

	// queueWaiter queues contender "w" behind the holder of lock, and
	// listens on the channel of its Store: the first 8 letters of its key.
	queueWaiter := func(name string) {
		t.Helper()
		db := pgListen.open(t, dsn)
		enqueue(t, pgListen.newStore(t, dsn), db, name, "w", 1)
		var tag string
		if err := db.QueryRowContext(ctx, "SELECT left(queue, 8) FROM simba_mutex WHERE mutex = $1", name).Scan(&tag); err != nil {
			t.Fatal(err)
		}
		if _, err := listen.Exec(ctx, `LISTEN "simba_mutex_`+tag+`"`); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		store *sqlstore.Store
		mutex string
		want  int
	}{{s, "notify/waited", 1}, {pgListen.newStore(t, dsn, sqlstore.WithPush(false)), "notify/push-off", 0}} {
		r, err := c.store.Acquire(ctx, c.mutex, "a", ttl, tr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		queueWaiter(c.mutex)
		if err := c.store.Release(ctx, c.mutex, "a", r.Token); err != nil {
			t.Fatal(err)
		}
		got := heard()
		if len(got) != c.want {
			t.Errorf("%s: the release sent %d notifications (%q), want %d", c.mutex, len(got), got, c.want)
		}
		for _, p := range got {
			if !strings.HasSuffix(p, ":"+c.mutex) {
				t.Errorf("notification %q does not name %s", p, c.mutex)
			}
		}
	}
}
