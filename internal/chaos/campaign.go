package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
)

// Faulter is a fault that can be put on one client's connection
// (internal/faultproxy's Proxy is one).
type Faulter interface {
	Blackhole()
	Cut()
	Delay(d time.Duration)
	Heal()
}

// Server is a store server the nemesis may pause or restart (a private
// internal/testserver Process is one).
type Server interface {
	Pause() error
	Resume() error
	Restart() error
}

// Setup is one backend of a campaign.
type Setup struct {
	Name string
	// Client returns a new store client, with its own connection behind its
	// own Faulter (nil when the store is in-process), and the Manager
	// options the store needs (nil for the campaign's ttl and transition).
	Client func() (lease.Store, Faulter, []lease.Option)
	// Server, when not nil, may be paused and restarted.
	Server Server
	// TTL and Transition of the Managers (unless Client's options say
	// otherwise).
	TTL, Transition time.Duration
	// Workers is the number of contenders (default 3).
	Workers int
}

// Fault kinds of the nemesis (RELIABILITY.md's scenarios).
const (
	FaultBlackhole    = "blackhole a holder (S4)"
	FaultCut          = "reset a holder's connection (S4)"
	FaultDelay        = "slow a holder's calls to ttl/2 (S10)"
	FaultPauseHolder  = "pause a holder mid-update (S1)"
	FaultPauseServer  = "pause the server (S3)"
	FaultRestartSrv   = "restart the server (S3)"
	episodeSettleTime = 500 * time.Millisecond
)

// Episode is one injected fault and what followed it.
type Episode struct {
	Fault string
	// Victim is the contender the fault was aimed at ("" for the server),
	// and Held whether it held the mutex when the fault began.
	Victim string
	Held   bool
	// Start and Healed are when the fault began and ended; Takeover how
	// long after Healed the next lease was acquired (-1 when none was by
	// the end of the run).
	Start, Healed, Takeover time.Duration
}

// Result is what a campaign on one setup produced.
type Result struct {
	Setup    string
	Episodes []Episode
	Report   Report
	Fenced   RegisterStats
	Unfenced RegisterStats
	// Violations are every invariant breach: the holds', the fenced
	// register's, and takeovers past the I5 bound.
	Violations []Violation
}

