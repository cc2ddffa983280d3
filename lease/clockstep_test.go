package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/internal/metricmem"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// Timing of these tests (newMgr's): ttl 3s, transition 1s, safety 500ms,
// renewals every 1s, step tolerance 125ms. Manager a holds x (acquired at
// 0s) and y (at 0.5s) on one memstore; renewals of y fail, so y lives on
// the deadline of its acquire, 4s; the memstore frees y at 4.5s. Waiters
// poll (pollOnly): no batch, each lease renews on its own.

// stepSetup starts the scenario and returns a's Manager's leases x and y,
// the log and a second Manager b.
func stepSetup(t *testing.T, st *memstore.Store, opts ...lease.Option) (x, y *lease.Lease, g *logged, b *lease.Manager) {
	t.Helper()
	g = &logged{}
	m := newMgr(t, pollOnly{st}, "a", append([]lease.Option{lease.WithLogger(slog.New(g))}, opts...)...)
	b = newMgr(t, pollOnly{st}, "b")
	x = mustAcquire(t, m, "x")
	time.Sleep(500 * time.Millisecond)
	y = mustAcquire(t, m, "y")
	st.SetFault(func(op memstore.Op, name, contender string) memstore.Fault {
		if op == memstore.OpRenew && name == "y" && contender == "a" {
			return memstore.FaultFail
		}
		return memstore.FaultNone
	})
	return x, y, g, b
}

// clockSteps returns the clock_step records logged.
func clockSteps(g *logged) []string {
	var out []string
	for _, r := range g.take() {
		if strings.Contains(r, " "+lease.EventClockStep+" ") {
			out = append(out, r)
		}
	}
	return out
}

// TestForwardStepShortensOtherLeases (issue 15): the memstore's clock
// steps 1.5s forward (more than the 500ms margin) at 1.2s, between x's
// renewals. y's grant now ends at 3s on the server, while y's holder,
// whose renewals fail, would believe until 4s. x's renewal at 2s shows the
// step: y's deadline moves to 2.5s, so y's holder is told before the
// memstore grants y to b at 3s, and the step is logged and counted once.
func TestForwardStepShortensOtherLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		st := memstore.New()
		p := metricmem.New()
		x, y, g, b := stepSetup(t, st, lease.WithMeterProvider(p))
		time.Sleep(700 * time.Millisecond) // 1.2s
		st.StepClock(1500 * time.Millisecond)
		time.Sleep(time.Second) // 2.2s: x renewed at 2s
		synctest.Wait()
		if !x.Held() {
			t.Fatalf("x lost after its renewal across the step: %v", x.Err())
		}
		if got, want := y.Deadline(), t0.Add(2500*time.Millisecond); !got.Equal(want) {
			t.Errorf("y's deadline %v after the step, want 2.5s", got.Sub(t0))
		}
		time.Sleep(800 * time.Millisecond) // 3.0s: the memstore frees y
		var grantedAt time.Time
		for {
			if _, err := b.TryAcquire(bg, "y"); err == nil {
				grantedAt = time.Now()
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case <-y.Done():
		default:
			t.Fatalf("y granted to b at %v while a's holder still holds it (deadline %v)",
				grantedAt.Sub(t0), y.Deadline().Sub(t0))
		}
		if !errors.Is(y.Err(), lease.ErrLost) {
			t.Errorf("y ended with %v, want ErrLost", y.Err())
		}
		if got := clockSteps(g); len(got) != 1 || !strings.Contains(got[0], "direction=forward") ||
			!strings.Contains(got[0], "shortened=1") || !strings.Contains(got[0], "lock=x") {
			t.Errorf("clock_step records %v, want one forward step seen on x that shortened 1 lease", got)
		}
		wantValue(t, p, 1, lease.MetricClockSteps, kv(lease.AttrDirection, "forward"))
		wantValue(t, p, 0, lease.MetricClockSteps, kv(lease.AttrDirection, "backward"))
	})
}

