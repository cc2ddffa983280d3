package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// Timings of the in-memory campaigns (fake time: they cost no wall time).
const (
	campTTL   = 600 * time.Millisecond
	campTr    = 300 * time.Millisecond
	campThink = time.Second // longer than ttl: renewals must go on mid-update
	campRun   = 2 * time.Minute
)

// campaign runs three workers on store (each its own Manager) for run
// of fake time while a nemesis hangs a random worker's store calls now and
// then (S4: a holder cut off), and returns the report, the registers and
// how many faults it injected.
func campaign(t *testing.T, mem *memstore.Store, store lease.Store, seed uint64, run time.Duration) (Report, *Register, *Register, int) {
	h, fenced, unfenced := NewHistory(), NewRegister(true), NewRegister(false)
	ctx, cancel := context.WithTimeout(t.Context(), run)
	defer cancel()
	var wg sync.WaitGroup
	names := []string{"w0", "w1", "w2"}
	for _, name := range names {
		m, err := lease.NewManager(store, lease.WithTTL(campTTL), lease.WithTransition(campTr), lease.WithContenderID(name))
		if err != nil {
			t.Fatal(err)
		}
		w := &Worker{Name: name, Manager: m, Mutex: "campaign", Fenced: fenced, Unfenced: unfenced, History: h, Think: campThink}
		wg.Go(func() {
			w.Run(ctx)
			m.Close(context.Background())
		})
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	faults := 0
	for sleep(ctx, time.Duration(500+rng.IntN(1500))*time.Millisecond) {
		victim := h.Holder("campaign") // mostly the holder: that is where faults bite
		if victim == "" || rng.IntN(4) == 0 {
			victim = names[rng.IntN(len(names))]
		}
		mem.FailContender(victim, memstore.FaultHang)
		faults++
		sleep(ctx, time.Duration(100+rng.IntN(2000))*time.Millisecond)
		mem.Heal()
	}
	mem.Heal()
	wg.Wait()
	return CheckHolds(h.Holds()), fenced, unfenced, faults
}

// TestCampaignMemstore: on a correct store, a campaign of cut-off holders
// breaks no invariant, fenced writes lose nothing, and leases are lost
// (the faults did bite).
func TestCampaignMemstore(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				rep, fenced, unfenced, faults := campaign(t, mem, mem, seed, campRun)
				vs := append(rep.Violations, fenced.Check()...)
				for _, v := range vs {
					t.Error(v)
				}
				fs, us := fenced.Stats(), unfenced.Stats()
				t.Logf("%d faults, %d holds (%d lost), margin %v; fenced %+v; unfenced %+v",
					faults, rep.Holds, rep.Lost, rep.Margin, fs, us)
				if rep.Lost == 0 || fs.Accepted < 20 {
					t.Errorf("the campaign did not exercise the store: %d holds lost, %d increments", rep.Lost, fs.Accepted)
				}
			})
		})
	}
}

// TestCampaignCatchesBrokenStores: the same campaign on stores with a
// planted bug reports it — tokens that do not grow (I1), and grants that
// lapse before their holders' deadlines (I6).
func TestCampaignCatchesBrokenStores(t *testing.T) {
	for _, c := range []struct {
		name string
		wrap func(lease.Store) lease.Store
		want string
	}{
		{"flat tokens", func(s lease.Store) lease.Store { return flatTokens{s} }, "I1"},
		{"early expiry", func(s lease.Store) lease.Store { return earlyExpiry{s} }, "I6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				// Long (in fake time), so that the planted bug is hit
				// whatever the lease's random jitter draws.
				rep, fenced, _, _ := campaign(t, mem, c.wrap(mem), 1, 10*campRun)
				found := map[string]int{}
				for _, v := range append(rep.Violations, fenced.Check()...) {
					found[v.Invariant]++
				}
				if found[c.want] == 0 {
					t.Errorf("no %s violation found (found %v)", c.want, found)
				}
			})
		})
	}
}

// flatTokens is a store whose every grant has token 1.
type flatTokens struct{ lease.Store }

func (s flatTokens) Acquire(ctx context.Context, m, c string, ttl, tr time.Duration) (lease.Record, error) {
	r, err := s.Store.Acquire(ctx, m, c, ttl, tr)
	if r.Token != 0 {
		r.Token = 1
	}
	return r, err
}

func (s flatTokens) Renew(ctx context.Context, m, c string, tok uint64, ttl, tr time.Duration) (lease.Record, error) {
	cur, err := s.Store.Get(ctx, m)
	if err != nil || cur.OwnerID != c {
		return cur, lease.ErrNotHeld
	}
	r, err := s.Store.Renew(ctx, m, c, cur.Token, ttl, tr)
	r.Token = 1
	return r, err
}

