package chaos

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
)

// Leader behaviours the nemesis asks of a worker that runs as a
// [lease.Contender] ([Worker.RunLeader]).
const (
	// actAbandon: the leader's callback goes on working without watching
	// its context for a while, and the nemesis stops the Contender with a
	// context that ends first (Stop abandons the grant).
	actAbandon = iota + 1
	// actStopInside: the callback stops its own Contender.
	actStopInside
	// actCloseInside: the callback closes its own Manager; RunLeader
	// then contends through a new one (Worker.NewManager).
	actCloseInside
)

// leaderState is what the nemesis needs of a worker's current Contender.
type leaderState struct {
	mu       sync.Mutex
	c        *lease.Contender
	leading  int // callbacks running (an abandoned one may run beside the next)
	act      atomic.Int32
	stuck    atomic.Int64  // how long an abandoned callback works on, unaware
	again    chan struct{} // a Stop ended the Contender: contend again
	poke     chan struct{} // an act is asked for: the callback stops thinking
	stuckNow chan struct{} // the callback took actAbandon
	closed   bool          // the callback closed the Manager (RunLeader's goroutine)
	// abandoned: Abandon's Stop gave the grant up while the callback
	// still ran; RunLeader contends again at once, beside it.
	abandoned atomic.Bool
	errs      []Violation // of the worker's own checks, under mu
}

// init makes the channels; before RunLeader and the nemesis start.
func (st *leaderState) init() {
	st.again = make(chan struct{}, 1)
	st.poke = make(chan struct{}, 1)
	st.stuckNow = make(chan struct{}, 1)
}

// RunLeader is Run through a Contender: when it leads, its callback
// increments the registers once (after Think) and returns; RunLeader then
// stops the Contender (or the nemesis or the callback itself did) and
// contends again with a new one, until ctx ends.
func (w *Worker) RunLeader(ctx context.Context) {
	st := &w.leader
	for ctx.Err() == nil {
		sent := w.History.Now()
		var c *lease.Contender
		ready := make(chan struct{})
		w.History.Waiting(w.Mutex, w.Name, sent)
		c, err := w.Manager.Contend(w.Mutex, lease.Callbacks{OnAcquired: func(lctx context.Context, l *lease.Lease) {
			<-ready
			w.History.Waiting(w.Mutex, w.Name, -1)
			w.lead(lctx, l, c, sent)
		}})
		close(ready)
		if err != nil {
			w.History.Waiting(w.Mutex, w.Name, -1)
			if !sleep(ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		st.mu.Lock()
		st.c = c
		st.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-st.again:
		}
		st.mu.Lock()
		st.c = nil
		st.mu.Unlock()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if !st.abandoned.Swap(false) {
			// Idempotent. After an abandon it would wait for the
			// callback: instead the next Contender contends beside it
			// (the Manager must not hand it the abandoned grant's
			// token), and Close waits for it at the end.
			_ = c.Stop(sctx)
		}
		w.History.Waiting(w.Mutex, w.Name, -1)
		if st.closed { // by the callback: wait for it to end, then a new Manager
			st.closed = false
			_ = w.Manager.Close(sctx)
			m, err := w.NewManager()
			for err != nil && sleep(ctx, 100*time.Millisecond) {
				m, err = w.NewManager()
			}
			if err != nil {
				cancel()
				return
			}
			w.Manager = m
		}
		cancel()
	}
}

// lead is the leader's callback.
func (w *Worker) lead(lctx context.Context, l *lease.Lease, c *lease.Contender, sent time.Duration) {
	st := &w.leader
	hd := w.History.Begin(w.Mutex, w.Name, l.Token(), sent, w.History.Now())
	told := make(chan struct{})
	go func() { // the holder is told when its context ends
		defer close(told)
		<-lctx.Done()
		if errors.Is(l.Err(), lease.ErrLost) {
			w.endLost(hd, l)
		} else {
			w.History.End(hd, w.History.Now(), false)
		}
	}()
	st.mu.Lock()
	st.leading++
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		st.leading--
		st.mu.Unlock()
		<-told
	}()
	tok := l.Token()
	// One increment per term, as Run's workers do, then a graceful Stop
	// by RunLeader and a new Contender: the lock changes hands.
	defer w.signalAgain()
	for range 1 {
		fv, ferr := w.Fenced.Read(w.Name, tok)
		uv, _ := w.Unfenced.Read(w.Name, tok)
		t := time.NewTimer(w.Think)
		select {
		case <-lctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-st.poke:
			t.Stop()
		}
		// A resigning leader's Stop or Close gets a context of its own,
		// as a user's would (the leader's context ends with the Stop).
		sctx, cancel := context.WithTimeout(context.Background(), 10*insideBound)
		defer cancel()
		switch st.act.Swap(0) {
		case actStopInside:
			t0 := time.Now()
			_ = c.Stop(sctx) // returns at once from inside a callback
			w.inside("Contender.Stop", time.Since(t0))
			w.signalAgain()
			return
		case actCloseInside:
			t0 := time.Now()
			_ = w.Manager.Close(sctx) // returns at once from inside a callback
			w.inside("Manager.Close", time.Since(t0))
			st.closed = true // read by RunLeader after Stop waited for us
			w.signalAgain()
			return
		case actAbandon:
			st.stuckNow <- struct{}{}                  // buffered
			time.Sleep(time.Duration(st.stuck.Load())) // unaware of its context
		}
		if d := w.pause.take(); d > 0 {
			time.Sleep(d)
		}
		_ = w.Unfenced.Write(w.Name, tok, uv+1)
		if ferr == nil {
			_ = w.Fenced.Write(w.Name, tok, fv+1)
		}
	}
}