// TestStepPastEveryGrantSeenFromARefusal (issue 15): a step of 3.5s at
// 1.2s ends every grant on the server at once; x's renewal at 2s is
// refused, and its reply still shows the step: y, whose renewals fail,
// is told at 2s instead of at its deadline, 4s. (From 1.2s to 2s no reply
// came: no detector can see that part.)
func TestStepPastEveryGrantSeenFromARefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		st := memstore.New()
		x, y, g, _ := stepSetup(t, st)
		time.Sleep(700 * time.Millisecond) // 1.2s
		st.StepClock(3500 * time.Millisecond)
		time.Sleep(900 * time.Millisecond) // 2.1s
		synctest.Wait()
		for _, l := range []*lease.Lease{x, y} {
			select {
			case <-l.Done():
			default:
				t.Errorf("%s still held at 2.1s (deadline %v), its grant ended at 1.2s on the server",
					l.Name(), l.Deadline().Sub(t0))
			}
		}
		if got := clockSteps(g); len(got) != 1 || !strings.Contains(got[0], "direction=forward") ||
			!strings.Contains(got[0], "shortened=1") {
			t.Errorf("clock_step records %v, want one forward step that shortened 1 lease", got)
		}
	})
}

// TestBackwardStepChangesNothing (issue 15): a step back keeps grants on
// the server longer: it is logged and counted, and no deadline moves.
func TestBackwardStepChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		p := metricmem.New()
		x, y, g, _ := stepSetup(t, st, lease.WithMeterProvider(p))
		before := y.Deadline()
		time.Sleep(700 * time.Millisecond) // 1.2s
		st.StepClock(-1500 * time.Millisecond)
		time.Sleep(time.Second) // 2.2s
		synctest.Wait()
		if !x.Held() || !y.Held() || !y.Deadline().Equal(before) {
			t.Errorf("after a step back: x held %v, y held %v, y's deadline moved %v",
				x.Held(), y.Held(), y.Deadline().Sub(before))
		}
		if got := clockSteps(g); len(got) != 1 || !strings.Contains(got[0], "direction=backward") {
			t.Errorf("clock_step records %v, want one backward step", got)
		}
		wantValue(t, p, 1, lease.MetricClockSteps, kv(lease.AttrDirection, "backward"))
		wantValue(t, p, 0, lease.MetricClockSteps, kv(lease.AttrDirection, "forward"))
	})
}

// jitteryCalls delays each call before it reaches the store and each reply
// after it, by turns of 0, 150 and 300ms each way: the server's clock and
// the Manager's agree, and only the time in flight varies.
type jitteryCalls struct {
	lease.Store
	n atomic.Int64
}

func (s *jitteryCalls) delay() time.Duration {
	return time.Duration(s.n.Add(1)%3) * 150 * time.Millisecond
}

func (s *jitteryCalls) Acquire(ctx context.Context, name, contender string, ttl, tr time.Duration) (lease.Record, error) {
	time.Sleep(s.delay())
	rec, err := s.Store.Acquire(ctx, name, contender, ttl, tr)
	time.Sleep(s.delay())
	return rec, err
}

func (s *jitteryCalls) Renew(ctx context.Context, name, contender string, token uint64, ttl, tr time.Duration) (lease.Record, error) {
	time.Sleep(s.delay())
	rec, err := s.Store.Renew(ctx, name, contender, token, ttl, tr)
	time.Sleep(s.delay())
	return rec, err
}

// TestSlowRepliesAreNoStep (issue 15): requests and replies delayed by up
// to 300ms each way (more than the 125ms tolerance), on a server whose
// clock does not step: no step is reported and no deadline moves.
func TestSlowRepliesAreNoStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		g := &logged{}
		p := metricmem.New()
		m := newMgr(t, &jitteryCalls{Store: st}, "a", lease.WithLogger(slog.New(g)), lease.WithMeterProvider(p))
		var ls []*lease.Lease
		for _, n := range []string{"x", "y", "z"} {
			ls = append(ls, mustAcquire(t, m, n))
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(20 * time.Second)
		for _, l := range ls {
			if !l.Held() {
				t.Errorf("%s lost with slow replies: %v", l.Name(), l.Err())
			}
		}
		if got := clockSteps(g); len(got) != 0 {
			t.Errorf("clock_step records %v with slow replies and no step", got)
		}
		wantValue(t, p, 0, lease.MetricClockSteps, kv(lease.AttrDirection, "forward"))
		wantValue(t, p, 0, lease.MetricClockSteps, kv(lease.AttrDirection, "backward"))
	})
}
