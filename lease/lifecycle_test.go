package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// S9: an acquire whose reply was lost after the store applied it is
// retried into the same grant; nothing is orphaned after release.
func TestAcquireReplyLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		lost := true
		st.SetFault(func(op memstore.Op, _, _ string) memstore.Fault {
			if op == memstore.OpAcquire && lost {
				lost = false
				return memstore.FaultLoseReply
			}
			return memstore.FaultNone
		})
		l := mustAcquire(t, m, "job")
		if l.Token() != 1 {
			t.Errorf("token %d after a retried acquire, want the applied grant's 1", l.Token())
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		if s := st.Inspect("job"); s.Owner != "" || len(s.Queue) != 0 {
			t.Errorf("after release: %+v, want free with an empty queue", s)
		}
	})
}

// A TryAcquire whose outcome is unknown returns the error, and the grant
// it may have made is given back.
func TestTryAcquireUnknownOutcomeIsCleanedUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		st.SetFault(func(op memstore.Op, _, _ string) memstore.Fault {
			if op == memstore.OpAcquire {
				return memstore.FaultLoseReply
			}
			return memstore.FaultNone
		})
		_, err := m.TryAcquire(bg, "job")
		if err == nil || errors.Is(err, lease.ErrNotAcquired) || !errors.Is(err, memstore.ErrInjected) {
			t.Fatalf("TryAcquire with a lost reply: %v, want the store error", err)
		}
		synctest.Wait()
		if s := st.Inspect("job"); s.Owner != "" {
			t.Errorf("grant of unknown outcome left behind: %+v", s)
		}
	})
}

// A cancelled waiter returns both errors and leaves the store queue.
func TestAcquireCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newMgr(t, st, "a")
		b := newMgr(t, st, "b")
		lb := mustAcquire(t, b, "job")
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		defer cancel()
		_, err := a.Acquire(ctx, "job")
		if !errors.Is(err, lease.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled Acquire: %v, want ErrNotAcquired and DeadlineExceeded", err)
		}
		synctest.Wait()
		if q := st.Inspect("job").Queue; len(q) != 0 {
			t.Errorf("cancelled waiter still queued: %v", q)
		}
		_ = lb.Release(bg)
	})
}

// Close releases what the Manager holds, fails its waiters, ends its
// watches, and another Manager gets the lock at once.
func TestCloseReleasesEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a, err := lease.NewManager(st, lease.WithContenderID("a"), lease.WithTTL(tTTL), lease.WithTransition(tTransition))
		if err != nil {
			t.Fatal(err)
		}
		b := newMgr(t, st, "b")
		held := mustAcquire(t, a, "held")
		other := mustAcquire(t, b, "other")
		waitErr := make(chan error, 1)
		go func() { _, err := a.Acquire(bg, "other"); waitErr <- err }()
		owners, err := a.Watch(bg, "held")
		if err != nil {
			t.Fatal(err)
		}
		<-owners
		synctest.Wait()
		closedAt := time.Now()
		if err := a.Close(bg); err != nil {
			t.Fatal(err)
		}
		if err := <-waitErr; !errors.Is(err, lease.ErrClosed) {
			t.Errorf("waiting Acquire after Close: %v, want ErrClosed", err)
		}
		if !errors.Is(held.Err(), lease.ErrReleased) {
			t.Errorf("held lease after Close: %v, want ErrReleased", held.Err())
		}
		for range owners {
		}
		l := mustAcquire(t, b, "held")
		if time.Since(closedAt) != 0 {
			t.Errorf("lock free %v after Close, want at once", time.Since(closedAt))
		}
		_ = l.Release(bg)
		_ = other.Release(bg)
		if _, err := a.Acquire(bg, "x"); !errors.Is(err, lease.ErrClosed) {
			t.Errorf("Acquire after Close: %v, want ErrClosed", err)
		}
	})
}
