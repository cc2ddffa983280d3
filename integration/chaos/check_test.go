package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
)

const ms = time.Millisecond

func hold(client string, token uint64, sent, acquired, done time.Duration) Hold {
	return Hold{Mutex: "m", Client: client, Token: token, Sent: sent, Acquired: acquired, Done: done}
}

// invariants lists the invariants of vs, in order.
func invariants(vs []Violation) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.Invariant)
	}
	return strings.Join(s, ",")
}

func TestCheckHolds(t *testing.T) {
	for _, c := range []struct {
		name   string
		holds  []Hold
		want   string // invariants violated, in order
		margin time.Duration
	}{
		{"clean hand-offs", []Hold{
			hold("a", 1, 0, 1*ms, 10*ms),
			hold("b", 2, 2*ms, 12*ms, 20*ms),
			hold("a", 3, 11*ms, 25*ms, Open),
		}, "", 2 * ms},
		{"overlap", []Hold{
			hold("a", 1, 0, 1*ms, 10*ms),
			hold("b", 2, 2*ms, 9*ms, 20*ms),
		}, "I6", -1 * ms},
		{"acquired while an open hold lasts", []Hold{
			hold("a", 1, 0, 1*ms, Open),
			hold("b", 2, 2*ms, 30*ms, 40*ms),
		}, "I6", 0},
		{"token went back", []Hold{
			hold("a", 5, 0, 1*ms, 10*ms),
			hold("b", 4, 11*ms, 12*ms, 20*ms),
		}, "I1", 2 * ms},
		{"token repeated by the same contender", []Hold{
			hold("a", 5, 0, 1*ms, 10*ms),
			hold("a", 5, 11*ms, 12*ms, 20*ms),
		}, "I1,I1", 2 * ms},
		{"lower token sent before the other was acquired", []Hold{
			hold("a", 5, 0, 10*ms, 20*ms),
			hold("b", 4, 5*ms, 30*ms, 40*ms),
		}, "", 10 * ms},
		{"a late token behind a long hold", []Hold{
			hold("a", 7, 0, 1*ms, 100*ms),
			hold("b", 8, 101*ms, 102*ms, 110*ms),
			hold("c", 6, 111*ms, 112*ms, 120*ms),
		}, "I1", 2 * ms},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := CheckHolds(c.holds)
			if got := invariants(rep.Violations); got != c.want {
				t.Errorf("violations %q (%v), want %q", got, rep.Violations, c.want)
			}
			if c.margin != 0 && rep.Margin != c.margin {
				t.Errorf("margin %v, want %v", rep.Margin, c.margin)
			}
		})
	}
}

// TestCheckHoldsPerMutex: holds of different locks never conflict.
func TestCheckHoldsPerMutex(t *testing.T) {
	a, b := hold("a", 1, 0, 1*ms, Open), hold("b", 1, 0, 1*ms, Open)
	b.Mutex = "other"
	if rep := CheckHolds([]Hold{a, b}); len(rep.Violations) != 0 {
		t.Errorf("violations across locks: %v", rep.Violations)
	}
}

func TestRegister(t *testing.T) {
	f, u := NewRegister(true), NewRegister(false)
	// a (token 1) reads 0; b (token 2) reads 0 and writes 1; a's stale
	// write of 1 is refused by the fence and taken by the unfenced one.
	for _, r := range []*Register{f, u} {
		va, _ := r.Read("a", 1)
		vb, _ := r.Read("b", 2)
		if err := r.Write("b", 2, vb+1); err != nil {
			t.Fatal(err)
		}
		err := r.Write("a", 1, va+1)
		if r == f && !errors.Is(err, ErrFenced) {
			t.Errorf("fenced stale write = %v, want ErrFenced", err)
		}
		if r == u && err != nil {
			t.Errorf("unfenced stale write = %v", err)
		}
	}
	if s := f.Stats(); s.Value != 1 || s.Accepted != 1 || s.Refused != 1 || s.Lost != 0 {
		t.Errorf("fenced stats %+v", s)
	}
	if vs := f.Check(); len(vs) != 0 {
		t.Errorf("fenced violations %v", vs)
	}
	if s := u.Stats(); s.Value != 1 || s.Accepted != 2 || s.Lost != 1 {
		t.Errorf("unfenced stats %+v, want one lost update", s)
	}
	if vs := u.Check(); vs != nil {
		t.Errorf("an unfenced register reports violations: %v", vs)
	}
}