func (s flatTokens) Release(ctx context.Context, m, c string, tok uint64) error {
	cur, err := s.Store.Get(ctx, m)
	if err != nil || cur.OwnerID != c {
		return s.Store.Release(ctx, m, c, 0)
	}
	return s.Store.Release(ctx, m, c, cur.Token)
}

// earlyExpiry is a store whose grants lapse at ttl on the server while it
// tells their holders they last ttl + transition: another contender can be
// granted the lock before the holder's deadline.
type earlyExpiry struct{ lease.Store }

func (s earlyExpiry) Acquire(ctx context.Context, m, c string, ttl, tr time.Duration) (lease.Record, error) {
	r, err := s.Store.Acquire(ctx, m, c, ttl, 0)
	return promise(r, c, tr), err
}

func (s earlyExpiry) Renew(ctx context.Context, m, c string, tok uint64, ttl, tr time.Duration) (lease.Record, error) {
	r, err := s.Store.Renew(ctx, m, c, tok, ttl, 0)
	return promise(r, c, tr), err
}

func promise(r lease.Record, c string, tr time.Duration) lease.Record {
	if r.Held(c) {
		r.Transition = r.TTL + tr
	}
	return r
}

// TestClockStepSizes: steps within the assumption are smaller than the
// safety margin, steps beyond it larger, each in its direction.
func TestClockStepSizes(t *testing.T) {
	const margin, span = 500 * time.Millisecond, 3 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		for kind, ok := range map[string]func(d time.Duration) bool{
			FaultClockForward:     func(d time.Duration) bool { return d > 0 && d < margin },
			FaultClockBackward:    func(d time.Duration) bool { return d < 0 && -d < margin },
			FaultClockFarForward:  func(d time.Duration) bool { return d > margin && d <= 2*span },
			FaultClockFarBackward: func(d time.Duration) bool { return d < -margin && -d <= 2*span },
		} {
			if d := ClockStep(kind, margin, span, rng); !ok(d) {
				t.Fatalf("%s: step %v", kind, d)
			}
		}
	}
}

// TestBeyondAssumptions: an overlap of holds within the window after a
// fault beyond the assumptions is counted on that fault, not as a
// violation; an overlap outside it, and a token or fence breach anywhere,
// stays a violation.
func TestBeyondAssumptions(t *testing.T) {
	eps := []Episode{
		{Fault: FaultClockFarForward, Beyond: true, Start: 10 * time.Second},
		{Fault: FaultClockForward, Start: 30 * time.Second},
	}
	at := func(inv string, d time.Duration) Violation { v := violation(inv, "x"); v.At = d; return v }
	vs := []Violation{
		at("I6", 11*time.Second),      // after the far step: moved
		at("I6", 31*time.Second),      // after a step within the margin: a violation
		at("I1", 11*time.Second),      // tokens: always a violation
		violation("I2", "lost write"), // the fence: always
	}
	rest, moved := beyond(eps, vs, 5*time.Second)
	if len(moved) != 1 || moved[0].At != 11*time.Second || eps[0].Overlaps != 1 || eps[1].Overlaps != 0 {
		t.Errorf("moved %v, overlaps %d, %d; want the first I6 on the far step", moved, eps[0].Overlaps, eps[1].Overlaps)
	}
	if len(rest) != 3 {
		t.Errorf("violations left %v; want the other three", rest)
	}
}

// TestClockStepDetections: a clock_step event is counted on the latest
// step in its direction that began within the window before it, and a
// step beyond the assumptions was caught first when its first event came
// before its first overlap.
func TestClockStepDetections(t *testing.T) {
	s := time.Second
	eps := []Episode{
		{Fault: FaultClockForward, Step: 100 * time.Millisecond, Start: 10 * s},
		{Fault: FaultClockFarForward, Step: 3 * s, Beyond: true, Start: 20 * s},
		{Fault: FaultClockBackward, Step: -100 * time.Millisecond, Start: 21 * s},
		{Fault: FaultClockFarForward, Step: 3 * s, Beyond: true, Start: 40 * s},
	}
	detected(eps, []Detection{
		{"a", 11 * s, true},  // the small step
		{"a", 22 * s, true},  // the far step, not the later backward one
		{"b", 22 * s, false}, // the backward step
		{"a", 30 * s, true},  // beyond every window: nobody's
		{"b", 43 * s, true},  // the second far step, after its overlap
	}, 5*s)
	for i, want := range []int{1, 1, 1, 1} {
		if eps[i].Detected != want {
			t.Errorf("episode %d (%s): %d detections, want %d", i, eps[i].Fault, eps[i].Detected, want)
		}
	}
	eps[1].Overlaps, eps[1].FirstOverlap = 1, 23*s
	eps[3].Overlaps, eps[3].FirstOverlap = 1, 42*s
	if !eps[1].CaughtFirst() || eps[3].CaughtFirst() {
		t.Errorf("caught first: %v, %v; want true (event before the overlap), false (after)", eps[1].CaughtFirst(), eps[3].CaughtFirst())
	}
}

