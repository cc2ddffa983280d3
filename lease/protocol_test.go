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

// Timing used by the protocol tests: renewals every ttl/3 = 1s, safety
// max(transition/2, ttl/10) = 500ms, so a holder's deadline is
// t_send + 3.5s and the server frees the grant at write + 4s.
const (
	tTTL        = 3 * time.Second
	tTransition = time.Second
	tDeadline   = tTTL + tTransition - 500*time.Millisecond
)

var bg = context.Background()

func newMgr(t *testing.T, st lease.Store, id string, opts ...lease.Option) *lease.Manager {
	t.Helper()
	opts = append([]lease.Option{lease.WithContenderID(id), lease.WithTTL(tTTL), lease.WithTransition(tTransition)}, opts...)
	m, err := lease.NewManager(st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(bg); err != nil {
			t.Errorf("close %s: %v", id, err)
		}
	})
	return m
}

func mustAcquire(t *testing.T, m *lease.Manager, name string) *lease.Lease {
	t.Helper()
	l, err := m.Acquire(bg, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Rule 3: the first renewal is sent ttl/3 after the acquire was sent, and
// every next one ttl/3 after the previous; each extends the deadline to
// t_send + ttl + transition − safety.
func TestRenewalSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		m := newMgr(t, watching(r), "a")
		t0 := time.Now()
		l := mustAcquire(t, m, "job")
		time.Sleep(10*time.Second + time.Millisecond)
		sent := r.of("renew-sent", "a")
		if len(sent) != 10 {
			t.Fatalf("%d renewals in 10s, want 10 (one per ttl/3)", len(sent))
		}
		for i, c := range sent {
			if want := t0.Add(time.Duration(i+1) * tTTL / 3); !c.at.Equal(want) {
				t.Fatalf("renewal %d sent at +%v, want +%v", i+1, c.at.Sub(t0), want.Sub(t0))
			}
		}
		if got, want := l.Deadline(), sent[9].at.Add(tDeadline); !got.Equal(want) {
			t.Errorf("deadline +%v, want last t_send + %v = +%v", got.Sub(t0), tDeadline, want.Sub(t0))
		}
		if !l.Held() || l.Token() != 1 {
			t.Errorf("after renewals: held %v token %d, want held with token 1", l.Held(), l.Token())
		}
	})
}

// Rule 2 / I3: with every store call of the holder hanging (and ignoring
// its context), Done fires at exactly t_send + ttl + transition − safety,
// while the renewal is still hanging, and before another contender is
// granted the lock.
func TestDeadlineFiresWhileCallHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		a := newMgr(t, watching(r), "a")
		b := newMgr(t, watching(r), "b")
		t0 := time.Now()
		la := mustAcquire(t, a, "job")
		time.Sleep(500 * time.Millisecond)
		r.FailContender("a", memstore.FaultHang)

		granted := make(chan time.Time, 1)
		var lb *lease.Lease
		go func() {
			var err error
			lb, err = b.Acquire(bg, "job")
			if err != nil {
				t.Error(err)
			}
			granted <- time.Now()
		}()

		select {
		case <-la.Done():
		case <-time.After(time.Minute):
			t.Fatal("Done never fired while the holder's renewals hang")
		}
		doneAt := time.Now()
		if got := doneAt.Sub(t0); got != tDeadline {
			t.Errorf("Done after %v, want t_send + ttl + transition − safety = %v", got, tDeadline)
		}
		if !errors.Is(la.Err(), lease.ErrLost) || la.Held() {
			t.Errorf("after Done: Err %v, Held %v; want ErrLost, not held", la.Err(), la.Held())
		}
		if n := len(r.of("renew", "a")); n != 0 {
			t.Errorf("%d renewals of the holder returned; the deadline must fire while they hang", n)
		}
		if len(r.of("renew-sent", "a")) == 0 {
			t.Error("no renewal was even sent: the hang was never exercised")
		}
		grantAt := <-granted
		if !grantAt.After(doneAt) {
			t.Errorf("b granted at +%v, not after a's Done at +%v", grantAt.Sub(t0), doneAt.Sub(t0))
		}
		if grantAt.Sub(t0) < tTTL+tTransition {
			t.Errorf("b granted at +%v, before the server could free the grant (+%v)", grantAt.Sub(t0), tTTL+tTransition)
		}
		if lb.Token() <= la.Token() {
			t.Errorf("b's token %d is not greater than a's %d", lb.Token(), la.Token())
		}
		r.Heal()
		if err := la.Release(bg); !errors.Is(err, lease.ErrLost) {
			t.Errorf("release of a lost lease: %v, want ErrLost", err)
		}
		if o, _ := b.Get(bg, "job"); o.ID != "b" || o.Token != lb.Token() {
			t.Errorf("after a's late calls the owner is %+v, want b with token %d", o, lb.Token())
		}
	})
}

