package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// Rule 8: across repeated losses and a final Stop, OnReleased always
// follows its own OnAcquired after it returned, the two never overlap, and
// callbacks may call back into the Manager (they run under no lock).
func TestCallbackOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		var (
			mu     sync.Mutex
			events []string
			inside atomic.Int32
		)
		log := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
		acquired := make(chan struct{}, 8)
		c, err := m.Contend("job", lease.Callbacks{
			OnAcquired: func(ctx context.Context, l *lease.Lease) {
				if inside.Add(1) != 1 {
					t.Error("OnAcquired runs concurrently with another callback")
				}
				log(fmt.Sprintf("acquired %d", l.Token()))
				// Calling back into the Manager must not deadlock.
				if _, err := m.Get(ctx, "job"); err != nil {
					t.Error(err)
				}
				if _, err := m.TryAcquire(ctx, "job"); !errors.Is(err, lease.ErrNotAcquired) {
					t.Errorf("TryAcquire of our own lock from OnAcquired: %v", err)
				}
				acquired <- struct{}{}
				<-ctx.Done()
				time.Sleep(200 * time.Millisecond) // the leader winds down
				log(fmt.Sprintf("returned %d", l.Token()))
				inside.Add(-1)
			},
			OnReleased: func(prev lease.Owner) {
				if inside.Add(1) != 1 {
					t.Error("OnReleased runs concurrently with OnAcquired")
				}
				log(fmt.Sprintf("released %d", prev.Token))
				inside.Add(-1)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 { // three losses: every store call of ours hangs for a while
			<-acquired
			st.FailContender("a", memstore.FaultHangCtx)
			time.Sleep(tTTL + tTransition)
			st.Heal()
		}
		<-acquired
		if err := c.Stop(bg); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(events) != 12 {
			t.Fatalf("events %q, want 4 × (acquired, returned, released)", events)
		}
		for i := 0; i < len(events); i += 3 {
			tok := strings.TrimPrefix(events[i], "acquired ")
			want := []string{"acquired " + tok, "returned " + tok, "released " + tok}
			if fmt.Sprint(events[i:i+3]) != fmt.Sprint(want) {
				t.Errorf("term %d: %q, want %q", i/3, events[i:i+3], want)
			}
		}
	})
}

// Rule 8: Stop cancels the leader's ctx but keeps renewing until the
// callbacks return, and only then releases: the next leader cannot start
// while the old one still works, even past ttl + transition.
func TestStopReleasesAfterCallbacksReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newMgr(t, st, "a")
		b := newMgr(t, st, "b")
		leading := make(chan struct{})
		var returnedAt time.Time
		c, err := a.Contend("job", lease.Callbacks{
			OnAcquired: func(ctx context.Context, l *lease.Lease) {
				close(leading)
				<-ctx.Done()
				time.Sleep(2 * (tTTL + tTransition)) // slow to wind down
				returnedAt = time.Now()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		<-leading
		granted := make(chan time.Time, 1)
		go func() {
			l := mustAcquire(t, b, "job")
			granted <- time.Now()
			_ = l.Release(bg)
		}()
		if err := c.Stop(bg); err != nil {
			t.Fatal(err)
		}
		if at := <-granted; at.Before(returnedAt) {
			t.Errorf("b granted %v before a's OnAcquired returned", returnedAt.Sub(at))
		}
		if c.Leading() {
			t.Error("Leading after Stop")
		}
	})
}

// When Stop's ctx ends before the callbacks return, Stop gives up: it
// stops renewing without releasing, so the grant lapses by itself.
func TestStopBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newMgr(t, st, "a")
		b := newMgr(t, st, "b")
		leading, finish := make(chan struct{}), make(chan struct{})
		c, err := a.Contend("job", lease.Callbacks{
			OnAcquired: func(ctx context.Context, l *lease.Lease) { close(leading); <-finish },
		})
		if err != nil {
			t.Fatal(err)
		}
		<-leading
		stopAt := time.Now() // before the timeout it bounds
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		defer cancel()
		if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop with a stuck callback: %v, want DeadlineExceeded", err)
		}
		l := mustAcquire(t, b, "job")
		if took := time.Since(stopAt); took < tTTL || took > tTTL+tTransition+time.Second {
			t.Errorf("b granted %v after the abandoned Stop, want the grant to lapse (≈ ttl + transition)", took)
		}
		_ = l.Release(bg)
		close(finish)
	})
}

// OnOwner tells a non-leader who leads, and every change.
func TestOnOwnerForNonLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newMgr(t, st, "a")
		b := newMgr(t, st, "b")
		la := mustAcquire(t, a, "job")
		owners := make(chan lease.Owner, 16)
		c, err := b.Contend("job", lease.Callbacks{
			OnAcquired: func(ctx context.Context, l *lease.Lease) {},
			OnOwner:    func(o lease.Owner) { owners <- o },
		})
		if err != nil {
			t.Fatal(err)
		}
		if o := <-owners; o.ID != "a" || o.Token != la.Token() {
			t.Errorf("first owner seen %+v, want a with token %d", o, la.Token())
		}
		_ = la.Release(bg)
		for o := range owners {
			if o.ID == "b" {
				break
			}
		}
		if err := c.Stop(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// Schedule runs work only while leading, at a fixed rate or with a fixed
// delay, and Stop waits for the running work.
func TestScheduleTriggers(t *testing.T) {
	for _, tc := range []struct {
		name string
		trig lease.Trigger
		gap  time.Duration // between run starts, with work taking 300ms
	}{
		{"rate", lease.FixedRate(time.Second), time.Second},
		{"delay", lease.FixedDelay(time.Second), 1300 * time.Millisecond},
		{"overrun", lease.FixedRate(100 * time.Millisecond), 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				m := newMgr(t, st, "a")
				var starts []time.Time
				var running atomic.Int32
				s, err := lease.Schedule(m, "job", tc.trig.WithInitialDelay(50*time.Millisecond), func(ctx context.Context) error {
					if running.Add(1) != 1 {
						t.Error("two runs at once")
					}
					defer running.Add(-1)
					starts = append(starts, time.Now())
					time.Sleep(300 * time.Millisecond)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				t0 := time.Now()
				time.Sleep(5 * time.Second)
				if err := s.Stop(bg); err != nil {
					t.Fatal(err)
				}
				if running.Load() != 0 || s.Running() {
					t.Error("work still running after Stop")
				}
				if starts[0].Sub(t0) != 50*time.Millisecond {
					t.Errorf("first run after %v, want the initial delay 50ms", starts[0].Sub(t0))
				}
				for i := 1; i < len(starts); i++ {
					if gap := starts[i].Sub(starts[i-1]); gap != tc.gap {
						t.Fatalf("run %d started %v after the previous, want %v", i, gap, tc.gap)
					}
				}
			})
		})
	}
}
