package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/simba-go/simba/lease"
)

// Faulter is a fault that can be put on one client's connection
// (integration/faultproxy's Proxy is one).
type Faulter interface {
	Blackhole()
	Cut()
	Delay(d time.Duration)
	Heal()
}

// Server is a store server the nemesis may pause or restart (a private
// integration/testserver Process is one).
type Server interface {
	Pause() error
	Resume() error
	Restart() error
}

// ServerFault is a fault of a set-up's server beyond a pause and a
// restart (a Redis restart from a snapshot, a crash with an append-only
// file, a FLUSHALL). Inject does it and returns when it is over; last is
// how long the nemesis drew for it, for faults that can use it; a fault
// that stops the server calls cut (when not nil) just before it does.
type ServerFault struct {
	Kind   string
	Inject func(ctx context.Context, last time.Duration, cut func()) error
}

// Stepper steps the wall clock of a set-up's servers
// (integration/testserver's ServerClock).
type Stepper interface {
	Step(d time.Duration) error
}

// Setup is one backend of a campaign.
type Setup struct {
	Name string
	// Client returns a new store client, with its own connection behind its
	// own Faulter (nil when the store is in-process), and the Manager
	// options the store needs (nil for the campaign's ttl and transition).
	Client func() (lease.Store, Faulter, []lease.Option)
	// Spawn, when not nil, makes a contender process: a command, not yet
	// started, whose program calls [ChildMain] with a store client of its
	// own behind the returned Faulter (nil: only signals reach it). The
	// campaign adds the run's environment and starts it.
	Spawn func() (*exec.Cmd, Faulter)
	// Server, when not nil, may be paused and restarted.
	Server Server
	// KillPush, when not nil, kills the store's notification connections
	// (LISTEN sessions, subscriber connections, doorbell waiters) from the
	// server's side (S6).
	KillPush func() error
	// TTL and Transition of the Managers (unless Client's options say
	// otherwise).
	TTL, Transition time.Duration
	// Think is how long a holder works between its read and its write
	// (default TTL): a fault that cuts a holder off within Think of its
	// grant finds it still holding as long as it believes its lease.
	Think time.Duration
	// Turns: every other hold, at random, lasts a few milliseconds, so
	// that contenders take turns quickly (in-process workers other than
	// the Contender, and processes). A waiter that missed its wake-up
	// then reaches the head of the queue before its next poll, and the
	// hand-off to it stalls until that poll (issue 14's MySQL doorbell
	// re-arm race; see checkWake).
	Turns bool
	// Workers is the number of in-process contenders per lane (default 3),
	// Procs the number of contender processes per lane (default 1 when
	// Spawn is set).
	Workers, Procs int
	// Lanes is the number of independent locks, each with its own
	// contenders, registers and nemesis (default 1). Only lane 0's nemesis
	// pauses or restarts the server; the other lanes live through it.
	Lanes int
	// Extra are more server faults, drawn by lane 0's nemesis.
	Extra []ServerFault
	// Clock, when not nil, steps the servers' wall clock: lane 0's
	// nemesis draws steps forward and backward, smaller and larger than
	// Margin, the contenders' safety margin (see [ClockStep]).
	Clock  Stepper
	Margin time.Duration
	// First are fault kinds that lane 0's nemesis draws first, in this
	// order, before it draws at random: a short campaign includes them.
	First []string
	// Handoff, when not 0, bounds the next hand-off after the waiter at
	// the head of the queue was killed (see checkHandoff): the store's
	// hand-off window and a second to wake the next waiter. 0: those
	// hand-offs are measured, not judged.
	Handoff time.Duration
	// Wake, when not 0, bounds the next grant after a release while
	// others wait, away from faults (see checkWake): a woken waiter's
	// round trip on a loaded machine, far below the sleep until its poll
	// of a waiter that missed its wake-up. 0: measured only.
	Wake time.Duration
	// Only, when not nil, restricts the fault kinds the nemeses draw to
	// those it matches (a campaign aimed at one fault).
	Only *regexp.Regexp
	// StopBlocks says that a contender process stopped (SIGSTOP) inside a
	// write transaction keeps every other contender out of the store until
	// it resumes (SQLite: the stopped process holds the file's write
	// lock). A takeover after a SIGSTOP is then judged from the resume,
	// not from the start (see checkTakeover).
	StopBlocks bool
	// Misfit, when not nil, runs a misconfigured contender in lane 0
	// (see [Misfit]): Misfit returns a store client of its own and
	// timings whose safety margin exceeds the longest grant the store
	// makes. It must be refused promptly with the documented error, in a
	// handful of store calls (see checkMisfits).
	Misfit func() (lease.Store, []lease.Option)
}

