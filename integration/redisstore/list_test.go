package redisstore_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// TestListPage (issue 21): ListPage finds every held lock of the Store's
// prefix, a page at a time, with its record, and no free one nor one of
// another prefix; on a cluster it scans every master.
func TestListPage(t *testing.T) {
	t.Parallel()
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		srv := sharedRedis(t)
		c := dial(t, srv.Addr())
		testListPage(t, newStore(t, c, srv.KeyPrefix()+"list:", unguarded), newStore(t, c, srv.KeyPrefix()+"other:", unguarded))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		srv := sharedCluster(t)
		c := dialCluster(t, srv.Addrs())
		testListPage(t, newStore(t, c, srv.KeyPrefix()+"list:", unguarded), newStore(t, c, srv.KeyPrefix()+"other:", unguarded))
	})
}

// unguarded: the test's minute-long grants are new names, never held back
// for a restart of the shared server.
var unguarded = redisstore.WithRestartGuard(false)

func testListPage(t *testing.T, s, other *redisstore.Store) {
	ctx := t.Context()
	const n, freed = 40, 5
	want := map[string]uint64{}
	for i := range n {
		name := fmt.Sprintf("list/%02d-ü {x}*?", i)
		rec, err := s.Acquire(ctx, name, "c", time.Minute, time.Second)
		if err != nil || !rec.Held("c") {
			t.Fatalf("Acquire %q = %+v, %v", name, rec, err)
		}
		if i < freed {
			if err := s.Release(ctx, name, "c", rec.Token); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want[name] = rec.Token
		t.Cleanup(func() { _ = s.Release(ctx, name, "c", rec.Token) })
	}
	if rec, err := other.Acquire(ctx, "list/other", "c", time.Minute, time.Second); err != nil || !rec.Held("c") {
		t.Fatalf("Acquire on the other prefix = %+v, %v", rec, err)
	} else {
		t.Cleanup(func() { _ = other.Release(ctx, "list/other", "c", rec.Token) })
	}

	got := map[string]uint64{}
	cursor, pages := "", 0
	for {
		page, next, err := s.ListPage(ctx, cursor, 7)
		if err != nil {
			t.Fatalf("ListPage(%q) after %d pages: %v", cursor, pages, err)
		}
		pages++
		for _, r := range page {
			if r.OwnerID != "c" || r.TTL <= 0 || r.Transition < r.TTL {
				t.Errorf("listed %q with record %+v, want held by c", r.Name, r.Record)
			}
			got[r.Name] = r.Token
		}
		if next == "" {
			break
		}
		if pages > 10000 {
			t.Fatal("ListPage does not end")
		}
		cursor = next
	}
	if !maps.Equal(got, want) {
		t.Errorf("listed %d locks %v, want the %d held ones %v", len(got), slices.Sorted(maps.Keys(got)), len(want), slices.Sorted(maps.Keys(want)))
	}
	if pages < 2 {
		t.Errorf("%d held locks came in %d page with limit 7", len(want), pages)
	}
	for _, bad := range []struct {
		cursor string
		limit  int
	}{{"", 0}, {"", -1}, {"nonsense", 5}, {"x@127.0.0.1:1", 5}} {
		if _, _, err := s.ListPage(ctx, bad.cursor, bad.limit); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("ListPage(%q, %d): %v, want ErrInvalidArgument", bad.cursor, bad.limit, err)
		}
	}
}
