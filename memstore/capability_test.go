package memstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

func TestObserverSeesEveryOwnerChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		obs := watch(t, s, mx, "")
		other := watch(t, s, "other", "")
		tok := mustHold(t, s, mx, "a").Token
		wantEvent(t, "grant", obs, lease.Event{Name: mx, OwnerID: "a", Token: tok})
		mustHold(t, s, mx, "a") // extending is no change of owner
		mustLose(t, s, mx, "b")
		wantNoEvent(t, "extension and losing acquire", obs)
		release(t, s, mx, "a", tok)
		wantEvent(t, "release", obs, lease.Event{Name: mx})
		tok = mustHold(t, s, mx, "b").Token
		wantEvent(t, "hand-off grant", obs, lease.Event{Name: mx, OwnerID: "b", Token: tok})
		wantNoEvent(t, "another mutex's observer", other)
	})
}

func TestReleaseWakesOnlyTheHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.WithHandoff(0))
		tok := mustHold(t, s, mx, "a").Token
		chans := map[string][]<-chan lease.Event{}
		for _, c := range []string{"b", "c", "d"} {
			mustLose(t, s, mx, c)
			chans[c] = append(chans[c], watch(t, s, mx, c), watch(t, s, mx, c))
		}
		release(t, s, mx, "a", tok)
		for _, ch := range chans["b"] { // both of the head's subscriptions
			wantEvent(t, "head", ch, lease.Event{Name: mx})
		}
		for _, c := range []string{"c", "d"} {
			for _, ch := range chans[c] {
				wantNoEvent(t, "waiter "+c, ch)
			}
		}
		// A waiter's channel hears no grants, only its turn.
		mustHold(t, s, mx, "b")
		wantNoEvent(t, "c on b's grant", chans["c"][0])
	})
}

func TestWatchDropsWhenFullAndNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		obs := watch(t, s, mx, "")
		for i := 0; i < 5; i++ {
			tok := mustHold(t, s, mx, "a").Token
			release(t, s, mx, "a", tok)
		}
		wantEvent(t, "first event kept", obs, lease.Event{Name: mx, OwnerID: "a", Token: 1})
		wantNoEvent(t, "the rest dropped", obs)
		if cap(obs) != 1 {
			t.Fatalf("buffer %d, want 1", cap(obs))
		}
	})
}

func TestWatchClosesWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		ch, err := s.Watch(ctx, mx, "b")
		if err != nil {
			t.Fatal(err)
		}
		ch2, err := s.Watch(ctx, mx, "")
		if err != nil {
			t.Fatal(err)
		}
		if n := s.Inspect(mx).Watchers; n != 2 {
			t.Fatalf("Watchers = %d, want 2", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, c := range []<-chan lease.Event{ch, ch2} {
			if _, ok := <-c; ok {
				t.Fatal("channel got an event, want closed")
			}
		}
		if n := s.Inspect(mx).Watchers; n != 0 {
			t.Fatalf("Watchers after ctx ended = %d, want 0", n)
		}
		// Events after the end go nowhere and do not panic.
		tok := mustHold(t, s, mx, "a").Token
		release(t, s, mx, "a", tok)

		if _, err := s.Watch(ctx, mx, ""); err == nil {
			t.Fatal("Watch with a done context succeeded")
		}
	})
}

func TestWatchDoesNotEnqueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		b := watch(t, s, mx, "b")
		wantQueue(t, s, mx)
		release(t, s, mx, "a", tok)
		wantNoEvent(t, "subscriber that never queued", b)
	})
}

