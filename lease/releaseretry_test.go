package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// lostReply applies every Release on the store, but answers the first as
// if its reply had been lost on the way back (S9: a timeout after the
// server applied): the caller cannot tell that the grant ended.
type lostReply struct {
	lease.Store
	asked atomic.Int32
}

func (s *lostReply) Release(ctx context.Context, name, contender string, token uint64) error {
	err := s.Store.Release(ctx, name, contender, token)
	if s.asked.Add(1) == 1 && err == nil {
		return context.DeadlineExceeded
	}
	return err
}

// TestReleaseRetryAfterLostReply (S9): Release retries an attempt whose
// outcome it does not know; when the retry finds the grant gone before the
// lease's deadline, the lost attempt ended it, and Release returns nil, not
// ErrNotHeld. The lock is free for the next contender.
func TestReleaseRetryAfterLostReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		st := &lostReply{Store: mem}
		m, err := lease.NewManager(st, lease.WithContenderID("a"), lease.WithTTL(tTTL), lease.WithTransition(tTransition))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(bg)
		l := mustAcquire(t, m, "x")
		if err := l.Release(bg); err != nil {
			t.Fatalf("Release whose first reply was lost after the store applied it: %v, want nil", err)
		}
		if n := st.asked.Load(); n != 2 {
			t.Fatalf("the store was asked to release %d times, want 2 (a retry)", n)
		}
		other, err := lease.NewManager(mem, lease.WithContenderID("b"), lease.WithTTL(tTTL), lease.WithTransition(tTransition))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(bg)
		if l2, err := other.TryAcquire(bg, "x"); err != nil || l2 == nil {
			t.Fatalf("another contender after the release: %v, %v; want the lock", l2, err)
		}
	})
}

// jumpClock is the system clock plus an offset a test moves forward: the
// Manager's timers, set on real durations, do not fire when it jumps.
type jumpClock struct{ off *atomic.Int64 }

func (c jumpClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }
func (c jumpClock) NewTimer(d time.Duration) lease.Timer {
	return timer{time.NewTimer(d)}
}

// TestLateReleaseIsALoss: a Release that comes after the lease's deadline,
// before the Manager's timers have ended the lease (a stalled process: the
// timers had no chance to run), reports ErrLost, as Held() already did,
// and not success or the store's ErrNotHeld; the grant, still live on the
// store, is given back all the same. Found in the TCK on ZooKeeper under
// load: "Release(…): lease: not held: zkstore: release … token 456".
func TestLateReleaseIsALoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		clk := jumpClock{new(atomic.Int64)}
		m := newMgr(t, mem, "a", lease.WithClock(clk))
		l := mustAcquire(t, m, "x")
		clk.off.Store(int64(tDeadline + time.Second)) // past the deadline; no timer fires
		if l.Held() {
			t.Fatalf("Held() past the deadline")
		}
		if err := l.Release(bg); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Release past the deadline: %v, want ErrLost", err)
		}
		if err := l.Err(); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Err() after a late Release: %v, want ErrLost", err)
		}
		if err := l.Release(bg); !errors.Is(err, lease.ErrLost) {
			t.Errorf("second Release: %v, want ErrLost", err)
		}
		other := newMgr(t, mem, "b")
		if l2, err := other.TryAcquire(bg, "x"); err != nil || l2 == nil {
			t.Fatalf("another contender after the late release: %v, %v; want the lock (the grant was given back)", l2, err)
		}
	})
}

// lapseOnRelease stands for a process that stalls while its release is on
// the way: the clock jumps past the lease's deadline, the grant lapses on
// the store (a watchdog deletes it), and the store answers ErrNotHeld.
type lapseOnRelease struct {
	lease.Store
	clk  jumpClock
	past time.Duration
}

func (s lapseOnRelease) Release(ctx context.Context, name, contender string, token uint64) error {
	s.clk.off.Store(int64(s.past))
	if err := s.Store.Release(ctx, name, contender, token); err != nil {
		return err
	}
	return fmt.Errorf("store: release %q token %d: %w", name, token, lease.ErrNotHeld)
}

// TestReleaseAnsweredAfterDeadlineIsALoss: a Release the store answers
// with ErrNotHeld only after the lease's deadline (the grant lapsed while
// the process stalled with the release on its way) reports ErrLost, as a
// Release sent after the deadline does, and not ErrNotHeld, which would
// say that someone else's grant was there. Found in the TCK on ZooKeeper
// under load: "Release(…): lease: not held: zkstore: release … token 462",
// after the fix for a Release sent late.
func TestReleaseAnsweredAfterDeadlineIsALoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		clk := jumpClock{new(atomic.Int64)}
		m := newMgr(t, lapseOnRelease{Store: mem, clk: clk, past: tDeadline + time.Second}, "a", lease.WithClock(clk))
		l := mustAcquire(t, m, "x")
		if err := l.Release(bg); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Release answered ErrNotHeld after the deadline: %v, want ErrLost", err)
		}
		if err := l.Err(); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Err() after it: %v, want ErrLost", err)
		}
	})
}