// TestHandoffAfterDeadHead: after the head waiter is killed, the next
// release must be followed by a grant within the bound; a stall is an I5
// violation, and a kill near a server fault is not judged.
func TestHandoffAfterDeadHead(t *testing.T) {
	s := time.Second
	kill := Episode{Fault: FaultKillHead, Victim: "p.1", Start: 10 * s, Healed: 14 * s, mutex: "m"}
	holds := func(next time.Duration) []Hold {
		return []Hold{
			{Mutex: "m", Client: "w0", Token: 1, Acquired: 9 * s, Done: 11 * s},
			{Mutex: "m", Client: "w1", Token: 2, Acquired: next, Done: next + s},
		}
	}
	if gaps, vs := checkHandoff("x", []Episode{kill}, holds(11*s+100*time.Millisecond), 3*s, 2*s); len(vs) != 0 || len(gaps) != 1 {
		t.Errorf("a prompt hand-off: gaps %v, violations %v", gaps, vs)
	}
	if _, vs := checkHandoff("x", []Episode{kill}, holds(14*s), 3*s, 2*s); len(vs) != 1 || vs[0].Invariant != "I5" {
		t.Errorf("a 3 s stall: violations %v, want one I5", vs)
	}
	restart := Episode{Fault: FaultRestartSrv, Start: 9 * s, Healed: 9 * s}
	if gaps, vs := checkHandoff("x", []Episode{kill, restart}, holds(14*s), 3*s, 2*s); len(vs)+len(gaps) != 0 {
		t.Errorf("beside a server restart: gaps %v, violations %v; want it not judged", gaps, vs)
	}
}

// TestHandoffCutByServerPause: a server pause that starts after the kill
// episode healed but before the hand-off's bound ran out stalls the grant
// the next waiter was about to get; that hand-off is not judged (the
// campaign of 2026-11-24, redis lane 1: the head killed at 27m31.80,
// released at 27m32.13, the server paused from 27m34.17 to 27m39.13, the
// next grant at 27m40.26, reported as an 8.13 s stall against 2.5 s). A
// pause after the bound ran out does not excuse a stall.
func TestHandoffCutByServerPause(t *testing.T) {
	kill := Episode{Fault: FaultKillHead, Victim: "redis-1-p0.95", Start: at(27, 31.801), Healed: at(27, 33.504), mutex: "m"}
	step := Episode{Fault: FaultClockBackward, Start: at(27, 31.349), Healed: at(27, 33.383), Step: -76 * time.Millisecond}
	holds := []Hold{
		{Mutex: "m", Client: "redis-1-w2", Token: 1, Acquired: at(27, 30.1), Done: at(27, 32.129)},
		{Mutex: "m", Client: "redis-1-w0", Token: 2, Acquired: at(27, 40.259), Done: at(27, 42.3)},
	}
	pause := func(start time.Duration) Episode {
		return Episode{Fault: FaultPauseServer, Start: start, Healed: start + 5*time.Second}
	}
	if gaps, vs := checkHandoff("redis", []Episode{kill, step, pause(at(27, 34.166))}, holds, 3*time.Second, 2500*time.Millisecond); len(vs)+len(gaps) != 0 {
		t.Errorf("a pause 2.04 s after the release: gaps %v, violations %v; want it not judged", gaps, vs)
	}
	if _, vs := checkHandoff("redis", []Episode{kill, step, pause(at(27, 34.7))}, holds, 3*time.Second, 2500*time.Millisecond); len(vs) != 1 || vs[0].Invariant != "I5" {
		t.Errorf("a pause after the bound ran out: violations %v, want one I5", vs)
	}
}

// TestWaitersOrder: the longest waiting comes first; one that got the
// lock or left no longer waits.
func TestWaitersOrder(t *testing.T) {
	h := NewHistory()
	h.Waiting("m", "b", 2*time.Second)
	h.Waiting("m", "a", time.Second)
	h.Waiting("m", "c", 3*time.Second)
	h.Waiting("other", "d", 0)
	h.Waiting("m", "c", -1)
	if got := h.Waiters("m"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("waiters %v, want [a b]", got)
	}
}