// TestRegisterCatchesSharedToken: two holders with one token (an I1 bug
// in a store) lose an update through the fence; Check says so.
func TestRegisterCatchesSharedToken(t *testing.T) {
	r := NewRegister(true)
	va, _ := r.Read("a", 3)
	vb, _ := r.Read("b", 3)
	_ = r.Write("b", 3, vb+1)
	_ = r.Write("a", 3, va+1)
	if got := invariants(r.Check()); got != "I1,I2" {
		t.Errorf("violations %q (%v), want I1,I2", got, r.Check())
	}
}

func TestHistoryConcurrent(t *testing.T) {
	h := NewHistory()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := h.Now()
			hd := h.Begin("m", "c", uint64(i+1), sent, h.Now())
			h.End(hd, h.Now(), i%2 == 0)
		}()
	}
	wg.Wait()
	hs := h.Holds()
	if len(hs) != 20 {
		t.Fatalf("%d holds, want 20", len(hs))
	}
	rep := CheckHolds(hs)
	if rep.Holds != 20 || rep.Lost != 10 {
		t.Errorf("report %+v", rep)
	}
	for _, hd := range hs {
		if hd.Done == Open || hd.Done < hd.Acquired || hd.Acquired < hd.Sent {
			t.Errorf("hold times out of order: %+v", hd)
		}
	}
}

// TestLostMargin: the margin after a loss counts only holds that ended by
// loss.
func TestLostMargin(t *testing.T) {
	lost := hold("a", 1, 0, 1*ms, 10*ms)
	lost.Lost = true
	rep := CheckHolds([]Hold{
		lost,
		hold("b", 2, 2*ms, 15*ms, 20*ms),  // 5 ms after a's loss
		hold("c", 3, 16*ms, 21*ms, 30*ms), // 1 ms after b's release
	})
	if rep.LostMargin != 5*ms || rep.Margin != ms {
		t.Errorf("margins %v after a loss, %v overall; want 5ms, 1ms", rep.LostMargin, rep.Margin)
	}
}

// TestOverlapTellsHowTheHoldEnded: an I6 violation says whether the
// earlier hold was released or lost, and a lost one's deadline where the
// worker knew it (a Done later than the deadline is the scheduling of a
// loaded machine, not a belief the lease held).
func TestOverlapTellsHowTheHoldEnded(t *testing.T) {
	lost := hold("a", 1, 0, 1*ms, 10*ms)
	lost.Lost, lost.Deadline = true, 8*ms
	released := hold("c", 3, 20*ms, 21*ms, 30*ms)
	rep := CheckHolds([]Hold{lost, hold("b", 2, 2*ms, 9*ms, 15*ms), released, hold("d", 4, 22*ms, 29*ms, 40*ms)})
	if len(rep.Violations) != 2 ||
		!strings.HasSuffix(rep.Violations[0].Detail, "held until 10ms (lost; its deadline was 8ms)") ||
		!strings.HasSuffix(rep.Violations[1].Detail, "held until 30ms (released)") {
		t.Errorf("violations %+v; want two I6, telling a lost hold's deadline and a released hold", rep.Violations)
	}
}

// TestStoppedHolds: a hold over a stop of its process (SIGSTOP, kill) is
// not held to I3 — it is late by the stop — but a hold acquired while
// another, running holder still believed it held is.
func TestStoppedHolds(t *testing.T) {
	h := NewHistory()
	a := h.Begin("m", "a", 1, 0, 1*ms)
	h.End(a, 50*ms, true) // told 40 ms after b's grant: it was stopped
	b := h.Begin("m", "b", 2, 5*ms, 10*ms)
	h.End(b, 20*ms, false)
	c := h.Begin("m", "c", 3, 6*ms, 15*ms) // while b held: a violation
	h.End(c, 30*ms, false)
	h.Stopped("a", 2*ms, 45*ms)
	h.Stopped("b", 100*ms, 200*ms) // after b's hold: changes nothing
	holds := h.Holds()
	if !holds[0].Stopped || holds[1].Stopped || holds[2].Stopped {
		t.Fatalf("Stopped marks %v %v %v, want only a's", holds[0].Stopped, holds[1].Stopped, holds[2].Stopped)
	}
	rep := CheckHolds(holds)
	if got := invariants(rep.Violations); got != "I6" || !strings.Contains(rep.Violations[0].Detail, "c acquired") {
		t.Errorf("violations %v, want only c's grant during b's hold", rep.Violations)
	}
	h.EndOpen("c", 99*ms) // ended: nothing open is touched
	d := h.Begin("m", "d", 4, 31*ms, 32*ms)
	h.EndOpen("d", 40*ms)
	if got := h.Holds()[3]; got.Done != 40*ms || !got.Lost || d.Token != 4 {
		t.Errorf("EndOpen: %+v", got)
	}
}

