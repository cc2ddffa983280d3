package lease_test

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

// asksDone is memstore behind a client that asks every call's context for
// Done, as go-redis's pool and zkstore do on every request.
type asksDone struct{ *memstore.Store }

func (s asksDone) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	_ = ctx.Done()
	return s.Store.Acquire(ctx, name, contender, ttl, transition)
}

func (s asksDone) Release(ctx context.Context, name, contender string, token uint64) error {
	_ = ctx.Done()
	return s.Store.Release(ctx, name, contender, token)
}

func (s asksDone) Get(ctx context.Context, name string) (lease.Record, error) {
	_ = ctx.Done()
	return s.Store.Get(ctx, name)
}

// tCall is the call timeout of these tests.
const tCall = 100 * time.Millisecond

// Issue 17: the store calls of a Manager that ask for Done share one
// runtime timer, armed about once per call timeout, not once per call:
// 1,000 acquire-and-release cycles over 10 call timeouts, from one
// goroutine and then from eight, arm it a few times per call timeout.
func TestCallTimerArmsOncePerTimeout(t *testing.T) {
	for _, goroutines := range []int{1, 8} {
		t.Run(fmt.Sprint(goroutines), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMgr(t, asksDone{memstore.New()}, "a", lease.WithCallTimeout(tCall))
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range 1000 / goroutines {
							l, err := m.Acquire(bg, fmt.Sprintf("job/%d", g))
							if err != nil {
								t.Error(err)
								return
							}
							if err := l.Release(bg); err != nil {
								t.Error(err)
								return
							}
							if i%100 == 99 {
								time.Sleep(tCall)
							}
						}
					})
				}
				wg.Wait()
				// 2,000 calls asked for Done over 10 call timeouts.
				if arms := lease.CallTimerArms(m); arms > 2*10+2 {
					t.Errorf("2,000 store calls over 10 call timeouts armed a timer %d times, want at most 22", arms)
				}
			})
		})
	}
}

// Calls that hang until their context ends each end at exactly their own
// deadline, with many in flight, made at different times, next to calls
// that return at once, in any order, or end with their parent.
func TestHungCallsEndAtTheirDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		st.SetFault(func(op memstore.Op, name, _ string) memstore.Fault {
			if op == memstore.OpGet && name[0] == 'h' {
				return memstore.FaultHangCtx
			}
			return memstore.FaultNone
		})
		m := newMgr(t, asksDone{st}, "a", lease.WithCallTimeout(tCall))
		const n = 300
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				// Calls start over about 3 call timeouts, mixing hung calls,
				// quick ones and ones whose parent is cancelled first.
				time.Sleep(time.Duration(i*i%n) * time.Millisecond)
				start := time.Now()
				ctx, cancel := context.WithCancel(bg)
				defer cancel()
				var name string
				switch i % 3 {
				case 0:
					name = fmt.Sprintf("h/%d", i)
				case 1:
					name = fmt.Sprintf("q/%d", i)
				case 2:
					name = fmt.Sprintf("h/cancelled/%d", i)
					time.AfterFunc(time.Duration(i%7)*tCall/8, cancel)
				}
				_, err := m.Get(ctx, name)
				took := time.Since(start)
				switch i % 3 {
				case 0:
					if !errors.Is(err, context.DeadlineExceeded) || took != tCall {
						t.Errorf("hung call %d: %v after %v, want DeadlineExceeded after %v", i, err, took, tCall)
					}
				case 1:
					if err != nil || took != 0 {
						t.Errorf("quick call %d: %v after %v", i, err, took)
					}
				case 2:
					if want := time.Duration(i%7) * tCall / 8; !errors.Is(err, context.Canceled) || took != want {
						t.Errorf("call %d: %v after %v, want Canceled after %v", i, err, took, want)
					}
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		if q, armed := lease.PendingCalls(m); q != 0 || armed {
			t.Errorf("once every call ended and the timer fired: %d calls pending, timer armed %v", q, armed)
		}
	})
}

// The FIFO of call deadlines stays small while one call hangs at its head
// and 10,000 short ones come and go behind it, and a closed Manager holds
// no timer.
func TestCallFIFOBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		st.SetFault(func(op memstore.Op, name, _ string) memstore.Fault {
			if op == memstore.OpGet && name == "hang" {
				return memstore.FaultHangCtx
			}
			return memstore.FaultNone
		})
		m, err := lease.NewManager(asksDone{st}, lease.WithCallTimeout(tCall))
		if err != nil {
			t.Fatal(err)
		}
		hung := make(chan error)
		go func() {
			_, err := m.Get(bg, "hang")
			hung <- err
		}()
		synctest.Wait()
		most := 0
		for i := range 10_000 {
			l, err := m.Acquire(bg, fmt.Sprintf("job/%d", i%10))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(bg); err != nil {
				t.Fatal(err)
			}
			q, _ := lease.PendingCalls(m)
			most = max(most, q)
		}
		if most > 130 {
			t.Errorf("up to %d calls in the FIFO behind one hung call, want at most 130", most)
		}
		if err := <-hung; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("hung call: %v", err)
		}
		l, err := m.Acquire(bg, "last") // arms the timer again
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(bg); err != nil {
			t.Fatal(err)
		}
		if q, armed := lease.PendingCalls(m); q != 0 || armed {
			t.Errorf("after Close: %d calls pending, timer armed %v", q, armed)
		}
	})
}
