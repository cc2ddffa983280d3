package sqlstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/sqlstore"
)

const (
	ttl = 10 * time.Second
	tr  = 6 * time.Second
)

// TestGrantRenewRelease walks one lock through the contract: grant,
// extension, a loser, renew, stale renew/release, release, a new grant
// with a greater token.
func TestGrantRenewRelease(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		s := d.newStore(t, d.migrated(t))
		const mx = "jobs/nightly"

		a, err := s.Acquire(ctx, mx, "a", ttl, tr)
		if err != nil || a.OwnerID != "a" || a.Token != 1 {
			t.Fatalf("first Acquire = %+v, %v; want owner a token 1", a, err)
		}
		if a.TTL <= ttl-time.Second || a.TTL > ttl || a.Transition <= ttl+tr-time.Second || a.Transition > ttl+tr {
			t.Errorf("first grant remaining %v/%v, want about %v/%v", a.TTL, a.Transition, ttl, ttl+tr)
		}
		if again, err := s.Acquire(ctx, mx, "a", ttl, tr); err != nil || again.OwnerID != "a" || again.Token != a.Token {
			t.Errorf("Acquire by the holder = %+v, %v; want the same grant extended", again, err)
		}
		if b, err := s.Acquire(ctx, mx, "b", ttl, tr); err != nil || b.OwnerID != "a" || b.Token != a.Token || b.TTL <= 0 {
			t.Errorf("Acquire by another = %+v, %v; want a's record, no error", b, err)
		}
		if r, err := s.Renew(ctx, mx, "a", a.Token, ttl, tr); err != nil || r.OwnerID != "a" || r.Token != a.Token {
			t.Errorf("Renew = %+v, %v", r, err)
		}
		for _, c := range []struct {
			who   string
			token uint64
		}{{"b", a.Token}, {"a", a.Token + 1}, {"a", 0}, {"A", a.Token}} {
			if r, err := s.Renew(ctx, mx, c.who, c.token, ttl, tr); !errors.Is(err, lease.ErrNotHeld) || r.OwnerID != "a" {
				t.Errorf("Renew(%s, %d) = %+v, %v; want ErrNotHeld with a's record", c.who, c.token, r, err)
			}
			if err := s.Release(ctx, mx, c.who, c.token); !errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("Release(%s, %d) = %v; want ErrNotHeld", c.who, c.token, err)
			}
		}
		if err := s.Release(ctx, mx, "a", a.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := s.Release(ctx, mx, "a", a.Token); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("second Release = %v, want ErrNotHeld", err)
		}
		if r, err := s.Get(ctx, mx); err != nil || r != (lease.Record{ServerTime: r.ServerTime}) {
			t.Errorf("Get after release = %+v, %v; want a free lock", r, err)
		}
		if _, err := s.Renew(ctx, mx, "a", a.Token, ttl, tr); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("Renew after release = %v, want ErrNotHeld (a late renew never re-acquires)", err)
		}
		b, err := s.Acquire(ctx, mx, "b", ttl, tr)
		if err != nil || b.OwnerID != "b" || b.Token != a.Token+1 {
			t.Errorf("Acquire after release = %+v, %v; want b with token %d", b, err, a.Token+1)
		}
		if r, err := s.Get(ctx, "never/used"); err != nil || r != (lease.Record{ServerTime: r.ServerTime}) {
			t.Errorf("Get of an unknown lock = %+v, %v", r, err)
		}
	})
}

// TestExpiry: a grant whose transition ended is free (Get), cannot be
// renewed, and goes to anyone with a new token — also to its old holder.
func TestExpiry(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		s := d.newStore(t, d.migrated(t))
		a, err := s.Acquire(ctx, "m", "a", 50*time.Millisecond, 50*time.Millisecond)
		if err != nil || a.OwnerID != "a" {
			t.Fatalf("Acquire = %+v, %v", a, err)
		}
		time.Sleep(150 * time.Millisecond)
		if r, err := s.Get(ctx, "m"); err != nil || r.OwnerID != "" {
			t.Errorf("Get after the transition = %+v, %v; want free", r, err)
		}
		if _, err := s.Renew(ctx, "m", "a", a.Token, ttl, tr); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("Renew after the transition = %v, want ErrNotHeld", err)
		}
		if err := s.Release(ctx, "m", "a", a.Token); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("Release after the transition = %v, want ErrNotHeld", err)
		}
		again, err := s.Acquire(ctx, "m", "a", ttl, tr)
		if err != nil || again.OwnerID != "a" || again.Token != a.Token+1 {
			t.Errorf("re-Acquire after expiry = %+v, %v; want a new grant with token %d", again, err, a.Token+1)
		}
	})
}

// TestNamesAreBytes: names (and owners) that differ only in case or
// trailing spaces are different.
func TestNamesAreBytes(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		s := d.newStore(t, d.migrated(t))
		names := []string{"lock", "Lock", "LOCK", "lock ", "lock  ", " lock", "café", "cafe\u0301", "lock\t"}
		for i, n := range names {
			owner := "owner-" + string(rune('a'+i))
			if r, err := s.Acquire(ctx, n, owner, ttl, tr); err != nil || r.OwnerID != owner || r.Token != 1 {
				t.Errorf("Acquire(%q, %s) = %+v, %v; want a first grant (collision?)", n, owner, r, err)
			}
		}
		for i, n := range names {
			if r, err := s.Get(ctx, n); err != nil || r.OwnerID != "owner-"+string(rune('a'+i)) {
				t.Errorf("Get(%q) = %+v, %v", n, r, err)
			}
		}
		if _, err := s.Renew(ctx, "lock", "OWNER-A", 1, ttl, tr); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("Renew by an owner differing in case = %v, want ErrNotHeld", err)
		}
		if _, err := s.Renew(ctx, "lock", "owner-a ", 1, ttl, tr); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("Renew by an owner with a trailing space = %v, want ErrNotHeld", err)
		}
		long := strings.Repeat("é", lease.MaxNameLength/2) + "x"
		if r, err := s.Acquire(ctx, long, "a", ttl, tr); err != nil || r.OwnerID != "a" {
			t.Errorf("Acquire of a %d-byte name = %+v, %v", len(long), r, err)
		}
	})
}

