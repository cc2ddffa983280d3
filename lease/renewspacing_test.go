package lease_test

// Renewals are spaced: a store that confirms a renewal without extending
// the grant must not make the holder renew faster and faster toward its
// deadline (each renewal at a third of the time left: 16 renewals in the
// last 1.25 s in real time, and no end inside a synctest bubble, where the
// time left shrinks to nothing without the clock moving).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// runaway is the renewal count at which a test store refuses the grant,
// which ends a lease that renews without end.
const runaway = 100

// unextended confirms a renewal of the live grant without extending it,
// and says so honestly: its record reports the time the grant has left.
// It keeps when each renewal was sent.
type unextended struct {
	*memstore.Store
	mu   sync.Mutex
	sent []time.Time
}

func (s *unextended) renew(ctx context.Context, name, contender string, token uint64) (lease.Record, error) {
	s.mu.Lock()
	s.sent = append(s.sent, time.Now())
	n := len(s.sent)
	s.mu.Unlock()
	if n >= runaway {
		return lease.Record{}, fmt.Errorf("test store: %d renewals: %w", n, lease.ErrNotHeld)
	}
	rec, err := s.Store.Get(ctx, name)
	if err != nil || rec.OwnerID != contender || rec.Token != token {
		return rec, fmt.Errorf("test store: renew of a grant it does not hold: %w", lease.ErrNotHeld)
	}
	return rec, nil
}

func (s *unextended) Renew(ctx context.Context, name, contender string, token uint64, _, _ time.Duration) (lease.Record, error) {
	return s.renew(ctx, name, contender, token)
}

func (s *unextended) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	res := make([]lease.RenewResult, len(reqs))
	for i, r := range reqs {
		res[i].Record, res[i].Err = s.renew(ctx, r.Name, r.Contender, r.Token)
	}
	return res, nil
}

func (s *unextended) renewals() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.sent...)
}

// TestRenewalsSpacedWhenNotExtended (rule 3): when the store confirms
// renewals without extending the grant, the holder keeps renewing, never
// sooner than ttl/12 after the last renewal was sent, and the lease ends
// at its deadline, the one the acquire set: a handful of renewals, not one
// per third of the time left; with single and batch renewals.
func TestRenewalsSpacedWhenNotExtended(t *testing.T) {
	bothRenewalPaths(t, func(t *testing.T, batch bool) {
		ms := memstore.New()
		st := &unextended{Store: ms}
		var store lease.Store = st
		if !batch {
			store = noBatch{Store: st, Watcher: ms}
		}
		m := newMgr(t, store, "a")
		t0 := time.Now()
		l := mustAcquire(t, m, "job")
		<-l.Done()
		if got := time.Since(t0); got != tDeadline || !errors.Is(l.Err(), lease.ErrLost) {
			t.Errorf("the lease ended %v after the acquire (%v), want lost at its deadline, %v", got, l.Err(), tDeadline)
		}
		sent := st.renewals()
		gap := tTTL / 12
		prev := t0
		for i, at := range sent {
			if d := at.Sub(prev); d < gap {
				t.Errorf("renewal %d sent %v after the previous send, want at least ttl/12 = %v", i+1, d, gap)
				break
			}
			prev = at
		}
		if len(sent) < 2 || len(sent) > int(tDeadline/gap) {
			t.Errorf("%d renewals before the deadline, want from 2 to %d (at least ttl/12 apart)", len(sent), tDeadline/gap)
		}
	})
}

// TestShortGrantsStillRenewed (rule 3): the spacing of renewals is a
// fraction of the lease's own grant, not of ttl: a store that grants every
// time less than asked, leaving less than ttl/12 after the safety margin,
// still has the lease renewed in time (at a third of what is left), for as
// long as the holder keeps it.
func TestShortGrantsStillRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &capped{Store: memstore.New(), limit: 600 * time.Millisecond} // 100ms after the safety margin of 500ms
		m := newMgr(t, noBatch{Store: st, Watcher: st}, "a")
		l := mustAcquire(t, m, "job")
		time.Sleep(10 * time.Second)
		if !l.Held() {
			t.Fatalf("the lease on a store granting 600ms at a time was lost (%v): renewals came too late", l.Err())
		}
		if n := st.Stats().Renew; n < 100 {
			t.Errorf("%d renewals in 10s of grants that leave 100ms each, want about one every 33ms", n)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	})
}