func TestRenewManyRenewsEachAsRenewWould(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		ta := mustHold(t, s, "m1", "a").Token
		tb := mustHold(t, s, "m2", "b").Token
		mustHold(t, s, "m3", "a")
		time.Sleep(ttl + time.Second)
		reqs := []lease.RenewRequest{
			{Name: "m1", Contender: "a", Token: ta, TTL: ttl, Transition: tr},
			{Name: "m2", Contender: "a", Token: tb, TTL: ttl, Transition: tr},         // b's grant
			{Name: "m3", Contender: "a", Token: 99, TTL: ttl, Transition: tr},         // wrong token
			{Name: "m4", Contender: "a", Token: 1, TTL: ttl, Transition: tr},          // never granted
			{Name: "", Contender: "a", Token: ta, TTL: ttl, Transition: tr},           // bad name
			{Name: "m1", Contender: "a", Token: ta, TTL: 0, Transition: tr},           // bad ttl
			{Name: "m2", Contender: "b", Token: tb, TTL: 2 * ttl, Transition: 2 * tr}, // b's, own timings
		}
		res, err := s.RenewMany(bg, reqs)
		if err != nil {
			t.Fatalf("RenewMany: %v", err)
		}
		if len(res) != len(reqs) {
			t.Fatalf("%d results for %d requests", len(res), len(reqs))
		}
		want := []lease.Record{
			{OwnerID: "a", Token: ta, TTL: ttl, Transition: ttl + tr},
			{OwnerID: "b", Token: tb, TTL: 0, Transition: tr - time.Second},
			{OwnerID: "a", Token: 1, TTL: 0, Transition: tr - time.Second},
			{},
			{},
			{},
			{OwnerID: "b", Token: tb, TTL: 2 * ttl, Transition: 2 * (ttl + tr)},
		}
		wantErrs := []error{nil, lease.ErrNotHeld, lease.ErrNotHeld, lease.ErrNotHeld,
			lease.ErrInvalidName, lease.ErrInvalidArgument, nil}
		for i := range reqs {
			if plain(res[i].Record) != want[i] {
				t.Errorf("result %d record = %+v, want %+v", i, res[i].Record, want[i])
			}
			if wantErrs[i] == nil && res[i].Err != nil {
				t.Errorf("result %d error = %v, want none", i, res[i].Err)
			}
			if wantErrs[i] != nil {
				wantErr(t, "result", res[i].Err, wantErrs[i])
			}
		}
		if got := s.Stats(); got.RenewMany != 1 || got.Renew != 0 {
			t.Fatalf("Stats = %+v, want one RenewMany round trip", got)
		}
	})
}

func TestRenewManyEmptyAndAfterTransition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		res, err := s.RenewMany(bg, nil)
		if err != nil || len(res) != 0 {
			t.Fatalf("RenewMany(nil) = %v, %v", res, err)
		}
		tok := mustHold(t, s, mx, "a").Token
		time.Sleep(ttl + tr)
		res, err = s.RenewMany(bg, []lease.RenewRequest{{Name: mx, Contender: "a", Token: tok, TTL: ttl, Transition: tr}})
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "late batch renew", res[0].Err, lease.ErrNotHeld)
		if rec := get(t, s, mx); rec.OwnerID != "" {
			t.Fatalf("late batch renew re-acquired: %+v", rec)
		}
	})
}

func TestStatsCountRoundTrips(t *testing.T) {
	s := memstore.New()
	tok := mustHold(t, s, mx, "a").Token
	mustLose(t, s, mx, "b")
	if _, err := s.Renew(bg, mx, "a", tok, ttl, tr); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RenewMany(bg, make([]lease.RenewRequest, 3)); err != nil {
		t.Fatal(err)
	}
	get(t, s, mx)
	watch(t, s, mx, "")
	release(t, s, mx, "a", tok)
	s.FailContender("b", memstore.FaultFail)
	_ = s.Release(bg, mx, "b", 0)            // faulted calls count
	_, _ = s.Acquire(bg, "", "b", ttl, tr)   // invalid input does not
	_, _ = s.Renew(bg, mx, "", tok, ttl, tr) // nor here
	_ = s.Release(bg, mx, "a", tok)          // ErrNotHeld counts
	want := memstore.Stats{Acquire: 2, Renew: 1, RenewMany: 1, Release: 3, Get: 1, Watch: 1}
	if got := s.Stats(); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
	if got := s.Stats().Total(); got != 9 {
		t.Fatalf("Total = %d, want 9", got)
	}
	s.ResetStats()
	if got := s.Stats(); got != (memstore.Stats{}) {
		t.Fatalf("Stats after reset = %+v", got)
	}
	s.Inspect(mx) // back doors are not round trips
	s.Mutexes()
	if got := s.Stats(); got != (memstore.Stats{}) {
		t.Fatalf("back doors counted: %+v", got)
	}
}