// Fault kinds of the nemesis (RELIABILITY.md's scenarios).
const (
	FaultBlackhole   = "blackhole a holder (S4)"
	FaultCut         = "reset a holder's connection (S4)"
	FaultDelay       = "slow a holder's calls to ttl/2 (S10)"
	FaultDropReplies = "drop replies after the server applied (S9)"
	FaultPauseHolder = "pause a holder mid-update (S1)"
	// Contender behaviours (of the lane's first in-process worker, which
	// runs as a Contender).
	FaultAbandon    = "Contender.Stop whose context ends before the callback returns (S16)"
	FaultStopInside = "Contender.Stop from inside its callback (S16)"
	FaultStopProc   = "SIGSTOP a holder process (S1)"
	FaultKillProc   = "kill -9 a holder process (S2)"
	// FaultKillWaiter kills a process that waits for the lock, queued
	// in the store (also what a FaultKillProc becomes when its victim
	// stopped holding meanwhile).
	FaultKillWaiter = "kill -9 a waiting process (S2)"
	// FaultKillHead kills the process that has waited longest while
	// others wait behind it: the head of a fair queue, whose store may
	// have reserved the next hand-off for it.
	FaultKillHead = "kill -9 the waiting process at the head of the queue (S2)"
	// FaultCloseInside: Manager.Close from inside the Contender's
	// callback; the worker goes on with a new Manager.
	FaultCloseInside = "Manager.Close from inside a Contender's callback (S16)"
	FaultPauseServer = "pause the server (S3)"
	FaultRestartSrv  = "restart the server (S3)"
	FaultKillPush    = "kill the notification connections (S6)"
	// Redis restarts that keep data, and a flush (S13).
	// The holder is cut off meanwhile (see nemesis).
	FaultRedisSnapshot = "SAVE, serve on, SHUTDOWN NOSAVE, restart from the RDB, holder cut off (S13)"
	FaultRedisAOF      = "appendfsync everysec, kill -9, restart from the AOF, holder cut off (S13)"
	FaultFlushAll      = "FLUSHALL (S13)"
	// FaultRedisFailover: a Sentinel-like failover of a primary with one
	// replica (S7): the primary is cut off from its replica and from the
	// clients on the promoted side, the replica is promoted, the clients
	// are moved to it, and the old primary becomes its replica.
	FaultRedisFailover = "promote the replica while the primary is cut off (S7)"
	// Steps of the servers' wall clock (S14): within the documented
	// assumption (smaller than the safety margin, or backward) and beyond
	// it (forward by more than the margin: a live grant loses more than
	// the margin holds in reserve).
	FaultClockForward     = "server clock steps forward < margin (S14)"
	FaultClockBackward    = "server clock steps backward < margin (S14)"
	FaultClockFarBackward = "server clock steps backward > margin (S14)"
	FaultClockFarForward  = "server clock steps forward > margin, beyond the assumption (S14)"
	episodeSettleTime     = 500 * time.Millisecond
)

// Episode is one injected fault and what followed it.
type Episode struct {
	Fault string
	// Victim is the contender the fault was aimed at ("" for the server),
	// and Held whether it held the lock when the fault began.
	Victim string
	Held   bool
	// Start and Healed are when the fault began and ended; Takeover how
	// long after Healed the next lease was acquired (-1 when none was by
	// the end of the run).
	Start, Healed, Takeover time.Duration
	// Step is how far a clock-step fault moved the servers' clock.
	Step time.Duration
	// Beyond is true for a fault outside the documented assumptions (a
	// forward clock step larger than the safety margin); Overlaps counts
	// the holds that overlapped another (I6) within ttl + transition + 2 s
	// of its start, which are reported with it instead of as violations.
	Beyond   bool
	Overlaps int
	// FirstOverlap is when the first of those overlaps began (when
	// Overlaps > 0).
	FirstOverlap time.Duration
	// Detected counts, for a clock step, the "clock_step" events of the
	// set-up's in-process Managers in the step's direction that followed
	// it (within ttl + transition + 2 s, before the next step in that
	// direction); FirstDetected is when the first came (when Detected > 0).
	Detected      int
	FirstDetected time.Duration
	mutex         string
}

// CaughtFirst reports whether the lease's clock-step detector reported a
// step beyond the assumptions before any hold overlapped another after it.
func (e Episode) CaughtFirst() bool {
	return e.Detected > 0 && (e.Overlaps == 0 || e.FirstDetected <= e.FirstOverlap)
}

// Result is what a campaign on one setup produced.
type Result struct {
	Setup string
	// Lanes, Workers and Procs are the set-up's: locks, and in-process
	// and process contenders per lock.
	Lanes, Workers, Procs int
	Episodes              []Episode
	Report                Report
	Fenced                RegisterStats
	Unfenced              RegisterStats
	// Violations are every invariant breach: the holds', the fenced
	// registers', takeovers past the I5 bound, and orphans (I7).
	Violations []Violation
	// Beyond are the overlaps of holds (I6) that followed a fault beyond
	// the documented assumptions (see Episode.Beyond): not violations of
	// a guarantee; the fenced register (I2, in Violations) still judges
	// the writes.
	Beyond []Violation
	// HeadHandoffs are, per judged kill of the head waiter, how long the
	// next hand-off took (see checkHandoff).
	HeadHandoffs []time.Duration
	Handoff      time.Duration // the set-up's bound on them (0: not judged)
	// Wakes are the hand-offs after releases that checkWake judged,
	// Wake the set-up's bound on them (0: not judged).
	Wakes []time.Duration
	Wake  time.Duration
	// Misfits are the attempts of the misconfigured contender (see
	// Setup.Misfit).
	Misfits []Misfit
}

// member is one contender of a lane: an in-process worker or a process.
type member struct {
	name string
	w    *Worker // in-process
	p    *proc   // a process
	f    Faulter // its connection; nil when none can be faulted
}

