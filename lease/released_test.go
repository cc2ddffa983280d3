package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// forgetfulStore acknowledges releases it drops while forget is set, as a
// Redis replica promoted before a release reached it, or a server
// restarted from a snapshot taken before it, acknowledges a release and
// then knows only the grant.
type forgetfulStore struct {
	*memstore.Store
	forget atomic.Bool
}

func (s *forgetfulStore) Release(ctx context.Context, name, contender string, token uint64) error {
	if s.forget.Load() && token != 0 {
		return nil
	}
	return s.Store.Release(ctx, name, contender, token)
}

// releaseForgotten releases l on st, which acknowledges and forgets it.
func releaseForgotten(t *testing.T, st *forgetfulStore, l *lease.Lease) {
	t.Helper()
	st.forget.Store(true)
	defer st.forget.Store(false)
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
}

// TestReleasedGrantNeverComesBack: a grant the Manager released, that the
// store forgot it released, is not handed out again under the same token:
// the next Acquire, through the caller's fast path or through a Contender's
// worker, gives it back and gets a newer token. It was handed out again:
// two leases, one after the other, under token 1.
func TestReleasedGrantNeverComesBack(t *testing.T) {
	t.Run("Acquire", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &forgetfulStore{Store: memstore.New()}
			m := newMgr(t, st, "a")
			l1 := mustAcquire(t, m, "job")
			releaseForgotten(t, st, l1)
			l2 := mustAcquire(t, m, "job")
			if l2.Token() <= l1.Token() {
				t.Fatalf("after releasing token %d the Manager was granted token %d", l1.Token(), l2.Token())
			}
			if err := l2.Release(bg); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("TryAcquire", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &forgetfulStore{Store: memstore.New()}
			m := newMgr(t, st, "a")
			l1 := mustAcquire(t, m, "job")
			releaseForgotten(t, st, l1)
			l2, err := m.TryAcquire(bg, "job")
			if err == nil && l2.Token() <= l1.Token() {
				t.Fatalf("after releasing token %d TryAcquire was granted token %d", l1.Token(), l2.Token())
			}
			if err != nil && !errors.Is(err, lease.ErrNotAcquired) {
				t.Fatalf("TryAcquire: %v", err)
			}
			synctest.Wait() // a worker gives the stale grant back
			if rec, _ := st.Get(bg, "job"); rec.OwnerID != "" && rec.Token <= l1.Token() {
				t.Errorf("the stale grant %+v is left on the store", rec)
			}
		})
	})
	t.Run("Contender", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &forgetfulStore{Store: memstore.New()}
			m := newMgr(t, st, "a")
			tokens := make(chan uint64, 4)
			var terms atomic.Int32
			c, err := m.Contend("job", lease.Callbacks{
				OnAcquired: func(ctx context.Context, l *lease.Lease) {
					tokens <- l.Token()
					if terms.Add(1) == 1 {
						st.forget.Store(true)
						_ = l.Release(ctx)
						st.forget.Store(false)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			first, second := <-tokens, <-tokens
			if second <= first {
				t.Errorf("the Contender led under token %d, then again under %d", first, second)
			}
			if err := c.Stop(bg); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// lostReplies is a forgetfulStore whose Acquire, while lose is set, runs
// on the store and then fails, as a call whose reply was lost (a cut
// connection, a WAIT that timed out during a failover): the store extended
// the caller's grant, and the caller did not hear of it.
type lostReplies struct {
	forgetfulStore
	lose atomic.Bool
}

func (s *lostReplies) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	rec, err := s.Store.Acquire(ctx, name, contender, ttl, transition)
	if s.lose.Load() {
		return lease.Record{}, errors.New("reply lost")
	}
	return rec, err
}

// TestReleasedGrantKeptAliveByRetries: after a release the store forgot,
// attempts whose replies were lost keep extending the released grant on
// the store (an Acquire by the holder extends its grant), beyond ttl +
// transition after the release; when a reply finally comes, it is still
// that grant, and the Manager must not take it under its old token. It
// did: make chaos (sqlite lane 1, redis-replica lane 0) granted a token
// twice to the same contender, 7 s apart.
func TestReleasedGrantKeptAliveByRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &lostReplies{forgetfulStore: forgetfulStore{Store: memstore.New()}}
		m := newMgr(t, st, "a")
		l1 := mustAcquire(t, m, "job")
		releaseForgotten(t, &st.forgetfulStore, l1)
		st.lose.Store(true)
		go func() {
			time.Sleep(3 * (tTTL + tTransition))
			st.lose.Store(false)
		}()
		l2 := mustAcquire(t, m, "job")
		if l2.Token() <= l1.Token() {
			t.Fatalf("after releasing token %d the Manager was granted token %d, which its retries had kept alive", l1.Token(), l2.Token())
		}
		if err := l2.Release(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLostGrantNeverComesBack: a lease lost at its deadline is given back
// to the store; when the store forgot that, and its clock stepped back
// (the grant lives on past every local window), the grant must still not
// come back under its token. It did (make chaos on SQLite, with the
// server's clock stepped back by more than the margin).
func TestLostGrantNeverComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &forgetfulStore{Store: memstore.New()}
		m := newMgr(t, st, "a")
		l1 := mustAcquire(t, m, "job")
		st.forget.Store(true)
		st.SetFault(func(op memstore.Op, _, _ string) memstore.Fault {
			if op == memstore.OpRenew || op == memstore.OpRenewMany {
				return memstore.FaultFail
			}
			return memstore.FaultNone
		})
		<-l1.Done()
		synctest.Wait() // the slot gives the lost grant back, and the store forgets it
		st.SetFault(nil)
		st.forget.Store(false)
		st.StepClock(-4 * (tTTL + tTransition))
		time.Sleep(2 * (tTTL + tTransition))
		l2 := mustAcquire(t, m, "job")
		if l2.Token() <= l1.Token() {
			t.Fatalf("after losing token %d the Manager was granted token %d again", l1.Token(), l2.Token())
		}
		if err := l2.Release(bg); err != nil {
			t.Fatal(err)
		}
	})
}