// TestCheckTakeover: I5 is judged on cut-off and killed holders, not
// when a server fault overlaps the window or the window outlives the run.
func TestCheckTakeover(t *testing.T) {
	const span, end = 3 * time.Second, time.Minute
	kill := Episode{Fault: FaultKillProc, Victim: "a", Held: true, Start: 10 * time.Second, Healed: 11 * time.Second, mutex: "m"}
	late := []Hold{{Mutex: "m", Client: "b", Token: 2, Acquired: 16 * time.Second, Done: 17 * time.Second}}
	quick := []Hold{{Mutex: "m", Client: "b", Token: 2, Acquired: 14 * time.Second, Done: 17 * time.Second}}
	if vs := checkTakeover("s", []Episode{kill}, late, span, end, false); invariants(vs) != "I5" {
		t.Errorf("takeover 6 s after a kill (bound 5 s): %v, want I5", vs)
	}
	if vs := checkTakeover("s", []Episode{kill}, quick, span, end, false); len(vs) != 0 {
		t.Errorf("takeover 4 s after a kill: %v", vs)
	}
	pause := Episode{Fault: FaultPauseServer, Start: 12 * time.Second, Healed: 13 * time.Second}
	if vs := checkTakeover("s", []Episode{kill, pause}, late, span, end, false); len(vs) != 0 {
		t.Errorf("server paused during the window: %v, want not judged", vs)
	}
	if vs := checkTakeover("s", []Episode{kill}, nil, span, 14*time.Second, false); len(vs) != 0 {
		t.Errorf("window past the end of the run: %v, want not judged", vs)
	}
	slow := kill
	slow.Fault = FaultDelay
	if vs := checkTakeover("s", []Episode{slow}, late, span, end, false); len(vs) != 0 {
		t.Errorf("a slowed holder: %v, want not judged", vs)
	}
}

// at is m minutes and sec seconds into a run.
func at(m int, sec float64) time.Duration {
	return time.Duration(m)*time.Minute + time.Duration(sec*float64(time.Second))
}

// TestTakeoverAfterOrphanedGrant: a waiter whose calls are cut in the
// window of a killed holder may be granted the lock without hearing it,
// and that grant keeps the others out until its transition ends (make
// chaos, 2026-11-24, sqlite lane 0: p0.67 killed at 15m29.63; w2's calls
// cut from 15m33.04 to 15m35.50 while it waited; token 364 granted to
// nobody recorded; token 365 at 15m35.77, 6.1 s after the kill, reported
// against a bound of 5 s). Without that second fault the bound holds.
func TestTakeoverAfterOrphanedGrant(t *testing.T) {
	const span = 3 * time.Second
	kill := Episode{Fault: FaultKillProc, Victim: "sqlite-0-p0.67", Held: true, Start: at(15, 29.633), Healed: at(15, 31.443), mutex: "m"}
	cut := Episode{Fault: FaultDelay, Victim: "sqlite-0-w2", Start: at(15, 33.045), Healed: at(15, 35.495), mutex: "m"}
	holds := []Hold{
		{Mutex: "m", Client: "sqlite-0-p0.67", Token: 363, Acquired: at(15, 27.534), Done: at(15, 29.803), Stopped: true},
		{Mutex: "m", Client: "sqlite-0-w0", Token: 365, Acquired: at(15, 35.768), Done: at(15, 37.780)},
	}
	if vs := checkTakeover("sqlite", []Episode{kill, cut}, holds, span, time.Hour, true); len(vs) != 0 {
		t.Errorf("a waiter's calls cut in the window: %v, want the bound stretched by a span", vs)
	}
	if vs := checkTakeover("sqlite", []Episode{kill}, holds, span, time.Hour, true); invariants(vs) != "I5" {
		t.Errorf("no second fault: %v, want I5", vs)
	}
	cut.Held = true // a holder cut off makes no grant it does not hear of
	if vs := checkTakeover("sqlite", []Episode{kill, cut}, holds, span, time.Hour, true); invariants(vs) != "I5" {
		t.Errorf("a holder's calls cut in the window: %v, want I5", vs)
	}
}

