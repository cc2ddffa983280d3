package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
)

// TestRenewMany (issue 18): one Store renews many grants in one statement
// per chunk of 500 (on MySQL and SQLite an UPDATE and a read), in order,
// with per-grant results: a stale token, an unknown lock and a token of 0
// are ErrNotHeld and change nothing; the others are renewed.
func TestRenewMany(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		if d.name == "mysql" {
			dsn += "?interpolateParams=true" // one round trip per statement, as the package advises
		}
		db, rt := countingDB(t, d, dsn)
		s, err := d.store(db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		const n = 600 // two chunks
		short := 5 * time.Second
		reqs := make([]lease.RenewRequest, 0, n+3)
		for i := range n {
			name := fmt.Sprint("batch/", i)
			r, err := s.Acquire(ctx, name, "a", short, short)
			if err != nil || !r.Held("a") {
				t.Fatalf("Acquire(%s) = %+v, %v", name, r, err)
			}
			reqs = append(reqs, lease.RenewRequest{Name: name, Contender: "a", Token: r.Token, TTL: ttl, Transition: tr})
		}
		reqs[7].Token++ // stale
		reqs = append(reqs,
			lease.RenewRequest{Name: "batch/unknown", Contender: "a", Token: 1, TTL: ttl, Transition: tr},
			lease.RenewRequest{Name: "batch/1", Contender: "a", Token: 0, TTL: ttl, Transition: tr},
			lease.RenewRequest{Name: "batch/2", Contender: "b", Token: reqs[2].Token, TTL: ttl, Transition: tr})
		rt.Store(0)
		res, err := s.RenewMany(ctx, reqs)
		if err != nil || len(res) != len(reqs) {
			t.Fatalf("RenewMany = %d results, %v", len(res), err)
		}
		if trips := rt.Load(); trips > 4 {
			t.Errorf("RenewMany of %d grants took %d round trips, want at most 2 per chunk", len(reqs), trips)
		}
		for i, r := range res {
			req := reqs[i]
			notHeld := i == 7 || i >= n
			switch {
			case notHeld && !errors.Is(r.Err, lease.ErrNotHeld):
				t.Errorf("result %d (%s, %s, %d) = %+v, want ErrNotHeld", i, req.Name, req.Contender, req.Token, r)
			case !notHeld && (r.Err != nil || r.Record.OwnerID != "a" || r.Record.Token != req.Token || r.Record.TTL <= short):
				t.Errorf("result %d (%s) = %+v, want renewed to about %v", i, req.Name, r, ttl)
			}
		}
		if r := res[7].Record; r.OwnerID != "a" || r.Token != reqs[7].Token-1 {
			t.Errorf("stale renewal reported %+v, want the current grant (a, %d)", r, reqs[7].Token-1)
		}
		if r, err := s.Get(ctx, "batch/7"); err != nil || r.TTL > short {
			t.Errorf("the grant of the stale renewal = %+v, %v; want it not renewed", r, err)
		}
		if r, err := s.Get(ctx, "batch/599"); err != nil || r.TTL <= short {
			t.Errorf("a grant of the second chunk = %+v, %v; want it renewed", r, err)
		}
	})
}

// TestRenewalOfManyLeases (issue 18): a Manager holding 1,000 leases
// renews them in about one statement per chunk of 500 per renewal tick,
// and opens no new connection while it holds them, on a pool that keeps
// as many idle connections as it may open (as the package documentation
// asks). Counted in the client (statements sent, connections opened):
// PostgreSQL's own counter publishes a backend's transactions up to 10 s
// late (an idle backend that published less than a second before waits
// for PGSTAT_IDLE_INTERVAL), so a burst of acquires just before a window
// lands in it (bench/'s scenario e showed 92 statements per second for
// this reason, not the Store's).
func TestRenewalOfManyLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 1,000 leases for seconds")
	}
	forAll(t, servers, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		if d.name == "mysql" {
			dsn += "?interpolateParams=true"
		}
		db, trips, conns := countingPool(t, d, dsn, 16)
		s, err := d.store(db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		const leases, ttl, tr = 1000, 3 * time.Second, 2 * time.Second // renewed every second
		m, err := lease.NewManager(s, lease.WithTTL(ttl), lease.WithTransition(tr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		held := make([]*lease.Lease, 0, leases)
		for i := range leases {
			l, err := m.Acquire(ctx, fmt.Sprint("renewal/", i))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		// Renewal ticks of different grid points may overlap on a loaded
		// machine (a RenewMany still running when the next is sent), and
		// the pool then grows by one ("1 connections opened while the
		// leases were held"). That is growth, not the churn this test is
		// about (an idle limit below the pool's size closing and opening
		// connections): a few connections made idle first serve overlaps.
		warm := make([]*sql.Conn, 0, 4)
		for range cap(warm) {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			warm = append(warm, c)
		}
		for _, c := range warm {
			_ = c.Close()
		}
		trips0, conns0, start := trips.Load(), conns.Load(), time.Now()
		time.Sleep(5 * time.Second)
		rt, opened, el := trips.Load()-trips0, conns.Load()-conns0, time.Since(start).Seconds()
		for _, l := range held {
			if err := l.Err(); err != nil {
				t.Fatalf("lease %s lost while held: %v", l.Name(), err)
			}
		}
		perLease := float64(rt) / el / leases
		t.Logf("%d statements in %.1f s (%.4f per lease per second), %d connections opened", rt, el, perLease, opened)
		if perLease > 0.01 {
			t.Errorf("%.4f statements per lease per second, want at most 0.01", perLease)
		}
		if opened != 0 {
			t.Errorf("%d connections opened while the leases were held, want none", opened)
		}
	})
}
