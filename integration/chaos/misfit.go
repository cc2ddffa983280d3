package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
)

// A misconfigured contender (issue 14's grant dead on arrival): a user
// whose timings ask for a safety margin longer than the store grants at
// all (a ZooKeeper server whose maxSessionTimeout is below it). Every
// grant it could get would be dead on arrival; a Manager that took it
// and tried again at once spun, about 1,050 writes per second to
// ZooKeeper. It must be told with the documented error instead:
// NewManager refuses the timings when the store reports its limit
// (lease.ErrInvalidArgument), else Acquire fails the grant
// (lease.ErrGrantTooShort); either promptly, with a handful of store
// calls.
const (
	// misfitEvery is the pause between two attempts of a misconfigured
	// contender, misfitWait how long one Acquire may take before the
	// contender gives up on it.
	misfitEvery = 2 * time.Second
	misfitWait  = 5 * time.Second
	// misfitPrompt bounds the time to the error; misfitCalls and
	// misfitRate the store calls of one attempt: misfitCalls, plus
	// misfitRate per second it lasted (a Manager that backs off between
	// attempts makes a few per second; the spin made thousands).
	misfitPrompt = 2 * time.Second
	misfitCalls  = 10
	misfitRate   = 20
)

// Misfit is one attempt of a misconfigured contender: a NewManager with
// its timings, and an Acquire when NewManager took them.
type Misfit struct {
	// Start and End are when the attempt began and when it had its
	// answer (the error, or a lease).
	Start, End time.Duration
	// Calls is how many store calls it made.
	Calls int64
	// Err is what NewManager or Acquire returned; nil when Acquire
	// returned a lease.
	Err error
	// Cut is true when the run ended during the attempt: not judged.
	Cut bool
}

// countingStore counts the calls made through it.
type countingStore struct {
	lease.Store
	calls *atomic.Int64
}

func (s countingStore) Acquire(ctx context.Context, name, c string, ttl, tr time.Duration) (lease.Record, error) {
	s.calls.Add(1)
	return s.Store.Acquire(ctx, name, c, ttl, tr)
}

func (s countingStore) Renew(ctx context.Context, name, c string, tok uint64, ttl, tr time.Duration) (lease.Record, error) {
	s.calls.Add(1)
	return s.Store.Renew(ctx, name, c, tok, ttl, tr)
}

func (s countingStore) Release(ctx context.Context, name, c string, tok uint64) error {
	s.calls.Add(1)
	return s.Store.Release(ctx, name, c, tok)
}

func (s countingStore) Get(ctx context.Context, name string) (lease.Record, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, name)
}

// limitedCountingStore is a countingStore that passes on the store's
// grant limit, which NewManager reads.
type limitedCountingStore struct{ countingStore }

func (s limitedCountingStore) MaxGrant() time.Duration {
	return s.Store.(lease.GrantLimiter).MaxGrant()
}

// counting wraps store so that its calls are counted in n, keeping its
// grant limit (lease.GrantLimiter).
func counting(store lease.Store, n *atomic.Int64) lease.Store {
	c := countingStore{store, n}
	if _, ok := store.(lease.GrantLimiter); ok {
		return limitedCountingStore{c}
	}
	return c
}

// misfits runs the lane's misconfigured contender until ctx ends: every
// misfitEvery, a new Manager on store with opts, and an Acquire of a lock
// of its own (its spin, were it to spin, must not be what slows the
// lane's contenders: the judge is its own).
func (l *lane) misfits(ctx context.Context, store lease.Store, opts []lease.Option) {
	var calls atomic.Int64
	cs := counting(store, &calls)
	name := l.mutex + "/misfit"
	id := fmt.Sprintf("%s-%d-misfit", l.s.Name, l.idx)
	for sleep(ctx, misfitEvery) {
		before := calls.Load()
		mf := Misfit{Start: l.h.Now()}
		m, err := lease.NewManager(cs, append(slices.Clone(opts), lease.WithContenderID(id))...)
		if err == nil {
			actx, cancel := context.WithTimeout(ctx, misfitWait)
			var ls *lease.Lease
			ls, err = m.Acquire(actx, name)
			cancel()
			mf.End = l.h.Now()
			if err == nil {
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_ = ls.Release(rctx)
				rcancel()
			}
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = m.Close(cctx)
			ccancel()
		} else {
			mf.End = l.h.Now()
		}
		mf.Calls, mf.Err, mf.Cut = calls.Load()-before, err, ctx.Err() != nil
		l.misfitLog = append(l.misfitLog, mf)
	}
}

// checkMisfits judges the attempts of a misconfigured contender (see
// Misfit): each must fail with lease.ErrInvalidArgument (NewManager) or
// lease.ErrGrantTooShort (Acquire), within misfitPrompt unless a server
// fault of eps (extended by span + 2 s) overlaps it, and make at most
// misfitCalls store calls plus misfitRate per second it lasted. An
// attempt the end of the run cut short is not judged.
func checkMisfits(setup string, ms []Misfit, eps []Episode, span time.Duration) []Violation {
	server := serverWindows(eps, span+2*time.Second)
	var vs []Violation
	for _, m := range ms {
		if m.Cut {
			continue
		}
		took := m.End - m.Start
		switch {
		case m.Err == nil:
			vs = append(vs, violation("S12", "%s: a contender whose safety margin exceeds the store's longest grant was granted a lease at %v (%d store calls in %v)",
				setup, m.End, m.Calls, took.Round(time.Millisecond)))
		case !errors.Is(m.Err, lease.ErrInvalidArgument) && !errors.Is(m.Err, lease.ErrGrantTooShort):
			vs = append(vs, violation("S12", "%s: a contender whose safety margin exceeds the store's longest grant got %q after %v (%d store calls), want lease.ErrInvalidArgument from NewManager or lease.ErrGrantTooShort from Acquire",
				setup, m.Err, took.Round(time.Millisecond), m.Calls))
		case took > misfitPrompt && !slices.ContainsFunc(server, func(w [2]time.Duration) bool { return w[0] <= m.End && m.Start <= w[1] }):
			vs = append(vs, violation("S12", "%s: a contender whose safety margin exceeds the store's longest grant was told only after %v (bound %v): %v",
				setup, took.Round(time.Millisecond), misfitPrompt, m.Err))
		}
		if limit := misfitCalls + int64(misfitRate*took.Seconds()); m.Calls > limit {
			vs = append(vs, violation("S12", "%s: a contender whose safety margin exceeds the store's longest grant made %d store calls in %v (%.0f per second; at most %d allowed): a dead-on-arrival grant retried in a loop",
				setup, m.Calls, took.Round(time.Millisecond), float64(m.Calls)/max(took.Seconds(), 1e-3), limit))
		}
	}
	return vs
}