// TestTakeoverAfterStopBlocks: on SQLite a process stopped inside a write
// transaction keeps every other contender out of the file until it
// resumes, so a takeover is judged from the resume (make chaos,
// 2026-11-24, sqlite lane 1: p0.126 stopped from 28m51.94 to 28m57.49;
// the next grant 28 ms after the resume, reported against a bound of 5 s
// after the start). Elsewhere the bound runs from the start.
func TestTakeoverAfterStopBlocks(t *testing.T) {
	const span = 3 * time.Second
	stop := Episode{Fault: FaultStopProc, Victim: "sqlite-1-p0.126", Held: true, Start: at(28, 51.944), Healed: at(28, 57.486), mutex: "m"}
	holds := []Hold{
		{Mutex: "m", Client: "sqlite-1-p0.126", Token: 665, Acquired: at(28, 50.141), Done: at(28, 57.489), Stopped: true},
		{Mutex: "m", Client: "sqlite-1-w0", Token: 666, Acquired: at(28, 57.517), Done: at(28, 58.979)},
	}
	if vs := checkTakeover("sqlite", []Episode{stop}, holds, span, time.Hour, true); len(vs) != 0 {
		t.Errorf("a grant 28 ms after the resume: %v, want none", vs)
	}
	if vs := checkTakeover("postgres", []Episode{stop}, holds, span, time.Hour, false); invariants(vs) != "I5" {
		t.Errorf("a server store: %v, want I5", vs)
	}
	late := slices.Clone(holds)
	late[1].Acquired = stop.Healed + span + 3*time.Second
	if vs := checkTakeover("sqlite", []Episode{stop}, late, span, time.Hour, true); invariants(vs) != "I5" {
		t.Errorf("a grant 6 s after the resume: %v, want I5", vs)
	}
}