// Run runs a campaign on s for d: in each lane, contenders (in-process
// workers and processes) increment the lane's registers while a nemesis
// injects a random fault, lets it last, heals it and waits for things to
// settle, again and again. seed seeds the nemeses' choices.
func Run(ctx context.Context, s Setup, d time.Duration, seed uint64) Result {
	s.Workers, s.Lanes = cmp.Or(s.Workers, 3), cmp.Or(s.Lanes, 1)
	s.Margin = cmp.Or(s.Margin, max(s.Transition/2, s.TTL/10)) // the lease's default
	if s.Spawn == nil {
		s.Procs = 0
	} else {
		s.Procs = cmp.Or(s.Procs, 1)
	}
	fail := func(err error) Result {
		return Result{Setup: s.Name, Violations: []Violation{violation("setup", "%v", err)}}
	}
	dir, err := os.MkdirTemp("", "chaos")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	start := SystemClock()
	h := NewSystemHistory(start)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lanes := make([]*lane, s.Lanes)
	for i := range lanes {
		l, err := newLane(ctx, s, i, h, dir, start)
		if err != nil {
			cancel()
			for _, l := range lanes[:i] {
				l.stop()
			}
			return fail(err)
		}
		lanes[i] = l
	}
	var wg sync.WaitGroup
	for i, l := range lanes {
		wg.Go(func() { l.nemesis(ctx, rand.New(rand.NewPCG(seed, uint64(len(s.Name)*100+i)))) })
	}
	wg.Wait()
	end := h.Now() // the contenders stop acquiring now
	for _, l := range lanes {
		l.stop()
	}
	res := Result{Setup: s.Name, Lanes: s.Lanes, Workers: s.Workers, Procs: s.Procs, Report: CheckHolds(h.Holds()), Handoff: s.Handoff, Wake: s.Wake}
	span := s.TTL + s.Transition
	for _, l := range lanes {
		res.Fenced.add(l.fenced.Stats())
		res.Unfenced.add(l.unfenced.Stats())
		res.Violations = append(res.Violations, l.fenced.Check()...)
		res.Violations = append(res.Violations, l.errs...)
		if v, ok := orphans(s, l.mutex, span); !ok {
			res.Violations = append(res.Violations, v)
		}
		res.Episodes = append(res.Episodes, l.episodes...)
		res.Misfits = append(res.Misfits, l.misfitLog...)
	}
	res.Episodes = takeovers(res.Episodes, h.Holds())
	var hv []Violation
	hv, res.Beyond = beyond(res.Episodes, res.Report.Violations, span+2*time.Second)
	detected(res.Episodes, h.Detections(), span+2*time.Second)
	res.Violations = append(res.Violations, hv...)
	res.Violations = append(res.Violations, checkTakeover(s.Name, res.Episodes, h.Holds(), span, end, s.StopBlocks)...)
	var hv2 []Violation
	res.HeadHandoffs, hv2 = checkHandoff(s.Name, res.Episodes, h.Holds(), span, s.Handoff)
	res.Violations = append(res.Violations, hv2...)
	var wv []Violation
	res.Wakes, wv = checkWake(s.Name, res.Episodes, h.Holds(), h.Waits(), span, s.Wake, end)
	res.Violations = append(res.Violations, wv...)
	res.Violations = append(res.Violations, checkMisfits(s.Name, res.Misfits, res.Episodes, span)...)
	return res
}

// lane is one lock of a campaign with its contenders and registers.
type lane struct {
	s                Setup
	idx              int
	mutex            string
	h                *History
	fenced, unfenced *Register
	hub              *Hub
	members          []member
	ctx              context.Context
	wg               sync.WaitGroup // the in-process workers
	episodes         []Episode
	errs             []Violation
	misfitLog        []Misfit // lane 0's misconfigured contender (Setup.Misfit)
}

func newLane(ctx context.Context, s Setup, idx int, h *History, dir string, start time.Duration) (*lane, error) {
	l := &lane{s: s, idx: idx, mutex: fmt.Sprintf("chaos/%s/%d", s.Name, idx), h: h,
		fenced: NewRegister(true), unfenced: NewRegister(false), ctx: ctx}
	for i := range s.Workers {
		store, f, opts := s.Client()
		name := fmt.Sprintf("%s-%d-w%d", s.Name, idx, i)
		if opts == nil {
			opts = []lease.Option{lease.WithTTL(s.TTL), lease.WithTransition(s.Transition)}
		}
		// The Manager's log tells when its clock-step detector fired.
		opts = append(opts, lease.WithLogger(slog.New(stepLog{h, name})))
		// A Manager that replaces one its callback closed contends under
		// an id of its own (lease.WithContenderID): the closed Manager's
		// grant may still be live when its release failed (a server
		// restart meanwhile), and a store hands a live grant to its id
		// again, under the same token (seen as I1 in a 30-minute run:
		// 'token 117 granted to mysql-2-w0 at 3m28.96s and to mysql-2-w0
		// at 3m30.42s', a Close from inside the callback during a server
		// restart). The history still names the worker.
		gen := 0
		newManager := func() (*lease.Manager, error) {
			id := name
			if gen > 0 {
				id = fmt.Sprintf("%s.m%d", name, gen)
			}
			gen++
			return lease.NewManager(store, append(slices.Clone(opts), lease.WithContenderID(id))...)
		}
		m, err := newManager()
		if err != nil {
			l.stop()
			return nil, err
		}
		w := &Worker{Name: name, Manager: m, Mutex: l.mutex, Fenced: l.fenced, Unfenced: l.unfenced,
			History: h, Think: cmp.Or(s.Think, s.TTL), Turns: s.Turns, Lead: i == 0 && s.Workers > 1, NewManager: newManager}
		l.members = append(l.members, member{name: name, w: w, f: f})
		w.leader.init()
		l.wg.Go(func() {
			if w.Lead {
				w.RunLeader(ctx)
			} else {
				w.Run(ctx)
			}
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			w.Manager.Close(cctx)
			ccancel()
		})
	}
	if s.Misfit != nil && idx == 0 {
		store, opts := s.Misfit()
		l.wg.Go(func() { l.misfits(ctx, store, opts) })
	}
	if s.Procs == 0 {
		return l, nil
	}
	hub, err := NewHub(filepath.Join(dir, fmt.Sprintf("hub%d", idx)), l.mutex, h, l.fenced, l.unfenced)
	if err != nil {
		l.stop()
		return nil, err
	}
	l.hub = hub
	for i := range s.Procs {
		p := &proc{s: s, hub: hub.ln.Addr().String(), mutex: l.mutex, base: fmt.Sprintf("%s-%d-p%d", s.Name, idx, i),
			start: start, log: filepath.Join(dir, fmt.Sprintf("p%d-%d.log", idx, i))}
		if err := p.spawn(); err != nil {
			l.stop()
			return nil, err
		}
		l.members = append(l.members, member{name: p.name, p: p, f: p.f})
	}
	return l, nil
}

