package sqlstore_test

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
)

// TestSessionTimeZone: a session time zone far from UTC (and not a whole
// hour) shifts neither expiry nor remaining durations.
func TestSessionTimeZone(t *testing.T) {
	forAll(t, servers, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		odd := dsn + "?time_zone=%27%2B05%3A45%27"
		if d.schema == schema.Postgres {
			odd = dsn + "&timezone=Asia/Kathmandu"
		}
		shifted, plain := d.newStore(t, odd), d.newStore(t, dsn)
		check := func(s *sqlstore.Store, name string, want time.Duration) {
			t.Helper()
			r, err := s.Get(ctx, name)
			if err != nil || r.TTL > want || r.TTL < want-2*time.Second {
				t.Errorf("Get(%s) = %+v, %v; want TTL just under %v", name, r, err, want)
			}
		}
		if r, err := shifted.Acquire(ctx, "tz/a", "a", ttl, tr); err != nil || !r.Held("a") {
			t.Fatalf("Acquire on a +05:45 session = %+v, %v", r, err)
		}
		check(plain, "tz/a", ttl)
		check(shifted, "tz/a", ttl)
		if r, err := plain.Acquire(ctx, "tz/b", "b", ttl, tr); err != nil || !r.Held("b") {
			t.Fatalf("Acquire = %+v, %v", r, err)
		}
		check(shifted, "tz/b", ttl)
		if r, err := plain.Acquire(ctx, "tz/a", "b", ttl, tr); err != nil || r.OwnerID != "a" {
			t.Errorf("a UTC session took a live grant of a +05:45 session: %+v, %v", r, err)
		}
		if _, err := shifted.Renew(ctx, "tz/a", "a", 1, ttl, tr); err != nil {
			t.Errorf("Renew on the +05:45 session: %v", err)
		}
		var tz string
		q := "SELECT @@session.time_zone"
		if d.schema == schema.Postgres {
			q = "SHOW TimeZone"
		}
		if err := d.open(t, odd).QueryRowContext(ctx, q).Scan(&tz); err != nil || (tz != "+05:45" && tz != "Asia/Kathmandu") {
			t.Errorf("session time zone = %q, %v: the DSN did not set it", tz, err)
		}
	})
}

// TestWithTable: a Store on a table of another name (created from a copy
// of the migration) works and leaves simba_mutex alone.
func TestWithTable(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		f, err := schema.FS(d.schema)
		if err != nil {
			t.Fatal(err)
		}
		ups, err := fs.Glob(f, "*.up.sql")
		if err != nil {
			t.Fatal(err)
		}
		db := d.open(t, dsn)
		for _, name := range ups { // in order: the names are numbered
			up, err := fsReadFile(f, name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, strings.ReplaceAll(up, "simba_mutex", "app_locks")); err != nil {
				t.Fatalf("create app_locks from %s: %v", name, err)
			}
		}
		s := d.newStore(t, dsn, sqlstore.WithTable("app_locks"))
		r, err := s.Acquire(ctx, "m", "a", ttl, tr)
		if err != nil || !r.Held("a") {
			t.Fatalf("Acquire on app_locks = %+v, %v", r, err)
		}
		if _, err := s.Renew(ctx, "m", "a", r.Token, ttl, tr); err != nil {
			t.Errorf("Renew: %v", err)
		}
		if err := s.Release(ctx, "m", "a", r.Token); err != nil {
			t.Errorf("Release: %v", err)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM simba_mutex WHERE mutex <> ''").Scan(&n); err != nil || n != 0 {
			t.Errorf("simba_mutex has %d rows (%v), want 0", n, err)
		}
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM app_locks WHERE mutex <> ''").Scan(&n); err != nil || n != 1 {
			t.Errorf("app_locks has %d rows (%v), want 1", n, err)
		}
		missing := d.newStore(t, dsn, sqlstore.WithTable("no_such_table"))
		if _, err := missing.Acquire(ctx, "m", "a", ttl, tr); err == nil {
			t.Error("Acquire on a missing table succeeded")
		}
	})
}

// TestTokensSurviveRestart: after a server restart the next grant's token
// is greater than every earlier one, and the old grant still holds.
func TestTokensSurviveRestart(t *testing.T) {
	for _, c := range []struct {
		d       dialect
		private func(testing.TB) *testserver.SQLServer
	}{{postgres, testserver.PrivatePostgres}, {mysqlDB, testserver.PrivateMySQL}} {
		t.Run(c.d.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv := c.private(t)
			c.d.migrate(t, srv.DSN())
			s := c.d.newStore(t, srv.DSN())
			var last uint64
			for i := range 3 {
				r, err := s.Acquire(ctx, "restart", fmt.Sprint("c", i), ttl, tr)
				if err != nil || r.Token <= last {
					t.Fatalf("Acquire %d = %+v, %v", i, r, err)
				}
				last = r.Token
				if i < 2 {
					if err := s.Release(ctx, "restart", fmt.Sprint("c", i), r.Token); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := srv.Restart(); err != nil {
				t.Fatalf("Restart: %v", err)
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var r lease.Record
			var err error
			for { // the pool's old connections fail once each
				if r, err = s.Get(rctx, "restart"); err == nil || rctx.Err() != nil {
					break
				}
			}
			if err != nil || r.OwnerID != "c2" || r.Token != last {
				t.Fatalf("Get after restart = %+v, %v; want c2 token %d", r, err, last)
			}
			if err := s.Release(ctx, "restart", "c2", last); err != nil {
				t.Fatal(err)
			}
			r, err = s.Acquire(ctx, "restart", "c3", ttl, tr)
			if err != nil || r.Token != last+1 {
				t.Errorf("Acquire after restart = %+v, %v; want token %d", r, err, last+1)
			}
		})
	}
}
