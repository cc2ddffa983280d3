package lease_test

// Tests that each fail, every run, on one mistake a change to the protocol
// could make (issue 14 item 10): a deadline counted from the reply, a
// renewal refused with ErrNotHeld that does not end the lease, and a
// released lease whose context outlives the store's release.

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

// replyDelay is how long slowReplies holds back each reply of Acquire,
// Renew and RenewMany after the store applied the call.
const replyDelay = 400 * time.Millisecond

// slowReplies applies every call at once and delays the reply, as a slow
// network does after the server wrote. It keeps when the last renewal
// reached it.
type slowReplies struct {
	*memstore.Store
	renewed *atomic.Int64 // UnixNano
}

func (s slowReplies) Acquire(ctx context.Context, name, contender string, ttl, tr time.Duration) (lease.Record, error) {
	rec, err := s.Store.Acquire(ctx, name, contender, ttl, tr)
	time.Sleep(replyDelay)
	return rec, err
}

func (s slowReplies) Renew(ctx context.Context, name, contender string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
	s.renewed.Store(time.Now().UnixNano())
	rec, err := s.Store.Renew(ctx, name, contender, token, ttl, tr)
	time.Sleep(replyDelay)
	return rec, err
}

func (s slowReplies) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	s.renewed.Store(time.Now().UnixNano())
	res, err := s.Store.RenewMany(ctx, reqs)
	time.Sleep(replyDelay)
	return res, err
}

// TestDeadlineCountsFromSend (rule 2, I3): the server wrote the grant at
// some instant after the request was sent, so the holder's deadline is
// t_send + ttl + transition − safety, after the acquire and after every
// renewal, with single and batch renewals; counted from the reply it
// would be late by the reply's delay. (A batch renewal is sent up to a
// batch window after the lease asks for it; its deadline counts from the
// asking.)
func TestDeadlineCountsFromSend(t *testing.T) {
	bothRenewalPaths(t, func(t *testing.T, batch bool) {
		slow := slowReplies{memstore.New(), new(atomic.Int64)}
		var st lease.Store = slow
		if !batch {
			st = noBatch{Store: slow, Watcher: slow}
		}
		m := newMgr(t, st, "a")
		t0 := time.Now()
		l := mustAcquire(t, m, "job")
		if got := l.Deadline().Sub(t0); got != tDeadline {
			t.Fatalf("deadline after the acquire: t_send + %v, want + %v (the reply came %v after the request)",
				got, tDeadline, replyDelay)
		}
		slow.ResetStats()
		for l.Deadline().Sub(t0) == tDeadline { // until the first renewal is confirmed
			time.Sleep(time.Millisecond)
		}
		sent := time.Unix(0, slow.renewed.Load())
		if got := l.Deadline().Sub(sent); got > tDeadline || got < tDeadline-10*time.Millisecond {
			t.Errorf("deadline after a renewal: t_send + %v, want + %v", got, tDeadline)
		}
		if s := slow.Stats(); s.Renew+s.RenewMany != 1 {
			t.Errorf("%d renewal calls, want the one confirmed", s.Renew+s.RenewMany)
		}
		// With every later call hanging, Done fires at that deadline.
		slow.FailContender("a", memstore.FaultHangCtx)
		<-l.Done()
		if got := time.Since(sent); got > tDeadline {
			t.Errorf("Done %v after the last confirmed renewal was sent, want %v", got, tDeadline)
		}
		slow.Heal()
	})
}

// TestRenewalRefusedEndsTheLeaseAtOnce (rule 7, I3, I4): when a renewal
// answers that the grant is not the current one (here the store's clock
// jumped past the grant and another contender took it), the lease is lost
// at once, with ErrLost, not at its local deadline; with single and batch
// renewals.
func TestRenewalRefusedEndsTheLeaseAtOnce(t *testing.T) {
	bothRenewalPaths(t, func(t *testing.T, batch bool) {
		var skew atomic.Int64
		r := newRecorder(memstore.WithClock(func() time.Time {
			return time.Now().Add(time.Duration(skew.Load()))
		}))
		var st lease.Store = r
		if !batch {
			st = watching(r)
		}
		a := newMgr(t, st, "a")
		b := newMgr(t, st, "b")
		t0 := time.Now()
		la := mustAcquire(t, a, "job")
		skew.Store(int64(tTTL + tTransition)) // the server's clock jumps past a's grant
		lb := mustAcquire(t, b, "job")
		select {
		case <-la.Done():
		case <-time.After(tDeadline - time.Millisecond):
			t.Fatalf("a's lease still held %v after the acquire, though its renewal (due after %v) was refused: it must end at once",
				time.Since(t0), tTTL/3)
		}
		if got, want := time.Since(t0), tTTL/3; got > want+10*time.Millisecond {
			t.Errorf("a's lease ended %v after the acquire, want at its first renewal (by %v)", got, want)
		}
		if !errors.Is(la.Err(), lease.ErrLost) || la.Held() {
			t.Errorf("a after the refused renewal: Err %v, Held %v; want ErrLost and not held", la.Err(), la.Held())
		}
		if o := r.Inspect("job"); o.Owner != "b" || o.Token != lb.Token() {
			t.Errorf("store %+v, want b's grant untouched", o)
		}
		_ = lb.Release(bg)
	})
}

// bothRenewalPaths runs f in a synctest bubble for single renewals (Renew)
// and for batch renewals (RenewMany).
func bothRenewalPaths(t *testing.T, f func(t *testing.T, batch bool)) {
	for _, batch := range []bool{false, true} {
		name := "single renewals"
		if batch {
			name = "batch renewals"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, batch) })
		})
	}
}

// releaseProbe calls before at the start of every Release, before the
// store applies it.
type releaseProbe struct {
	lease.Store
	before func(mutex string)
}

func (p releaseProbe) Release(ctx context.Context, name, contender string, token uint64) error {
	p.before(name)
	return p.Store.Release(ctx, name, contender, token)
}

// TestReleaseCancelsBeforeTheStoreIsAsked (I3): a lease ended by
// Release, Close or Contender.Stop has its context cancelled before the
// store is asked to release the grant, so the holder stops believing
// before anyone else can be granted the lock.
func TestReleaseCancelsBeforeTheStoreIsAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		held := map[string]context.Context{}
		var asked atomic.Int32
		st := releaseProbe{Store: memstore.New(), before: func(name string) {
			asked.Add(1)
			if ctx, ok := held[name]; ok && ctx.Err() == nil {
				t.Errorf("the store was asked to release %q while its lease's context was still live", name)
			}
		}}
		m, err := lease.NewManager(st, lease.WithContenderID("a"), lease.WithTTL(tTTL), lease.WithTransition(tTransition))
		if err != nil {
			t.Fatal(err)
		}
		l := mustAcquire(t, m, "released")
		held["released"] = l.Context()
		closed := mustAcquire(t, m, "closed")
		held["closed"] = closed.Context()
		leading := make(chan struct{})
		c, err := m.Contend("stopped", lease.Callbacks{OnAcquired: func(ctx context.Context, l *lease.Lease) {
			held["stopped"] = ctx
			close(leading)
			<-ctx.Done()
		}})
		if err != nil {
			t.Fatal(err)
		}
		<-leading
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(bg); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(bg); err != nil {
			t.Fatal(err)
		}
		if n := asked.Load(); n != 3 {
			t.Errorf("%d releases reached the store, want 3", n)
		}
	})
}