// stop ends the lane's contenders (processes by SIGTERM: they release and
// exit) and its hub, and heals every fault.
func (l *lane) stop() {
	for _, m := range l.members {
		if m.f != nil {
			m.f.Heal()
		}
	}
	l.wg.Wait()
	for _, m := range l.members {
		if m.w != nil {
			l.errs = append(l.errs, m.w.Errs()...)
		}
	}
	for _, m := range l.members {
		if m.p != nil {
			if err := m.p.terminate(); err != nil {
				l.errs = append(l.errs, violation("setup", "%s: %v", m.name, err))
			}
		}
	}
	if l.hub != nil {
		_ = l.hub.Close()
		if err := l.hub.Err(); err != nil {
			l.errs = append(l.errs, violation("setup", "%v", err))
		}
	}
}

// headBehind reports whether the lane has processes and has killed the
// head of the queue less often than it drew the average contender fault. The head of the queue is a process only some of the
// time (on Redis Cluster, a 30-minute run found it there 19 times in 640
// draws), so drawing it whenever it happens to apply is not enough.
func (l *lane) headBehind(drawn map[string]int) bool {
	if !slices.ContainsFunc(l.members, func(m member) bool { return m.p != nil }) {
		return false
	}
	total, kinds := 0, 0
	for k, n := range drawn {
		if !isServerFault(k) && k != FaultKillPush { // lane 0 of several draws only those
			total += n
			kinds++
		}
	}
	return kinds > 0 && drawn[FaultKillHead]*kinds < total
}

// headWaitSpans is how many spans (ttl + transition) a lane behind on the
// head-of-queue kill waits for a process at the head before it draws. One
// span was not enough on Redis Cluster, where most leases end in a loss and
// the queue is often short: a 30-minute run at f46905e drew the kill 26
// times there (30 required), against 47 for the other contender faults.
const headWaitSpans = 3

// awaitHead waits up to d (polling the history) for a process to wait at
// the head of the queue with others behind it.
func (l *lane) awaitHead(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if ws := l.h.Waiters(l.mutex); len(ws) > 1 && slices.ContainsFunc(l.members, func(m member) bool { return m.p != nil && m.name == ws[0] }) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-tick.C:
		}
	}
}

