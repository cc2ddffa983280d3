package memstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

func TestFaultHangIgnoresContextUntilHealed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		defer s.Heal() // lets a failing test end without a stuck goroutine
		s.FailContender("a", memstore.FaultHang)
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		done := make(chan struct{})
		var rec lease.Record
		var err error
		go func() {
			defer close(done)
			rec, err = s.Acquire(ctx, mx, "a", ttl, tr)
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("hung Acquire returned")
		default:
		}
		if ctx.Err() == nil {
			t.Fatal("the caller's deadline did not fire")
		}
		if st := s.Inspect(mx); st.Owner != "" {
			t.Fatalf("hung Acquire applied early: %+v", st)
		}
		mustHold(t, s, mx, "b") // other contenders are not hung
		s.Heal()
		<-done
		// Released late, the request runs as it arrives now.
		if err != nil || rec.OwnerID != "b" {
			t.Fatalf("late Acquire = %+v, %v; want it to lose to b", rec, err)
		}
	})
}

func TestHungRenewRunsLateAndIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		tok := mustHold(t, s, mx, "a").Token
		defer s.Heal()
		s.FailContender("a", memstore.FaultHang)
		errc := make(chan error, 1)
		go func() {
			_, err := s.Renew(bg, mx, "a", tok, ttl, tr)
			errc <- err
		}()
		time.Sleep(ttl + tr)
		nb := mustHold(t, s, mx, "b")
		s.SetFault(func(memstore.Op, string, string) memstore.Fault { return memstore.FaultNone })
		wantErr(t, "late Renew", <-errc, lease.ErrNotHeld)
		if rec := get(t, s, mx); rec.OwnerID != "b" || rec.Token != nb.Token {
			t.Fatalf("late Renew disturbed the new owner: %+v", rec)
		}
	})
}

func TestHungCallAsksTheNewFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		defer s.Heal()
		s.FailContender("a", memstore.FaultHang)
		errc := make(chan error, 1)
		go func() {
			_, err := s.Acquire(bg, mx, "a", ttl, tr)
			errc <- err
		}()
		synctest.Wait()
		s.FailContender("a", memstore.FaultFail)
		wantErr(t, "re-faulted Acquire", <-errc, memstore.ErrInjected)
		if st := s.Inspect(mx); st.Owner != "" {
			t.Fatalf("failed Acquire applied: %+v", st)
		}
	})
}

func TestFaultHangCtxEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		s.SetFault(func(op memstore.Op, _, _ string) memstore.Fault {
			if op == memstore.OpAcquire {
				return memstore.FaultHangCtx
			}
			return memstore.FaultNone
		})
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		defer cancel()
		start := time.Now()
		_, err := s.Acquire(ctx, mx, "a", ttl, tr)
		wantErr(t, "Acquire", err, context.DeadlineExceeded)
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("returned after %v, want 2s", d)
		}
		if st := s.Inspect(mx); st.Owner != "" {
			t.Fatalf("FaultHangCtx applied the call: %+v", st)
		}
		get(t, s, mx) // other operations run
	})
}

func TestFaultFailAppliesNothing(t *testing.T) {
	s := memstore.New()
	tok := mustHold(t, s, mx, "a").Token
	mustLose(t, s, mx, "b")
	s.SetFault(func(memstore.Op, string, string) memstore.Fault { return memstore.FaultFail })
	_, err := s.Acquire(bg, mx, "c", ttl, tr)
	wantErr(t, "Acquire", err, memstore.ErrInjected)
	_, err = s.Renew(bg, mx, "a", tok, ttl, tr)
	wantErr(t, "Renew", err, memstore.ErrInjected)
	_, err = s.RenewMany(bg, []lease.RenewRequest{{Name: mx, Contender: "a", Token: tok, TTL: ttl, Transition: tr}})
	wantErr(t, "RenewMany", err, memstore.ErrInjected)
	wantErr(t, "Release", s.Release(bg, mx, "b", 0), memstore.ErrInjected)
	wantErr(t, "Release", s.Release(bg, mx, "a", tok), memstore.ErrInjected)
	_, err = s.Get(bg, mx)
	wantErr(t, "Get", err, memstore.ErrInjected)
	ch, err := s.Watch(bg, mx, "")
	wantErr(t, "Watch", err, memstore.ErrInjected)
	if ch != nil {
		t.Fatal("failed Watch returned a channel")
	}
	st := s.Inspect(mx)
	if st.Owner != "a" || st.Token != tok || len(st.Queue) != 1 || st.Watchers != 0 {
		t.Fatalf("failed calls changed the state: %+v", st)
	}
	s.SetFault(func(memstore.Op, string, string) memstore.Fault { return memstore.Fault(42) })
	_, err = s.Get(bg, mx)
	wantErr(t, "unknown fault", err, memstore.ErrInjected)
}

func TestFaultLoseReplyAppliesThenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		s.FailContender("a", memstore.FaultLoseReply)
		rec, err := s.Acquire(bg, mx, "a", ttl, tr)
		wantErr(t, "Acquire", err, memstore.ErrInjected)
		if rec != (lease.Record{}) {
			t.Fatalf("lost reply returned %+v", rec)
		}
		if st := s.Inspect(mx); st.Owner != "a" || st.Token != 1 {
			t.Fatalf("lost Acquire was not applied: %+v", st)
		}
		time.Sleep(time.Second)
		_, err = s.Renew(bg, mx, "a", 1, ttl, tr)
		wantErr(t, "Renew", err, memstore.ErrInjected)
		if st := s.Inspect(mx); st.TTL != ttl {
			t.Fatalf("lost Renew was not applied: %+v", st)
		}
		time.Sleep(time.Second)
		_, err = s.RenewMany(bg, []lease.RenewRequest{{Name: mx, Contender: "a", Token: 1, TTL: ttl, Transition: tr}})
		wantErr(t, "RenewMany", err, memstore.ErrInjected)
		if st := s.Inspect(mx); st.TTL != ttl {
			t.Fatalf("lost RenewMany was not applied: %+v", st)
		}
		ctx, cancel := context.WithCancel(bg)
		_, err = s.Watch(ctx, mx, "a")
		wantErr(t, "Watch", err, memstore.ErrInjected)
		if st := s.Inspect(mx); st.Watchers != 1 {
			t.Fatalf("lost Watch was not applied: %+v", st)
		}
		cancel()
		synctest.Wait()
		if st := s.Inspect(mx); st.Watchers != 0 {
			t.Fatalf("lost Watch outlived its context: %+v", st)
		}

		s.Heal()
		// The retry after a lost reply is idempotent: same grant, same token.
		if rec := mustHold(t, s, mx, "a"); rec.Token != 1 {
			t.Fatalf("retried Acquire token = %d, want 1", rec.Token)
		}
		s.FailContender("a", memstore.FaultLoseReply)
		wantErr(t, "Release", s.Release(bg, mx, "a", 1), memstore.ErrInjected)
		s.Heal()
		if rec := get(t, s, mx); rec.OwnerID != "" {
			t.Fatalf("lost Release was not applied: %+v", rec)
		}
		wantErr(t, "retried Release", s.Release(bg, mx, "a", 1), lease.ErrNotHeld)
	})
}

func TestFailContenderHitsOnlyThatContender(t *testing.T) {
	s := memstore.New()
	ta := mustHold(t, s, mx, "a").Token
	tb := mustHold(t, s, "other", "b").Token
	s.FailContender("b", memstore.FaultFail)
	mustHold(t, s, mx, "a")
	get(t, s, "other") // Get names no contender
	_, err := s.Acquire(bg, "third", "b", ttl, tr)
	wantErr(t, "b's Acquire", err, memstore.ErrInjected)

	reqs := []lease.RenewRequest{
		{Name: mx, Contender: "a", Token: ta, TTL: ttl, Transition: tr},
		{Name: "other", Contender: "b", Token: tb, TTL: ttl, Transition: tr},
	}
	_, err = s.RenewMany(bg, reqs)
	wantErr(t, "batch with one of b's requests", err, memstore.ErrInjected)
	if _, err := s.RenewMany(bg, reqs[:1]); err != nil {
		t.Fatalf("batch without b: %v", err)
	}
}

func TestDoneContextAppliesNothing(t *testing.T) {
	s := memstore.New()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := s.Acquire(ctx, mx, "a", ttl, tr)
	wantErr(t, "Acquire", err, context.Canceled)
	if st := s.Inspect(mx); st.Owner != "" {
		t.Fatalf("Acquire with a done context applied: %+v", st)
	}
	tok := mustHold(t, s, mx, "a").Token
	wantErr(t, "Release", s.Release(ctx, mx, "a", tok), context.Canceled)
	if rec := get(t, s, mx); rec.OwnerID != "a" {
		t.Fatalf("Release with a done context applied: %+v", rec)
	}
	if errors.Is(err, memstore.ErrInjected) {
		t.Fatal("a done context is not an injected fault")
	}
}
