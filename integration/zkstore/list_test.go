package zkstore_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/zkstore"
)

// TestListPage (issue 21): ListPage finds every lock with an owner under
// the root, by name, at most limit per page, and no free one nor one of
// another root.
func TestListPage(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	sess := connect(t, srv.Servers(), tckSession)
	s := newStore(t, sess, srv.Root()+"/list")
	other := newStore(t, sess, srv.Root()+"/other")
	ctx := t.Context()

	if page, next, err := s.ListPage(ctx, "", 5); err != nil || len(page) != 0 || next != "" {
		t.Fatalf("ListPage before the root exists = %v, %q, %v", page, next, err)
	}
	const n, freed = 23, 4
	want := map[string]uint64{}
	for i := range n {
		name := fmt.Sprintf("list/%02d-ü x", i)
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
		t.Fatalf("Acquire under the other root = %+v, %v", rec, err)
	} else {
		t.Cleanup(func() { _ = other.Release(ctx, "list/other", "c", rec.Token) })
	}

	got := map[string]uint64{}
	var order []string
	cursor, pages := "", 0
	for {
		page, next, err := s.ListPage(ctx, cursor, 5)
		if err != nil {
			t.Fatalf("ListPage(%q): %v", cursor, err)
		}
		pages++
		if len(page) > 5 {
			t.Errorf("a page of %d with limit 5", len(page))
		}
		for _, r := range page {
			if r.OwnerID != "c" || r.Transition <= 0 {
				t.Errorf("listed %q with record %+v, want held by c", r.Name, r.Record)
			}
			got[r.Name] = r.Token
			order = append(order, r.Name)
		}
		if next == "" {
			break
		}
		if pages > 100 {
			t.Fatal("ListPage does not end")
		}
		cursor = next
	}
	if !maps.Equal(got, want) || !slices.IsSorted(order) {
		t.Errorf("listed %v, want the %d held ones by name: %v", order, len(want), slices.Sorted(maps.Keys(want)))
	}
	if pages < 4 {
		t.Errorf("%d names came in %d pages with limit 5", n, pages)
	}
	for _, limit := range []int{0, -1} {
		if _, _, err := s.ListPage(ctx, "", limit); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("ListPage(limit %d): %v, want ErrInvalidArgument", limit, err)
		}
	}
	var _ lease.Lister = (*zkstore.Store)(nil)
}