// nemesis injects faults on the lane until ctx ends.
func (l *lane) nemesis(ctx context.Context, rng *rand.Rand) {
	s := l.s
	span := s.TTL + s.Transition
	first := 0                // the next of s.First to draw
	drawn := map[string]int{} // episodes per fault kind
	for sleep(ctx, episodeSettleTime+time.Duration(rng.Int64N(int64(span/3)))) {
		if l.headBehind(drawn) {
			l.awaitHead(ctx, headWaitSpans*span)
		}
		victim := l.members[rng.IntN(len(l.members))]
		if holder := l.h.Holder(l.mutex); holder != "" && rng.IntN(4) > 0 {
			for _, m := range l.members { // mostly the holder: that is where faults bite
				if m.name == holder {
					victim = m
				}
			}
		}
		var kinds []string
		if victim.f != nil {
			kinds = append(kinds, FaultBlackhole, FaultCut, FaultDelay)
			if _, ok := victim.f.(interface{ DropReplies() }); ok {
				kinds = append(kinds, FaultDropReplies)
			}
		}
		if victim.w != nil {
			kinds = append(kinds, FaultPauseHolder)
		} else {
			kinds = append(kinds, FaultStopProc, FaultKillProc)
		}
		// Kinds with a victim of their own, drawn whoever the victim
		// above is: the Contender's behaviours while it leads, and kills
		// of waiting processes (the longest waiting is the head of a
		// fair queue; with others behind it, its death must not stall
		// them).
		aimed := map[string]member{}
		for _, m := range l.members {
			if m.w != nil && m.w.Lead { // each takes effect when it next leads
				for _, k := range []string{FaultAbandon, FaultStopInside, FaultCloseInside} {
					aimed[k] = m
				}
			}
		}
		var waiting []member
		ws := l.h.Waiters(l.mutex)
		for i, c := range ws {
			for _, m := range l.members {
				if m.p != nil && m.name == c {
					waiting = append(waiting, m)
					if i == 0 && len(ws) > 1 {
						aimed[FaultKillHead] = m
					}
				}
			}
		}
		if len(waiting) > 0 {
			aimed[FaultKillWaiter] = waiting[rng.IntN(len(waiting))]
		}
		for _, k := range []string{FaultAbandon, FaultStopInside, FaultCloseInside, FaultKillWaiter, FaultKillHead} {
			if _, ok := aimed[k]; ok {
				kinds = append(kinds, k)
			}
		}
		// Lane 0 alone faults the server (one server fault at a time);
		// with more lanes it draws nothing else, so that each server
		// fault kind is drawn often (the other lanes fault contenders).
		// Clock steps add up, so every lane draws those within the
		// assumption.
		var server []string
		if l.idx == 0 && s.Server != nil {
			server = append(server, FaultPauseServer, FaultRestartSrv)
		}
		if l.idx == 0 && s.KillPush != nil {
			server = append(server, FaultKillPush)
		}
		extra := map[string]ServerFault{}
		if l.idx == 0 {
			for _, f := range s.Extra {
				server = append(server, f.Kind)
				extra[f.Kind] = f
			}
		}
		if s.Clock != nil {
			server = append(server, FaultClockForward, FaultClockBackward)
			if l.idx == 0 { // far steps from one lane: a far forward step's window
				// hides other faults, a far backward step holds every
				// live grant (and stalls the lane) for its size
				server = append(server, FaultClockFarBackward, FaultClockFarForward)
			}
		}
		if l.idx == 0 && s.Lanes > 1 && len(server) > 0 {
			kinds = nil
		}
		kinds = append(kinds, server...)
		if s.Only != nil {
			kinds = slices.DeleteFunc(kinds, func(k string) bool { return !s.Only.MatchString(k) })
			for first < len(s.First) && !s.Only.MatchString(s.First[first]) {
				first++
			}
			if len(kinds) == 0 && (l.idx != 0 || first >= len(s.First)) {
				continue // none applies now
			}
		}
		// The least drawn of the kinds that apply (ties at random): every
		// kind is drawn about as often, however few apply at a time.
		least := kinds[:0:0]
		for _, k := range kinds {
			switch {
			case len(least) == 0 || drawn[k] < drawn[least[0]]:
				least = append(least[:0], k)
			case drawn[k] == drawn[least[0]]:
				least = append(least, k)
			}
		}
		// A kind with a victim of its own that applies only now and then
		// (the head of the queue is a process only some of the time) is
		// drawn whenever it applies while it is below the kinds' mean.
		total := 0
		for _, k := range kinds {
			total += drawn[k]
		}
		var behind []string
		for k := range aimed {
			if slices.Contains(kinds, k) && drawn[k]*len(kinds) < total {
				behind = append(behind, k)
			}
		}
		if len(behind) > 0 {
			slices.Sort(behind) // map order is random: keep the seed's runs alike
			least = behind
		}
		kind := ""
		if len(least) > 0 {
			kind = least[rng.IntN(len(least))]
		}
		if l.idx == 0 && first < len(s.First) {
			kind = s.First[first]
			first++
		}
		drawn[kind]++
		if m, ok := aimed[kind]; ok {
			victim = m
		}
		last := time.Duration(rng.Int64N(int64(2 * span)))
		switch kind {
		case FaultKillProc, FaultKillWaiter, FaultKillHead, FaultStopInside, FaultCloseInside, FaultKillPush,
			FaultClockForward, FaultClockBackward, FaultClockFarBackward, FaultClockFarForward:
			// Over when injected (a kill's respawn waits last): a
			// shorter wait leaves time for more episodes.
			last /= 2
		}
		ep := Episode{Fault: kind, Victim: victim.name, Start: l.h.Now(), Takeover: -1, mutex: l.mutex}
		ep.Held = l.h.Holder(l.mutex) == ep.Victim
		if kind == FaultKillProc && !ep.Held {
			ep.Fault = FaultKillWaiter // it stopped holding meanwhile
		}
		if isServerFault(kind) || kind == FaultKillPush {
			ep.Victim, ep.Held = "", false
		}
		switch kind {
		case FaultBlackhole:
			victim.f.Blackhole()
		case FaultCut:
			victim.f.Cut()
		case FaultDelay:
			victim.f.Delay(s.TTL / 2)
		case FaultDropReplies:
			victim.f.(interface{ DropReplies() }).DropReplies()
		case FaultPauseHolder:
			victim.w.PauseNext(last)
		case FaultAbandon:
			// The replies of its last renewals are lost first, where the
			// connection can do that: the abandoned grant may then be
			// live on the server longer than the Manager knows, and the
			// next Contender of the same Manager, which contends at
			// once, must not be handed it (issue 14's abandoned grant).
			dr, drop := victim.f.(interface{ DropReplies() })
			if drop {
				dr.DropReplies()
				sleep(ctx, s.TTL/2) // a renewal reaches the server, its reply does not come back
			}
			for !victim.w.Leading() && l.h.Now()-ep.Start < 2*span && sleep(ctx, 20*time.Millisecond) {
			}
			_, err := victim.w.Abandon(last)
			if drop {
				victim.f.Heal()
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				l.errs = append(l.errs, violation("setup", "abandon %s: %v", victim.name, err))
			}
		case FaultStopInside:
			victim.w.StopInside()
		case FaultCloseInside:
			victim.w.CloseInside()
		case FaultStopProc:
			if err := victim.p.signal(syscall.SIGSTOP); err != nil {
				l.errs = append(l.errs, violation("setup", "SIGSTOP %s: %v", victim.name, err))
			}
		case FaultKillProc, FaultKillWaiter, FaultKillHead:
			if err := victim.p.kill(); err != nil {
				l.errs = append(l.errs, violation("setup", "kill %s: %v", victim.name, err))
			}
			l.h.Stopped(victim.name, ep.Start, math.MaxInt64)
			l.h.Waiting(l.mutex, victim.name, -1)
		case FaultPauseServer:
			if err := s.Server.Pause(); err != nil {
				l.errs = append(l.errs, violation("setup", "pause the server: %v", err))
			}
		case FaultRestartSrv:
			if err := s.Server.Restart(); err != nil {
				l.errs = append(l.errs, violation("setup", "restart the server: %v", err))
			}
		case FaultKillPush:
			if err := s.KillPush(); err != nil {
				l.errs = append(l.errs, violation("setup", "kill push: %v", err))
			}
		case FaultClockForward, FaultClockBackward, FaultClockFarBackward, FaultClockFarForward:
			ep.Step = ClockStep(kind, s.Margin, span, rng)
			ep.Beyond = kind == FaultClockFarForward
			if err := s.Clock.Step(ep.Step); err != nil {
				l.errs = append(l.errs, violation("setup", "clock step %v: %v", ep.Step, err))
			}
		default:
			if f, ok := extra[kind]; ok {
				// A restart that keeps data while the holder is cut off
				// (a partition beside a crash), from just before the
				// server stops: the server forgets its last renewals,
				// and the holder, which cannot renew, is told only at its
				// deadline. A store that forgot a grant must hold the
				// lock back until then.
				var cut Faulter
				cutHolder := func() {
					for _, m := range l.members {
						if m.name == l.h.Holder(l.mutex) && m.f != nil {
							cut = m.f
							cut.Blackhole()
						}
					}
				}
				if kind != FaultRedisSnapshot && kind != FaultRedisAOF {
					cutHolder = nil
				}
				if err := f.Inject(ctx, last, cutHolder); err != nil && ctx.Err() == nil {
					l.errs = append(l.errs, violation("setup", "%s: %v", kind, err))
				}
				last = 0 // over when Inject returns
				if cut != nil {
					sleep(ctx, span) // past the cut-off holder's deadline
					cut.Heal()
				}
			}
		}
		sleep(ctx, last)
		switch kind {
		case FaultBlackhole, FaultCut, FaultDelay, FaultDropReplies:
			victim.f.Heal()
		case FaultStopProc:
			_ = victim.p.signal(syscall.SIGCONT)
			l.h.Stopped(victim.name, ep.Start, l.h.Now())
		case FaultKillProc, FaultKillWaiter, FaultKillHead:
			if ctx.Err() == nil {
				if err := victim.p.spawn(); err != nil { // a new incarnation, with a new id
					l.errs = append(l.errs, violation("setup", "respawn %s: %v", victim.name, err))
				}
				for i := range l.members {
					if l.members[i].p == victim.p {
						l.members[i].name, l.members[i].f = victim.p.name, victim.p.f
					}
				}
			}
		case FaultPauseServer:
			if err := s.Server.Resume(); err != nil {
				l.errs = append(l.errs, violation("setup", "resume the server: %v", err))
			}
		}
		ep.Healed = l.h.Now()
		l.episodes = append(l.episodes, ep)
	}
}