// Rule 5: a waiter whose owner vanished without a release retries at the
// owner's transition end plus a jitter in [−200ms, +1000ms) (after the
// immediate retry that follows its subscription), and so takes
// over within ttl + transition + 1s (I5), never earlier than the server
// allows.
func TestWaiterRetriesAtTransitionEndWithJitter(t *testing.T) {
	var seconds []time.Duration
	for range 25 {
		synctest.Test(t, func(t *testing.T) {
			r := newRecorder()
			m := newMgr(t, watching(r), "w")
			t0 := time.Now()
			if _, err := r.Store.Acquire(bg, "job", "ghost", tTTL, tTransition); err != nil {
				t.Fatal(err)
			}
			l := mustAcquire(t, m, "job")
			took := time.Since(t0)
			if took < tTTL+tTransition || took >= tTTL+tTransition+time.Second {
				t.Fatalf("takeover after %v, want within [ttl+transition, ttl+transition+1s)", took)
			}
			// The first attempt loses; the waiter subscribes and tries once
			// more at once (a release before the subscription would be
			// missed otherwise); then it waits for the transition end.
			tries := r.of("acquire", "w")
			if len(tries) < 3 || tries[1].at.Sub(t0) != 0 {
				t.Fatalf("%d attempts, the second at +%v; want at least 3, the second at once after subscribing", len(tries), tries[1].at.Sub(t0))
			}
			second := tries[2].at.Sub(t0)
			if second < tTTL+tTransition-200*time.Millisecond || second >= tTTL+tTransition+time.Second {
				t.Fatalf("attempt after the subscription at +%v, want transition end %v + [−200ms, +1s)", second, tTTL+tTransition)
			}
			seconds = append(seconds, second)
			_ = l.Release(bg)
		})
	}
	lo, hi := seconds[0], seconds[0]
	for _, s := range seconds {
		lo, hi = min(lo, s), max(hi, s)
	}
	if hi-lo < 200*time.Millisecond {
		t.Errorf("retries spread over only %v across 25 runs: no jitter", hi-lo)
	}
}

// A grant the holder was told it lost is never handed out again under the
// same token, even when the store still had it live when the calls came
// back (I1, I4): here a second goroutine of the same Manager is waiting
// when the first one's lease is lost.
func TestLostGrantIsNotReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		m := newMgr(t, watching(r), "a")
		first := mustAcquire(t, m, "job")
		next := make(chan *lease.Lease, 1)
		go func() { next <- mustAcquire(t, m, "job") }()
		time.Sleep(500 * time.Millisecond)
		r.FailContender("a", memstore.FaultHang)
		<-first.Done()
		// Heal before the server frees the grant: the hung calls land and
		// the store still names us as owner with the old token.
		time.Sleep(100 * time.Millisecond)
		r.Heal()
		second := <-next
		if second.Token() <= first.Token() {
			t.Errorf("second local grant has token %d, want greater than the lost %d", second.Token(), first.Token())
		}
		_ = second.Release(bg)
	})
}

// Rule 6: goroutines waiting on one lock through one Manager share one
// store contender, served in order, each with a new grant; two Managers are
// two contenders.
func TestGoroutinesShareOneContender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		a := newMgr(t, watching(r), "a")
		b := newMgr(t, watching(r), "b")
		lb := mustAcquire(t, b, "job")
		if _, err := a.TryAcquire(bg, "job"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Fatalf("second Manager's TryAcquire: %v, want ErrNotAcquired", err)
		}
		got := make(chan *lease.Lease)
		for range 5 {
			go func() {
				l, err := a.Acquire(bg, "job")
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
		}
		synctest.Wait()
		if q := r.Inspect("job").Queue; len(q) != 1 || q[0] != "a" {
			t.Errorf("store wait queue %v, want the one contender [a]", q)
		}
		if _, err := a.TryAcquire(bg, "job"); !errors.Is(err, lease.ErrNotAcquired) {
			t.Errorf("TryAcquire while goroutines of the same Manager wait: %v, want ErrNotAcquired", err)
		}
		_ = lb.Release(bg)
		last := lb.Token()
		for i := range 5 {
			l := <-got
			if l.Token() <= last {
				t.Errorf("local grant %d has token %d, not above %d", i, l.Token(), last)
			}
			last = l.Token()
			select {
			case <-got:
				t.Fatal("two goroutines hold the lease at once")
			default:
			}
			_ = l.Release(bg)
		}
	})
}

