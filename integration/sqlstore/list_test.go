package sqlstore_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
)

// TestListPage (issue 21): ListPage lists the live grants by name, at most
// limit per page, each page after the last name of the one before, on
// every dialect (a custom table included on SQLite).
func TestListPage(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		s := d.newStore(t, d.migrated(t))
		if page, next, err := s.ListPage(ctx, "", 5); err != nil || len(page) != 0 || next != "" {
			t.Fatalf("ListPage of an empty table = %+v, %q, %v", page, next, err)
		}
		var want []string
		tokens := map[string]uint64{}
		for i := range 17 {
			// Names that differ in case only, and bytes above ASCII.
			name := fmt.Sprintf("list/%02d-%c", i/2, "aA"[i%2])
			if i%5 == 0 {
				name += "ü"
			}
			r, err := s.Acquire(ctx, name, "o", time.Minute, time.Second)
			if err != nil || !r.Held("o") {
				t.Fatalf("Acquire %q = %+v, %v", name, r, err)
			}
			if i%4 == 3 {
				if err := s.Release(ctx, name, "o", r.Token); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, tokens[name] = append(want, name), r.Token
		}
		var got []string
		cursor, pages := "", 0
		for {
			page, next, err := s.ListPage(ctx, cursor, 4)
			if err != nil {
				t.Fatalf("ListPage(%q): %v", cursor, err)
			}
			if pages++; len(page) > 4 || pages > 20 {
				t.Fatalf("page %d has %d names with limit 4", pages, len(page))
			}
			for _, r := range page {
				if r.OwnerID != "o" || r.Token != tokens[r.Name] || r.TTL <= 0 || r.Transition < r.TTL {
					t.Errorf("listed %q with %+v, want held by o with token %d", r.Name, r.Record, tokens[r.Name])
				}
				got = append(got, r.Name)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.IsSorted(got) || !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("listed %q, want %q", got, slices.Sorted(slices.Values(want)))
		}
		for _, limit := range []int{0, -3} {
			if _, _, err := s.ListPage(ctx, "", limit); !errors.Is(err, lease.ErrInvalidArgument) {
				t.Errorf("ListPage(limit %d): %v, want ErrInvalidArgument", limit, err)
			}
		}
	})
}