// checkTakeover checks I5: when a fault cuts off the holder (black hole,
// reset, SIGSTOP) for longer than its lease, or kills it, another contender
// holds within ttl +
// transition + the late jitter (1 s) + a poll and scheduling slack (1 s) of
// the fault's start — whether or not any release notification arrives.
//
// An episode is not judged when its bound reaches past the end of the run,
// or when a server fault (a pause or restart, drawn by lane 0's nemesis)
// overlaps its window: a server that does not answer delays every
// takeover, and that is not the holder's fault.
//
// Two faults of the same lock stretch the bound. A fault on another
// contender, a waiter then, that starts in the window and can keep it
// from hearing its own grant (its calls cut, slowed or their replies
// dropped, its process stopped or killed) may leave a grant that nobody
// holds in the store until its transition ends: one more ttl +
// transition. With stopBlocks (SQLite), a process stopped (SIGSTOP)
// inside a write transaction keeps everyone out of the store until it
// resumes: the bound runs from the resume.
func checkTakeover(setup string, eps []Episode, holds []Hold, span, end time.Duration, stopBlocks bool) []Violation {
	base := span + 2*time.Second
	server := serverWindows(eps, base) // server faults, each extended by a bound for recovery
	overlaps := func(e Episode, bound time.Duration) bool {
		for _, w := range server {
			if w[0] <= e.Start+bound && e.Start <= w[1] {
				return true
			}
		}
		return false
	}
	var vs []Violation
	for _, e := range eps {
		bound := base
		if e.Fault == FaultStopProc && stopBlocks {
			bound = max(bound, e.Healed-e.Start+base)
		}
		if mayOrphan(eps, e, e.Start+bound) {
			bound += span
		}
		switch {
		case !e.Held || e.Start+bound > end || overlaps(e, bound):
			continue
		case e.Fault == FaultKillProc:
		case e.Fault == FaultBlackhole || e.Fault == FaultCut || e.Fault == FaultStopProc:
			if e.Healed-e.Start < base {
				continue // healed before the bound
			}
		default:
			continue // not cut off: a slowed holder may go on renewing, a paused write keeps its lease
		}
		first := time.Duration(-1)
		for _, h := range holds {
			if h.Mutex == e.mutex && h.Client != e.Victim && h.Acquired >= e.Start && (first < 0 || h.Acquired < first) {
				first = h.Acquired
			}
		}
		if first < 0 || first-e.Start > bound {
			var around []string // the holds of the lock near the fault, to tell why
			for _, h := range holds {
				if h.Mutex == e.mutex && h.Acquired < e.Start+2*bound && (h.Done == Open || h.Done > e.Start-bound) {
					around = append(around, fmt.Sprintf("%s token %d [%v, %s]", h.Client, h.Token, h.Acquired, doneString(h.Done)))
				}
			}
			vs = append(vs, violation("I5", "%s: %q cut %s off at %v for %v; next grant to another at %v (bound %v after the start); holds around: %s",
				setup, e.Fault, e.Victim, e.Start, e.Healed-e.Start, first, bound, strings.Join(around, "; ")))
		}
	}
	return vs
}

// mayOrphan reports whether a fault of eps on another contender of e's lock,
// which did not hold when it began, starts after e and before until and
// may keep its victim from hearing a grant the store made it (see
// checkTakeover).
func mayOrphan(eps []Episode, e Episode, until time.Duration) bool {
	return slices.ContainsFunc(eps, func(o Episode) bool {
		switch o.Fault {
		case FaultBlackhole, FaultCut, FaultDelay, FaultDropReplies, FaultStopProc, FaultKillProc, FaultKillWaiter, FaultKillHead:
		default:
			return false
		}
		return o.mutex == e.mutex && o.Victim != e.Victim && !o.Held && o.Start > e.Start && o.Start <= until
	})
}

// serverWindows returns the spans of the server faults of eps, each
// extended by bound for recovery.
func serverWindows(eps []Episode, bound time.Duration) [][2]time.Duration {
	var ws [][2]time.Duration
	for _, e := range eps {
		if isServerFault(e.Fault) {
			ws = append(ws, [2]time.Duration{e.Start, e.Healed + bound})
		}
	}
	return ws
}