// A Manager holding many leases on a batch store renews them in shared
// round trips, not one per lease.
func TestBatchRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		var ls []*lease.Lease
		for i := range 50 {
			ls = append(ls, mustAcquire(t, m, "job-"+string(rune('A'+i))))
			time.Sleep(37 * time.Millisecond) // acquired at scattered times
		}
		st.ResetStats()
		time.Sleep(10 * time.Second)
		s := st.Stats()
		if s.Renew != 0 {
			t.Errorf("%d single renewals with a batch store", s.Renew)
		}
		// Aligned on a ttl/6 grid: at most one batch per 500ms.
		if s.RenewMany == 0 || s.RenewMany > 21 {
			t.Errorf("%d RenewMany calls in 10s for 50 leases, want 1..21", s.RenewMany)
		}
		for _, l := range ls {
			if !l.Held() || time.Until(l.Deadline()) < tDeadline-tTTL/3 {
				t.Fatalf("%s: held %v, deadline in %v: not renewed", l.Name(), l.Held(), time.Until(l.Deadline()))
			}
		}
	})
}

// The injected clock drives deadlines: a client clock running twice as
// fast fires the deadline after half the real time.
func TestInjectedClockDrivesDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a", lease.WithClock(fastClock{start: time.Now()}))
		t0 := time.Now()
		l := mustAcquire(t, m, "job")
		st.FailContender("a", memstore.FaultHangCtx)
		<-l.Done()
		if got := time.Since(t0); got != tDeadline/2 {
			t.Errorf("Done after %v real time with a 2× clock, want %v", got, tDeadline/2)
		}
		st.Heal()
	})
}

type fastClock struct{ start time.Time }

func (c fastClock) Now() time.Time { return c.start.Add(2 * time.Since(c.start)) }
func (c fastClock) NewTimer(d time.Duration) lease.Timer {
	return timer{time.NewTimer(d / 2)}
}

type timer struct{ t *time.Timer }

func (t timer) C() <-chan time.Time { return t.t.C }
func (t timer) Stop() bool          { return t.t.Stop() }

// TestUnreleasedGrantIsNotReused: a Release whose outcome stays unknown
// leaves the grant possibly live under the old token; while the store keeps
// failing to release it, a later local lease must not be handed that same
// token (found by the fault campaign: a PostgreSQL restart during a
// release gave one contender token 6 twice).
func TestUnreleasedGrantIsNotReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		m := newMgr(t, watching(r), "a")
		first := mustAcquire(t, m, "job")
		r.SetFault(func(op memstore.Op, _, _ string) memstore.Fault {
			if op == memstore.OpRelease {
				return memstore.FaultFail
			}
			return memstore.FaultNone
		})
		if err := first.Release(bg); err == nil {
			t.Fatal("Release succeeded through a failing store")
		}
		next := make(chan *lease.Lease, 1)
		go func() { next <- mustAcquire(t, m, "job") }()
		time.Sleep(tTTL) // releases keep failing meanwhile
		r.Heal()
		second := <-next
		if second.Token() <= first.Token() {
			t.Errorf("second local grant has token %d, want greater than the unreleased %d", second.Token(), first.Token())
		}
		_ = second.Release(bg)
	})
}

// unsetStore fails every Acquire with ErrStoreSetup while broken, as a SQL
// store without its table does.
type unsetStore struct {
	lease.Store
	broken atomic.Bool
}

func (s *unsetStore) Acquire(ctx context.Context, name, contender string, ttl, tr time.Duration) (lease.Record, error) {
	if s.broken.Load() {
		return lease.Record{}, fmt.Errorf("%w: relation \"simba_mutex\" does not exist", lease.ErrStoreSetup)
	}
	return s.Store.Acquire(ctx, name, contender, ttl, tr)
}

// A store that is not set up fails Acquire and TryAcquire at once (no
// retrying until the caller's deadline); a Contender keeps trying and leads
// once the setup is fixed.
func TestStoreSetupErrorFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &unsetStore{Store: memstore.New()}
		st.broken.Store(true)
		m := newMgr(t, st, "a")
		start := time.Now()
		ctx, cancel := context.WithTimeout(bg, time.Hour)
		defer cancel()
		if _, err := m.Acquire(ctx, "job"); !errors.Is(err, lease.ErrStoreSetup) {
			t.Fatalf("Acquire: %v, want ErrStoreSetup", err)
		}
		if _, err := m.TryAcquire(bg, "job"); !errors.Is(err, lease.ErrStoreSetup) {
			t.Fatalf("TryAcquire: %v, want ErrStoreSetup", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("failing took %v of fake time, want none", waited)
		}
		led := make(chan struct{})
		c, err := m.Contend("job", lease.Callbacks{OnAcquired: func(context.Context, *lease.Lease) { close(led) }})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Stop(bg)
		time.Sleep(time.Minute)
		select {
		case <-led:
			t.Fatal("led through a store without its table")
		default:
		}
		st.broken.Store(false) // the migrations ran
		select {
		case <-led:
		case <-time.After(time.Minute):
			t.Fatal("the contender gave up on a store that was set up later")
		}
	})
}