// TestWaitSpans: the history keeps every wait, closed when its client no
// longer waits or waits anew.
func TestWaitSpans(t *testing.T) {
	now := time.Duration(0)
	h := &History{now: func() time.Duration { return now }}
	h.Waiting("m", "a", time.Second)
	now = 2 * time.Second
	h.Waiting("m", "a", -1)
	h.Waiting("m", "b", 3*time.Second)
	now = 4 * time.Second
	h.Waiting("m", "b", 4*time.Second) // again: the first wait ends
	want := []Wait{
		{"m", "a", time.Second, 2 * time.Second},
		{"m", "b", 3 * time.Second, 4 * time.Second},
		{"m", "b", 4 * time.Second, Open},
	}
	if got := h.Waits(); !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

// TestWakeAfterRelease: a release while another contender waits is
// followed by the next grant within the bound; a longer gap is an I5
// violation (the MySQL doorbell re-arm race of issue 14: a waiter that
// missed its wake-up slept until its poll), unless a fault was near: on
// a contender of the lock, a server fault (not a clock step within the
// margin), a kill of the notification connections. Releases nobody
// waited for, and lost holds, are not judged.
func TestWakeAfterRelease(t *testing.T) {
	s := time.Second
	const span, bound, end = 3 * time.Second, 2 * time.Second, time.Minute
	holds := func(next time.Duration) []Hold {
		return []Hold{
			{Mutex: "m", Client: "a", Token: 1, Acquired: 8 * s, Done: 10 * s},
			{Mutex: "m", Client: "b", Token: 2, Acquired: next, Done: next + s},
		}
	}
	waits := []Wait{{"m", "b", 9 * s, Open}}
	stall := holds(13 * s)
	if gaps, vs := checkWake("x", nil, holds(10*s+100*time.Millisecond), waits, span, bound, end); len(vs) != 0 || !slices.Equal(gaps, []time.Duration{100 * time.Millisecond}) {
		t.Errorf("a prompt hand-off: gaps %v, violations %v", gaps, vs)
	}
	if _, vs := checkWake("x", nil, stall, waits, span, bound, end); invariants(vs) != "I5" {
		t.Errorf("a 3 s stall: violations %v, want I5", vs)
	}
	if gaps, vs := checkWake("x", nil, stall, waits, span, 0, end); len(vs) != 0 || len(gaps) != 1 {
		t.Errorf("bound 0: gaps %v, violations %v; want measured only", gaps, vs)
	}
	if gaps, vs := checkWake("x", nil, stall, []Wait{{"m", "b", 11 * s, Open}}, span, bound, end); len(vs)+len(gaps) != 0 {
		t.Errorf("nobody waited at the release: gaps %v, violations %v", gaps, vs)
	}
	lost := holds(13 * s)
	lost[0].Lost = true
	if gaps, vs := checkWake("x", nil, lost, waits, span, bound, end); len(vs)+len(gaps) != 0 {
		t.Errorf("a lost hold: gaps %v, violations %v", gaps, vs)
	}
	for _, c := range []struct {
		name  string
		e     Episode
		judge bool
	}{
		{"a waiter black-holed until just before", Episode{Fault: FaultBlackhole, Victim: "b", Start: 5 * s, Healed: 9 * s, mutex: "m"}, false},
		{"a contender of the lock killed just after", Episode{Fault: FaultKillWaiter, Victim: "c", Start: 11 * s, Healed: 11 * s, mutex: "m"}, false},
		{"a fault long healed", Episode{Fault: FaultBlackhole, Victim: "b", Start: 1 * s, Healed: 2 * s, mutex: "m"}, true},
		{"a fault on another lock", Episode{Fault: FaultBlackhole, Victim: "z", Start: 9 * s, Healed: 11 * s, mutex: "other"}, true},
		{"notification connections killed (any lock)", Episode{Fault: FaultKillPush, Start: 9 * s, Healed: 9 * s, mutex: "other"}, false},
		{"a server pause after the release", Episode{Fault: FaultPauseServer, Start: 11 * s, Healed: 12 * s, mutex: "other"}, false},
		{"a clock step within the margin", Episode{Fault: FaultClockForward, Start: 10 * s, Healed: 11 * s, Step: 100 * time.Millisecond, mutex: "m"}, true},
	} {
		_, vs := checkWake("x", []Episode{c.e}, stall, waits, span, bound, end)
		if got := len(vs) == 1; got != c.judge {
			t.Errorf("%s: violations %v, want judged %v", c.name, vs, c.judge)
		}
	}
	if gaps, vs := checkWake("x", nil, stall[:1], waits, span, bound, 11*s); len(vs)+len(gaps) != 0 {
		t.Errorf("the bound past the end of the run: gaps %v, violations %v", gaps, vs)
	}
	if _, vs := checkWake("x", nil, stall[:1], waits, span, bound, end); invariants(vs) != "I5" {
		t.Errorf("no grant until the end of the run: violations %v, want I5", vs)
	}
}

// TestMisfitJudge: a contender whose safety margin exceeds the store's
// longest grant must be refused with the documented error, promptly and
// in a handful of store calls; a Manager that retries a dead-on-arrival
// grant at once (issue 14: about 1,050 writes per second to ZooKeeper)
// breaks both.
func TestMisfitJudge(t *testing.T) {
	s := time.Second
	ok := []Misfit{
		{Start: 2 * s, End: 2*s + time.Millisecond, Err: fmt.Errorf("x: %w", lease.ErrInvalidArgument)},            // NewManager refused
		{Start: 4 * s, End: 4*s + 30*time.Millisecond, Calls: 2, Err: fmt.Errorf("y: %w", lease.ErrGrantTooShort)}, // Acquire failed
		{Start: 6 * s, End: 7 * s, Calls: 9999, Err: context.Canceled, Cut: true},                                  // the run ended
	}
	if vs := checkMisfits("x", ok, nil, 3*s); len(vs) != 0 {
		t.Errorf("refused at once: %v", vs)
	}
	spin := Misfit{Start: 2 * s, End: 7 * s, Calls: 5230, Err: context.DeadlineExceeded}
	vs := checkMisfits("x", []Misfit{spin}, nil, 3*s)
	if invariants(vs) != "S12,S12" || !strings.Contains(vs[1].Detail, "5230 store calls in 5s") {
		t.Errorf("a spin until the caller gave up: %v, want S12 for the error and for the calls", vs)
	}
	granted := Misfit{Start: 2 * s, End: 2*s + 10*time.Millisecond, Calls: 1}
	if vs := checkMisfits("x", []Misfit{granted}, nil, 3*s); invariants(vs) != "S12" {
		t.Errorf("granted: %v, want S12", vs)
	}
	slow := Misfit{Start: 2 * s, End: 5 * s, Calls: 3, Err: fmt.Errorf("y: %w", lease.ErrGrantTooShort)}
	if vs := checkMisfits("x", []Misfit{slow}, nil, 3*s); invariants(vs) != "S12" {
		t.Errorf("told after 3 s: %v, want S12", vs)
	}
	pause := Episode{Fault: FaultPauseServer, Start: 1 * s, Healed: 3 * s}
	if vs := checkMisfits("x", []Misfit{slow}, []Episode{pause}, 3*s); len(vs) != 0 {
		t.Errorf("told after 3 s while the server was paused: %v, want none", vs)
	}
}