// checkHandoff checks that the death of the waiter at the head of the
// queue does not stall the others (issue 14's crashed head waiter): the
// first release after the kill, before the episode healed, is followed by
// a grant to a live contender within bound (the hand-off window and the
// time to be woken; a stall until the old grant's transition end is
// longer; bound 0: measured only). Episodes near a server fault other
// than a clock step within the margin are not judged, nor are hand-offs
// whose bound a server fault cuts short (a pause that starts 2 s after
// the release stalls the grant the waiter was about to get). It returns
// the hand-off times it measured and the violations.
func checkHandoff(setup string, eps []Episode, holds []Hold, span, bound time.Duration) ([]time.Duration, []Violation) {
	server := serverWindows(slices.DeleteFunc(slices.Clone(eps), func(e Episode) bool {
		return e.Fault == FaultClockForward || e.Fault == FaultClockBackward // a few hundred ms at most
	}), span+2*time.Second)
	var gaps []time.Duration
	var vs []Violation
	for _, e := range eps {
		near := func(from, to time.Duration) bool {
			return slices.ContainsFunc(server, func(w [2]time.Duration) bool { return w[0] <= to && from <= w[1] })
		}
		if e.Fault != FaultKillHead || near(e.Start, e.Healed) {
			continue
		}
		var rel *Hold // the first release after the kill
		for i, h := range holds {
			if h.Mutex == e.mutex && h.Client != e.Victim && !h.Lost && !h.Stopped && h.Done != Open &&
				h.Done > e.Start && (rel == nil || h.Done < rel.Done) {
				rel = &holds[i]
			}
		}
		if rel == nil || rel.Done > e.Healed || (bound > 0 && near(rel.Done, rel.Done+bound)) {
			continue
		}
		next := time.Duration(-1)
		for _, h := range holds {
			if h.Mutex == e.mutex && h.Acquired >= rel.Done && (next < 0 || h.Acquired < next) {
				next = h.Acquired
			}
		}
		if next < 0 {
			continue
		}
		gaps = append(gaps, next-rel.Done)
		if bound > 0 && next-rel.Done > bound {
			vs = append(vs, violation("I5", "%s: the head waiter %s was killed at %v; %s released token %d at %v and the next grant came %v later (bound %v)",
				setup, e.Victim, e.Start, rel.Client, rel.Token, rel.Done, next-rel.Done, bound))
		}
	}
	return gaps, vs
}

// isServerFault reports whether a fault kind hits the server (and so
// every contender): pauses, restarts, flushes and clock steps (a step
// backward lengthens every live grant on the server).
func isServerFault(kind string) bool {
	switch kind {
	case FaultPauseServer, FaultRestartSrv, FaultRedisSnapshot, FaultRedisAOF, FaultFlushAll, FaultRedisFailover,
		FaultClockForward, FaultClockBackward, FaultClockFarBackward, FaultClockFarForward:
		return true
	}
	return false
}

// ClockStep draws the step of a clock fault of kind for contenders with
// the safety margin and ttl + transition span: within the assumption, a
// tenth to a half of the margin (the rest absorbs the scheduling delays
// a loaded machine adds); beyond it, twice the margin to twice the span.
func ClockStep(kind string, margin, span time.Duration, rng *rand.Rand) time.Duration {
	small := margin/10 + time.Duration(rng.Int64N(int64(margin*4/10)+1))
	large := 2*margin + time.Duration(rng.Int64N(int64(2*span-2*margin)+1))
	switch kind {
	case FaultClockForward:
		return small
	case FaultClockBackward:
		return -small
	case FaultClockFarBackward:
		return -large
	default:
		return large
	}
}

// beyond moves the overlaps of holds (I6) that began within window of
// the start of a fault beyond the assumptions out of vs, and counts them
// on the episode; it returns the rest and the moved.
func beyond(eps []Episode, vs []Violation, window time.Duration) (rest, moved []Violation) {
	for _, v := range vs {
		hit := false
		if v.Invariant == "I6" && v.At >= 0 {
			for i, e := range eps {
				if e.Beyond && e.Start <= v.At && v.At <= e.Start+window {
					if e.Overlaps == 0 || v.At < e.FirstOverlap {
						eps[i].FirstOverlap = v.At
					}
					eps[i].Overlaps++
					hit = true
					break
				}
			}
		}
		if hit {
			moved = append(moved, v)
		} else {
			rest = append(rest, v)
		}
	}
	return rest, moved
}

// detected counts each clock_step event of ds on the latest clock-step
// episode of eps in its direction that began before it, if that began
// within window of it.
func detected(eps []Episode, ds []Detection, window time.Duration) {
	for _, d := range ds {
		best := -1
		for i, e := range eps {
			if e.Step == 0 || (e.Step > 0) != d.Forward || e.Start > d.At || d.At > e.Start+window {
				continue
			}
			if best < 0 || e.Start > eps[best].Start {
				best = i
			}
		}
		if best < 0 {
			continue
		}
		e := &eps[best]
		if e.Detected == 0 || d.At < e.FirstDetected {
			e.FirstDetected = d.At
		}
		e.Detected++
	}
}

// takeovers fills in, for each episode, how long after its healing the
// next lease was acquired.
func takeovers(eps []Episode, holds []Hold) []Episode {
	acqs := map[string][]time.Duration{} // by lock, sorted
	for _, h := range holds {
		acqs[h.Mutex] = append(acqs[h.Mutex], h.Acquired)
	}
	for _, acq := range acqs {
		slices.Sort(acq)
	}
	for i, e := range eps {
		acq := acqs[e.mutex]
		j := sort.Search(len(acq), func(k int) bool { return acq[k] >= e.Healed })
		if j < len(acq) {
			eps[i].Takeover = acq[j] - e.Healed
		}
	}
	return eps
}

// pauser lets the nemesis stop a worker between its check of the lease
// and its write, as a stop-the-world pause or SIGSTOP would.
type pauser struct{ next atomic.Int64 }