// TestBadInput: invalid names, owners and durations are refused with typed
// errors before any round trip.
func TestBadInput(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		dsn := d.migrated(t)
		s := d.newStore(t, dsn)
		for _, n := range []string{"", "a\x00b", "\xff", strings.Repeat("x", lease.MaxNameLength+1)} {
			if _, err := s.Acquire(ctx, n, "a", ttl, tr); !errors.Is(err, lease.ErrInvalidName) {
				t.Errorf("Acquire(%q) = %v, want ErrInvalidName", n, err)
			}
			if _, err := s.Get(ctx, n); !errors.Is(err, lease.ErrInvalidName) {
				t.Errorf("Get(%q) = %v, want ErrInvalidName", n, err)
			}
			if err := s.Release(ctx, n, "a", 1); !errors.Is(err, lease.ErrInvalidName) {
				t.Errorf("Release(%q) = %v, want ErrInvalidName", n, err)
			}
		}
		for _, c := range []struct {
			owner   string
			ttl, tr time.Duration
		}{{"", ttl, tr}, {"a\x00", ttl, tr}, {strings.Repeat("o", lease.MaxContenderIDLength+1), ttl, tr}, {"a", 0, tr}, {"a", ttl, -1}} {
			if _, err := s.Acquire(ctx, "m", c.owner, c.ttl, c.tr); !errors.Is(err, lease.ErrInvalidArgument) {
				t.Errorf("Acquire(owner %q, %v, %v) = %v, want ErrInvalidArgument", c.owner, c.ttl, c.tr, err)
			}
		}
		if _, err := d.store(nil); !errors.Is(err, lease.ErrInvalidArgument) {
			t.Errorf("New(nil) = %v, want ErrInvalidArgument", err)
		}
		for _, bad := range []string{"", "1abc", "a-b", "a.b.c", "a;drop", `"x"`, strings.Repeat("a", 64), "a b"} {
			if _, err := d.store(d.open(t, dsn), sqlstore.WithTable(bad)); !errors.Is(err, sqlstore.ErrInvalidTable) {
				t.Errorf("WithTable(%q) = %v, want ErrInvalidTable", bad, err)
			}
		}
	})
}

// TestContextCanceled: a cancelled call is an error, never a grant.
func TestContextCanceled(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		s := d.newStore(t, d.migrated(t))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if r, err := s.Acquire(ctx, "m", "a", ttl, tr); err == nil || r.OwnerID != "" {
			t.Errorf("Acquire with a cancelled context = %+v, %v; want an error", r, err)
		}
	})
}

// TestList: List shows the live grants by name, not released or lapsed
// ones, with their owners, tokens and remaining durations.
func TestList(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		s := d.newStore(t, d.migrated(t))
		if gs, err := s.List(ctx); err != nil || len(gs) != 0 {
			t.Fatalf("List of an empty table = %+v, %v", gs, err)
		}
		b, _ := s.Acquire(ctx, "list/b", "owner-b", ttl, tr)
		a, _ := s.Acquire(ctx, "list/a", "owner-a", ttl, tr)
		r, _ := s.Acquire(ctx, "list/released", "owner-r", ttl, tr)
		if err := s.Release(ctx, "list/released", "owner-r", r.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Acquire(ctx, "list/lapsed", "owner-l", time.Millisecond, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		gs, err := s.List(ctx)
		if err != nil || len(gs) != 2 {
			t.Fatalf("List = %+v, %v; want list/a and list/b", gs, err)
		}
		for i, want := range []struct {
			name string
			rec  lease.Record
		}{{"list/a", a}, {"list/b", b}} {
			g := gs[i]
			if g.Mutex != want.name || g.OwnerID != want.rec.OwnerID || g.Token != want.rec.Token ||
				g.TTL <= ttl-2*time.Second || g.TTL > ttl || g.Transition <= g.TTL {
				t.Errorf("List[%d] = %+v, want %s held by %s with token %d and about %v left",
					i, g, want.name, want.rec.OwnerID, want.rec.Token, ttl)
			}
		}
	})
}

// TestMissingTable: on a database whose migrations were not run, every
// operation fails with lease.ErrStoreSetup and a blocking Acquire returns
// at once instead of retrying until its context ends.
func TestMissingTable(t *testing.T) {
	forEach(t, func(t *testing.T, d dialect) {
		s := d.newStore(t, d.fresh(t))
		if _, err := s.Get(t.Context(), "m"); !errors.Is(err, lease.ErrStoreSetup) {
			t.Errorf("Get = %v, want ErrStoreSetup", err)
		}
		m, err := lease.NewManager(s, lease.WithContenderID("a"))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err = m.Acquire(ctx, "m")
		if !errors.Is(err, lease.ErrStoreSetup) || !strings.Contains(err.Error(), "migrations") {
			t.Errorf("Acquire = %v, want ErrStoreSetup that names the migrations", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Acquire took %v to fail", took)
		}
	})
}