// insideBound is how long a Stop or Close called from inside a callback
// may take: it must return at once, not wait for the callback that
// calls it (issue 14's hang), whatever the machine's load.
const insideBound = time.Second

// inside records a violation when call, made from inside the leader's
// callback, took longer than insideBound.
func (w *Worker) inside(call string, took time.Duration) {
	if took <= insideBound {
		return
	}
	st := &w.leader
	st.mu.Lock()
	defer st.mu.Unlock()
	st.errs = append(st.errs, violation("S16", "%s: %s from inside its callback took %v (it must return at once: bound %v)",
		w.Name, call, took.Round(time.Millisecond), insideBound))
}

// Errs returns the violations of the worker's own checks.
func (w *Worker) Errs() []Violation {
	st := &w.leader
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.errs)
}

func (w *Worker) signalAgain() {
	select {
	case w.leader.again <- struct{}{}:
	default:
	}
}

// Abandon makes the worker's leader callback, if it leads, work on for d
// without watching its context, and stops its Contender with a context
// that ends long before (Stop abandons the grant). It reports whether
// the worker led, and Stop's error.
func (w *Worker) Abandon(d time.Duration) (bool, error) {
	st := &w.leader
	st.mu.Lock()
	c, leading := st.c, st.leading
	st.mu.Unlock()
	if c == nil || leading == 0 {
		return false, nil
	}
	select { // a left-over from an Abandon that gave up
	case <-st.stuckNow:
	default:
	}
	st.stuck.Store(int64(d))
	st.act.Store(actAbandon)
	w.pokeLeader()
	select {
	case <-st.stuckNow: // the callback works on, unaware
	case <-time.After(w.Think):
		st.act.CompareAndSwap(actAbandon, 0)
		return false, nil // it stopped leading meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := c.Stop(ctx)
	if err != nil {
		st.abandoned.Store(true)
	}
	w.signalAgain()
	return true, err
}

// StopInside makes the worker's leader callback stop its own Contender
// at its next cycle.
func (w *Worker) StopInside() {
	w.leader.act.Store(actStopInside)
	w.pokeLeader()
}

// CloseInside makes the worker's leader callback close its own Manager
// at its next cycle (RunLeader goes on with a new one).
func (w *Worker) CloseInside() {
	w.leader.act.Store(actCloseInside)
	w.pokeLeader()
}

// Leading reports whether the worker's leader callback runs.
func (w *Worker) Leading() bool {
	st := &w.leader
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.leading > 0
}

func (w *Worker) pokeLeader() {
	select {
	case w.leader.poke <- struct{}{}:
	default:
	}
}