// PauseNext makes the worker's next write wait d after it checked that it
// still holds its lease.
func (w *Worker) PauseNext(d time.Duration) { w.pause.next.Store(int64(d)) }

func (p *pauser) take() time.Duration { return time.Duration(p.next.Swap(0)) }

// orphans checks I7 after every contender closed: within ttl + transition
// (what a grant whose release failed may still run) plus two seconds, a
// newcomer — a fresh client and Manager — takes the lock with
// TryAcquire: nothing left behind (a grant, a queue entry, a znode) blocks
// it longer. (A store's Get cannot always tell: a ZooKeeper client that
// never wrote does not know the server's time, so it reports a waiter's
// left-over node as held back for a whole window.)
func orphans(s Setup, name string, span time.Duration) (Violation, bool) {
	store, _, opts := s.Client()
	if opts == nil {
		opts = []lease.Option{lease.WithTTL(s.TTL), lease.WithTransition(s.Transition)}
	}
	m, err := lease.NewManager(store, append(opts, lease.WithContenderID("chaos-newcomer"))...)
	if err != nil {
		return violation("setup", "%s: %v", s.Name, err), false
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Close(ctx)
	}()
	deadline := time.Now().Add(span + 2*time.Second)
	extended := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := m.TryAcquire(ctx, name)
		if err == nil {
			_ = l.Release(ctx)
			cancel()
			return Violation{}, true
		}
		rec, gerr := store.Get(ctx, name)
		cancel()
		// A store may grant a longer transition than the Managers ask
		// (ZooKeeper: the session timeout, 3 s in the ZooKeeper set-ups,
		// against 1 s): a grant left to lapse — abandoned by a Stop
		// whose context ended — may live its ttl + that transition
		// from its last renewal, which can be as late as the check's
		// start. Judged against span alone, such a grant read as an
		// orphan (I7 on zookeeper-ensemble in a 2-minute run: Get =
		// {TTL:2s Transition:3s}).
		if gerr == nil && rec.OwnerID != "" && !extended {
			extended = true
			if dl := time.Now().Add(rec.TTL + rec.Transition + 2*time.Second); dl.After(deadline) {
				deadline = dl
			}
		}
		if time.Now().After(deadline) {
			return violation("I7", "%s: after every contender closed and %v more, a newcomer cannot take %q: %v (Get = %+v, %v)",
				s.Name, span+2*time.Second, name, err, rec, gerr), false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stepLog is the slog.Handler of an in-process contender's Manager: it
// records the Manager's "clock_step" events (a server clock step its
// detector saw) in the history, and drops everything else.
type stepLog struct {
	h      *History
	client string
}

func (stepLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (s stepLog) Handle(_ context.Context, r slog.Record) error {
	event, forward := "", false
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case lease.LogKeyEvent:
			event = a.Value.String()
		case lease.LogKeyDirection:
			forward = a.Value.String() == "forward"
		}
		return true
	})
	if event == lease.EventClockStep {
		s.h.ClockStep(s.client, s.h.Now(), forward)
	}
	return nil
}

func (s stepLog) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s stepLog) WithGroup(string) slog.Handler      { return s }

// checkWake checks that a release wakes the waiters (issue 14's MySQL
// doorbell re-arm race, where a waiter missed its wake-up and slept until
// its poll): whenever a holder released the lock (not lost, not stopped)
// while another contender waited for it, the next grant of the lock comes
// within bound of the release (bound 0: measured only). As in
// checkHandoff, a release is not judged near a server fault other than
// a clock step within the margin; nor near a kill of the notification
// connections, nor near a fault on any contender of the same lock (a
// waiter cut off, stopped or killed cannot come; a holder cut off does
// not release): each is near from its start until span + 2 s after it
// healed. Nor is a release whose bound reaches past the end of the run.
// It returns the hand-off times it judged and the violations.
func checkWake(setup string, eps []Episode, holds []Hold, waits []Wait, span, bound, end time.Duration) ([]time.Duration, []Violation) {
	settle := span + 2*time.Second
	server := serverWindows(slices.DeleteFunc(slices.Clone(eps), func(e Episode) bool {
		return e.Fault == FaultClockForward || e.Fault == FaultClockBackward // a few hundred ms at most
	}), settle)
	judge := max(bound, 2*time.Second) // the span a fault must keep clear of when only measuring
	var gaps []time.Duration
	var vs []Violation
	for _, r := range holds {
		if r.Lost || r.Stopped || r.Done == Open || r.Done+judge > end {
			continue
		}
		d := r.Done
		var waiter string
		for _, w := range waits {
			if w.Mutex == r.Mutex && w.Client != r.Client && w.From < d && (w.To == Open || w.To > d) {
				waiter = w.Client
				break
			}
		}
		if waiter == "" {
			continue
		}
		near := slices.ContainsFunc(server, func(w [2]time.Duration) bool { return w[0] <= d+judge && d <= w[1] }) ||
			slices.ContainsFunc(eps, func(e Episode) bool {
				lane := e.Fault == FaultKillPush || (e.mutex == r.Mutex && !isServerFault(e.Fault))
				return lane && e.Start <= d+judge && d <= e.Healed+settle
			})
		if near {
			continue
		}
		next := time.Duration(-1)
		for _, h := range holds {
			if h.Mutex == r.Mutex && h.Acquired >= d && (next < 0 || h.Acquired < next) {
				next = h.Acquired
			}
		}
		gap := next - d
		if next < 0 {
			gap = end - d
		}
		gaps = append(gaps, gap)
		if bound > 0 && gap > bound {
			vs = append(vs, violation("I5", "%s: %s released token %d at %v while %s waited; the next grant came %v later (bound %v): a waiter missed its wake-up",
				setup, r.Client, r.Token, d, waiter, gap, bound))
		}
	}
	return gaps, vs
}
