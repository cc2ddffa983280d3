package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

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
			st.forget.Store(true)
			if err := l1.Release(bg); err != nil {
				t.Fatal(err)
			}
			st.forget.Store(false)
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
			st.forget.Store(true)
			if err := l1.Release(bg); err != nil {
				t.Fatal(err)
			}
			st.forget.Store(false)
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
