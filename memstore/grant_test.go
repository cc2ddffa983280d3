package memstore_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

func TestAcquireFreeGrantsFullDurations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		if rec := get(t, s, mx); rec != (lease.Record{}) {
			t.Fatalf("Get of unknown lock = %+v, want zero", rec)
		}
		rec := mustHold(t, s, mx, "a")
		want := lease.Record{OwnerID: "a", Token: 1, TTL: ttl, Transition: ttl + tr}
		if rec != want {
			t.Fatalf("Acquire = %+v, want %+v", rec, want)
		}
		time.Sleep(4 * time.Second)
		want = lease.Record{OwnerID: "a", Token: 1, TTL: ttl - 4*time.Second, Transition: ttl + tr - 4*time.Second}
		if rec := get(t, s, mx); rec != want {
			t.Fatalf("Get after 4s = %+v, want %+v", rec, want)
		}
	})
}

func TestAcquireLosesToLiveGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		mustHold(t, s, mx, "a")
		time.Sleep(ttl + time.Second) // in a's transition
		rec := mustLose(t, s, mx, "b")
		want := lease.Record{OwnerID: "a", Token: 1, TTL: 0, Transition: tr - time.Second}
		if rec != want {
			t.Fatalf("losing Acquire = %+v, want %+v", rec, want)
		}
	})
}

func TestReacquireExtendsAndKeepsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		mustHold(t, s, mx, "a")
		time.Sleep(ttl + tr - time.Millisecond) // the last moment of the grant
		rec := mustHold(t, s, mx, "a")
		want := lease.Record{OwnerID: "a", Token: 1, TTL: ttl, Transition: ttl + tr}
		if rec != want {
			t.Fatalf("retried Acquire = %+v, want %+v", rec, want)
		}
		if c := s.Inspect(mx).Counter; c != 1 {
			t.Fatalf("counter after retried Acquire = %d, want 1", c)
		}
	})
}

func TestGrantEndsExactlyAtTransitionEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		mustHold(t, s, mx, "a")
		time.Sleep(ttl + tr - time.Nanosecond)
		mustLose(t, s, mx, "b")
		time.Sleep(time.Nanosecond)
		if rec := get(t, s, mx); rec != (lease.Record{}) {
			t.Fatalf("Get at transition end = %+v, want free", rec)
		}
		if rec := mustHold(t, s, mx, "b"); rec.Token != 2 {
			t.Fatalf("takeover token = %d, want 2", rec.Token)
		}
	})
}

func TestTokensStrictlyIncreaseAcrossGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		var last uint64
		next := func(contender string) {
			t.Helper()
			rec := mustHold(t, s, mx, contender)
			if rec.Token <= last {
				t.Fatalf("grant to %s has token %d, not above %d", contender, rec.Token, last)
			}
			last = rec.Token
		}
		next("a")
		if err := s.Release(bg, mx, "a", last); err != nil {
			t.Fatal(err)
		}
		next("a") // after release: counter survives
		time.Sleep(ttl + tr)
		next("a") // same contender after its grant ended: a new grant
		time.Sleep(ttl + tr)
		next("b")
		if err := s.Release(bg, mx, "b", last); err != nil {
			t.Fatal(err)
		}
		next("b")
		if last != 5 {
			t.Fatalf("last token = %d, want 5", last)
		}
		// Tokens are per lock.
		if rec := mustHold(t, s, "other", "a"); rec.Token != 1 {
			t.Fatalf("first token of another lock = %d, want 1", rec.Token)
		}
	})
}

func TestRenewWithinTTLAndTransition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		for _, wait := range []time.Duration{time.Second, ttl, ttl + tr - time.Millisecond} {
			time.Sleep(wait)
			rec, err := s.Renew(bg, mx, "a", tok, ttl, tr)
			if err != nil {
				t.Fatalf("Renew after %v: %v", wait, err)
			}
			want := lease.Record{OwnerID: "a", Token: tok, TTL: ttl, Transition: ttl + tr}
			if plain(rec) != want {
				t.Fatalf("Renew after %v = %+v, want %+v", wait, rec, want)
			}
		}
		// Renew can change the timings.
		rec, err := s.Renew(bg, mx, "a", tok, time.Second, 0)
		if err != nil || rec.TTL != time.Second || rec.Transition != time.Second {
			t.Fatalf("Renew(1s, 0) = %+v, %v", rec, err)
		}
	})
}

func TestLateRenewNeverReacquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		time.Sleep(ttl + tr)
		rec, err := s.Renew(bg, mx, "a", tok, ttl, tr)
		wantErr(t, "late Renew", err, lease.ErrNotHeld)
		if plain(rec) != (lease.Record{}) {
			t.Fatalf("late Renew record = %+v, want free", rec)
		}
		if rec := get(t, s, mx); rec.OwnerID != "" {
			t.Fatalf("late Renew re-acquired: %+v", rec)
		}
		// With a new owner, the failed renew reports it and leaves it alone.
		nb := mustHold(t, s, mx, "b")
		rec, err = s.Renew(bg, mx, "a", tok, ttl, tr)
		wantErr(t, "stale Renew", err, lease.ErrNotHeld)
		if plain(rec) != nb {
			t.Fatalf("stale Renew record = %+v, want the new owner %+v", rec, nb)
		}
	})
}

func TestRenewNeedsContenderAndToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		time.Sleep(time.Second)
		for _, c := range []struct {
			contender string
			token     uint64
		}{{"b", tok}, {"a", tok + 1}, {"a", 0}} {
			rec, err := s.Renew(bg, mx, c.contender, c.token, ttl, tr)
			wantErr(t, "Renew("+c.contender+")", err, lease.ErrNotHeld)
			if rec.OwnerID != "a" || rec.Token != tok || rec.TTL != ttl-time.Second {
				t.Fatalf("failed Renew changed or misreported the grant: %+v", rec)
			}
		}
		if _, err := s.Renew(bg, "unknown", "a", tok, ttl, tr); err == nil {
			t.Fatal("Renew of an unknown lock succeeded")
		}
	})
}

func TestReleaseFreesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		if err := s.Release(bg, mx, "a", tok); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if rec := get(t, s, mx); rec != (lease.Record{}) {
			t.Fatalf("Get after Release = %+v, want free", rec)
		}
		wantErr(t, "second Release", s.Release(bg, mx, "a", tok), lease.ErrNotHeld)
		if _, err := s.Renew(bg, mx, "a", tok, ttl, tr); err == nil {
			t.Fatal("Renew after Release succeeded")
		}
	})
}

func TestStaleReleaseLeavesOwnerAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		old := mustHold(t, s, mx, "a").Token
		time.Sleep(ttl + tr)
		nb := mustHold(t, s, mx, "b")
		cases := []struct {
			contender string
			token     uint64
		}{{"a", old}, {"a", nb.Token}, {"c", nb.Token}, {"b", old}, {"b", 0}}
		for _, c := range cases {
			err := s.Release(bg, mx, c.contender, c.token)
			wantErr(t, "stale Release", err, lease.ErrNotHeld)
			if rec := get(t, s, mx); rec.OwnerID != "b" || rec.Token != nb.Token {
				t.Fatalf("Release(%s, %d) disturbed the owner: %+v", c.contender, c.token, rec)
			}
		}
	})
}

func TestWithClockDecidesExpiry(t *testing.T) {
	clock := &manualClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := memstore.New(memstore.WithClock(clock.Now), memstore.WithClock(nil))
	tok := mustHold(t, s, mx, "a").Token
	clock.Advance(ttl)
	if rec := get(t, s, mx); rec.TTL != 0 || rec.Transition != tr {
		t.Fatalf("Get after ttl on the server clock = %+v", rec)
	}
	clock.Advance(tr)
	if _, err := s.Renew(bg, mx, "a", tok, ttl, tr); err == nil {
		t.Fatal("Renew after the server's transition end succeeded")
	}
	clock.Advance(-time.Hour) // a server clock step back cannot resurrect the grant
	if rec := mustHold(t, s, mx, "b"); rec.Token != 2 {
		t.Fatalf("takeover token = %d, want 2", rec.Token)
	}
}
