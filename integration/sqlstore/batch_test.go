package sqlstore_test

import (
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