// Run runs a campaign on s for d: Workers contenders incrementing the
// registers while a nemesis injects a random fault, lets it last, heals it
// and waits for things to settle, again and again. seed seeds the nemesis's choices.
func Run(ctx context.Context, s Setup, d time.Duration, seed uint64) Result {
	if s.Workers == 0 {
		s.Workers = 3
	}
	h, fenced, unfenced := NewHistory(), NewRegister(true), NewRegister(false)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type member struct {
		w *Worker
		f Faulter
	}
	members := make([]member, s.Workers)
	var wg sync.WaitGroup
	for i := range members {
		store, f, opts := s.Client()
		name := fmt.Sprintf("%s-w%d", s.Name, i)
		if opts == nil {
			opts = []lease.Option{lease.WithTTL(s.TTL), lease.WithTransition(s.Transition)}
		}
		m, err := lease.NewManager(store, append(opts, lease.WithContenderID(name))...)
		if err != nil {
			return Result{Setup: s.Name, Violations: []Violation{violation("setup", "%v", err)}}
		}
		w := &Worker{Name: name, Manager: m, Mutex: "chaos/" + s.Name, Fenced: fenced, Unfenced: unfenced,
			History: h, Think: s.TTL}
		members[i] = member{w, f}
		wg.Go(func() {
			w.Run(ctx)
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			m.Close(cctx)
			ccancel()
		})
	}
	rng := rand.New(rand.NewPCG(seed, uint64(len(s.Name))))
	kinds := []string{FaultBlackhole, FaultCut, FaultDelay, FaultPauseHolder}
	if s.Server != nil {
		kinds = append(kinds, FaultPauseServer, FaultRestartSrv)
	}
	span := s.TTL + s.Transition
	var episodes []Episode
	for sleep(ctx, episodeSettleTime+time.Duration(rng.Int64N(int64(span)))) {
		kind := kinds[rng.IntN(len(kinds))]
		victim := members[rng.IntN(len(members))]
		if holder := h.Holder(members[0].w.Mutex); holder != "" && rng.IntN(4) > 0 {
			for _, m := range members { // mostly the holder: that is where faults bite
				if m.w.Name == holder {
					victim = m
				}
			}
		}
		if victim.f == nil && (kind == FaultBlackhole || kind == FaultCut || kind == FaultDelay) {
			kind = FaultPauseHolder
		}
		last := time.Duration(rng.Int64N(int64(2 * span)))
		ep := Episode{Fault: kind, Victim: victim.w.Name, Start: h.Now(), Takeover: -1}
		ep.Held = h.Holder(victim.w.Mutex) == ep.Victim
		if kind == FaultPauseServer || kind == FaultRestartSrv {
			ep.Victim, ep.Held = "", false
		}
		switch kind {
		case FaultBlackhole:
			victim.f.Blackhole()
		case FaultCut:
			victim.f.Cut()
		case FaultDelay:
			victim.f.Delay(s.TTL / 2)
		case FaultPauseHolder:
			victim.w.PauseNext(last)
		case FaultPauseServer:
			_ = s.Server.Pause()
		case FaultRestartSrv:
			_ = s.Server.Restart()
		}
		sleep(ctx, last)
		switch kind {
		case FaultBlackhole, FaultCut, FaultDelay:
			victim.f.Heal()
		case FaultPauseServer:
			_ = s.Server.Resume()
		}
		ep.Healed = h.Now()
		episodes = append(episodes, ep)
	}
	for _, m := range members {
		if m.f != nil {
			m.f.Heal()
		}
	}
	wg.Wait()
	res := Result{Setup: s.Name, Report: CheckHolds(h.Holds()), Fenced: fenced.Stats(), Unfenced: unfenced.Stats()}
	if v, ok := orphans(s, members[0].w.Mutex, span); !ok {
		res.Violations = append(res.Violations, v)
	}
	res.Episodes = takeovers(episodes, h.Holds())
	res.Violations = append(append(res.Violations, res.Report.Violations...), fenced.Check()...)
	res.Violations = append(res.Violations, checkTakeover(s.Name, res.Episodes, h.Holds(), span)...)
	return res
}

// checkTakeover checks I5: when a fault cuts off the holder for longer
// than its lease, another contender holds within ttl + transition + the
// late jitter (1 s) + a poll and scheduling slack (1 s) of the fault's
// start — whether or not any release notification arrives.
func checkTakeover(setup string, eps []Episode, holds []Hold, span time.Duration) []Violation {
	bound := span + 2*time.Second
	var vs []Violation
	for _, e := range eps {
		if !e.Held || e.Healed-e.Start < bound || e.Fault == FaultPauseHolder {
			continue // not a cut-off holder, or healed before the bound
		}
		first := time.Duration(-1)
		for _, h := range holds {
			if h.Client != e.Victim && h.Acquired >= e.Start && (first < 0 || h.Acquired < first) {
				first = h.Acquired
			}
		}
		if first < 0 || first-e.Start > bound {
			vs = append(vs, violation("I5", "%s: %q cut %s off at %v for %v; next grant to another at %v (bound %v after the start)",
				setup, e.Fault, e.Victim, e.Start, e.Healed-e.Start, first, bound))
		}
	}
	return vs
}

// takeovers fills in, for each episode, how long after its healing the
// next lease was acquired.
func takeovers(eps []Episode, holds []Hold) []Episode {
	acq := make([]time.Duration, len(holds))
	for i, h := range holds {
		acq[i] = h.Acquired
	}
	sort.Slice(acq, func(i, j int) bool { return acq[i] < acq[j] })
	for i, e := range eps {
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
// (what a grant whose release failed may still run) plus a second, a fresh
// client finds the mutex free, with nothing held back for a waiter that
// left.
func orphans(s Setup, mutex string, span time.Duration) (Violation, bool) {
	store, _, _ := s.Client()
	deadline := time.Now().Add(span + 2*time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rec, err := store.Get(ctx, mutex)
		cancel()
		if err == nil && rec.Owner == "" && rec.Transition == 0 {
			return Violation{}, true
		}
		if time.Now().After(deadline) {
			return violation("I7", "%s: after every contender closed and %v more, Get(%q) = %+v, %v",
				s.Name, span+2*time.Second, mutex, rec, err), false
		}
		time.Sleep(100 * time.Millisecond)
	}
}
