package lease_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// goroutineID is the calling goroutine's id, from its stack header.
func goroutineID() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// callers records which goroutine makes each Acquire and Release.
type callers struct {
	*memstore.Store
	mu sync.Mutex
	gs []uint64
}

func (c *callers) note() {
	c.mu.Lock()
	c.gs = append(c.gs, goroutineID())
	c.mu.Unlock()
}

func (c *callers) Acquire(ctx context.Context, name, contender string, ttl, tr time.Duration) (lease.Record, error) {
	c.note()
	return c.Store.Acquire(ctx, name, contender, ttl, tr)
}

func (c *callers) Release(ctx context.Context, name, contender string, token uint64) error {
	c.note()
	return c.Store.Release(ctx, name, contender, token)
}

// TestUncontendedCycleRunsInTheCallersGoroutine (issue 17, DESIGN §5b):
// an uncontended Acquire and Release make their store calls in the
// caller's goroutine, with no hand-off to another goroutine and back.
func TestUncontendedCycleRunsInTheCallersGoroutine(t *testing.T) {
	st := &callers{Store: memstore.New()}
	m, err := lease.NewManager(st)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(bg)
	me := goroutineID()
	for range 3 {
		l, err := m.Acquire(bg, "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		l, err = m.TryAcquire(bg, "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.gs) != 12 {
		t.Fatalf("%d store calls for 6 cycles, want 12", len(st.gs))
	}
	for i, g := range st.gs {
		if g != me {
			t.Fatalf("store call %d ran in goroutine %d, not the caller's %d", i, g, me)
		}
	}
}

// TestUncontendedCyclesLeaveTheTimerArmed: a lease acquired after the last
// one was released finds the timers' goroutine armed for a time at or
// before its renewal, and wakes it (a futex wake-up, a few µs of CPU on
// either side) only when that timer has fired meanwhile: about once per
// renewal period, not once per cycle. Disarmed with the heap empty, 500
// cycles woke it 300–500 times (the count depends on how promptly the
// goroutine runs; a bound this loose holds under any load).
func TestUncontendedCyclesLeaveTheTimerArmed(t *testing.T) {
	m, err := lease.NewManager(memstore.New(), lease.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(bg)
	const cycles = 500
	for range cycles {
		l, err := m.Acquire(bg, "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		// The goroutine runs while nothing is held, as it may between
		// any two cycles.
		runtime.Gosched()
	}
	if w := lease.TimerWakes(m); w > cycles/50 {
		t.Errorf("%d uncontended cycles woke the timers' goroutine %d times, want at most %d (one per renewal period)", cycles, w, cycles/50)
	}
}

// TestUncontendedCycleAllocations (issue 17): an uncontended Acquire +
// Release on memstore makes 1 allocation: the slot, with the lease and
// the contexts of its two store calls. The lease's own context is made
// only when asked for, so a Release under a context that can end needs
// no guard against it (metrics and logs that are off add none, see
// TestNoopMetricsCostNothing). It was 6 under context.Background and 13
// under a context that can end (the lease's context, its cancel
// function, one context per store call, and the release's guard).
func TestUncontendedCycleAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	m, err := lease.NewManager(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(bg)
	cancelable, cancel := context.WithCancel(bg)
	defer cancel()
	for _, c := range []struct {
		what string
		ctx  context.Context
	}{{"context.Background", bg}, {"a context that can end", cancelable}} {
		allocs := testing.AllocsPerRun(1000, func() {
			l, err := m.Acquire(c.ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(c.ctx); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > maxCycleAllocs {
			t.Errorf("under %s: %.1f allocations per uncontended cycle, want at most %d", c.what, allocs, maxCycleAllocs)
		}
	}
}

// maxCycleAllocs is what an uncontended cycle on memstore allocates (see
// TestUncontendedCycleAllocations).
const maxCycleAllocs = 1

// TestLeaseContextMadeLate: a lease's context, made only when first asked
// for, is cancelled with the lease's end whether it was asked for before
// (Done, then Context) or after (Context, then Done) the end, with the
// cause Err reports.
func TestLeaseContextMadeLate(t *testing.T) {
	m, err := lease.NewManager(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(bg)
	before := mustAcquire(t, m, "before")
	done := before.Done()
	if before.Err() != nil || before.Context().Err() != nil {
		t.Fatalf("held lease: Err %v, context's %v", before.Err(), before.Context().Err())
	}
	after := mustAcquire(t, m, "after")
	for _, l := range []*lease.Lease{before, after} {
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	for _, l := range []*lease.Lease{before, after} {
		<-l.Done()
		if got := context.Cause(l.Context()); got != lease.ErrReleased || l.Err() != lease.ErrReleased {
			t.Errorf("%s: cause %v, Err %v; want %v", l.Name(), got, l.Err(), lease.ErrReleased)
		}
	}
}

// TestDeadlineFiresWhileOtherCallsHang (rule 2, I3): with one timer
// goroutine for all leases, a store call that hangs anywhere — a renewal,
// an Acquire or a Release made in a caller's goroutine — never delays a
// lease's deadline: x's Done fires exactly at t_send + ttl + transition −
// safety while the calls on y and z are stuck.
func TestDeadlineFiresWhileOtherCallsHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, noBatch{Store: st, Watcher: st}, "a") // single renewals
		t0 := time.Now()
		x := mustAcquire(t, m, "x")
		z := mustAcquire(t, m, "z")
		st.SetFault(func(op memstore.Op, name, _ string) memstore.Fault {
			switch {
			case name == "x" && op == memstore.OpRenew,
				name == "y" && op == memstore.OpAcquire,
				name == "z" && op == memstore.OpRelease:
				return memstore.FaultHang // ignores its context
			}
			return memstore.FaultNone
		})
		go func() { _, _ = m.Acquire(bg, "y") }()
		go func() { _ = z.Release(bg) }()
		<-x.Done()
		if got := time.Since(t0); got != tDeadline {
			t.Errorf("x lost after %v, want exactly %v while other calls hang", got, tDeadline)
		}
		st.Heal()
	})
}

// TestOneManagerManyGoroutines: goroutines of one Manager taking turns on
// a few names — through the uncontended path, local queues, TryAcquire and
// the registry's slots coming and going — never hold a name twice at
// once, and each name's tokens grow in the order it was granted.
func TestOneManagerManyGoroutines(t *testing.T) {
	m, err := lease.NewManager(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(bg)
	names := []string{"a", "b", "c", "d"}
	var mu sync.Mutex
	holder := map[string]int{}
	last := map[string]uint64{}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 200 {
				name := names[(g+i)%len(names)]
				var l *lease.Lease
				var err error
				if i%3 == 0 {
					if l, err = m.TryAcquire(bg, name); errors.Is(err, lease.ErrNotAcquired) {
						continue
					}
				} else {
					l, err = m.Acquire(bg, name)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if h, ok := holder[name]; ok {
					t.Errorf("goroutine %d granted %q while goroutine %d holds it", g, name, h)
				}
				if l.Token() <= last[name] {
					t.Errorf("%q granted token %d after %d", name, l.Token(), last[name])
				}
				holder[name], last[name] = g, l.Token()
				mu.Unlock()
				mu.Lock()
				delete(holder, name)
				mu.Unlock()
				if err := l.Release(bg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := lease.PerNameEntries(m); n != 0 {
		t.Errorf("%d per-name entries once every goroutine is done", n)
	}
}

// TestLeaseLostBeforeContextAsked: a lease lost at its deadline (its
// renewals hang) before anyone asked for its context hands out one
// already cancelled with ErrLost, at exactly the deadline, and its
// Release reports the loss.
func TestLeaseLostBeforeContextAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		t0 := time.Now()
		l := mustAcquire(t, m, "job")
		st.FailContender("a", memstore.FaultHang)
		time.Sleep(tDeadline - time.Nanosecond)
		if l.Err() != nil {
			t.Fatalf("lost before its deadline: %v", l.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := time.Since(t0); l.Err() != lease.ErrLost {
			t.Fatalf("at +%v: Err %v, want %v", got, l.Err(), lease.ErrLost)
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("Done open after the loss")
		}
		if got := context.Cause(l.Context()); got != lease.ErrLost {
			t.Errorf("context's cause %v, want %v", got, lease.ErrLost)
		}
		st.Heal()
		if err := l.Release(bg); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Release: %v, want ErrLost", err)
		}
	})
}
