package tck

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
)

// Instruments the cases share: a prober that reads a lock over and over,
// and checks of a holder's deadline against what the store was told.

// probe is one Get of a prober.
type probe struct {
	sent, got time.Time
	rec       lease.Record
	live      bool // the holder's lease was live once the reply had come
}

// prober reads one lock every interval from its own client until stopped.
type prober struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	probes []probe
}

// probe starts reading name from s every ttl/40, noting after each reply
// whether holder (the context of the holder's lease) is still live. Stop
// it before the case ends.
func (e *env) probe(s lease.Store, name string, holder context.Context) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	every := e.ttl / 40
	go func() {
		defer close(p.done)
		for {
			sent := time.Now()
			rec, err := s.Get(e.ctx, name)
			if err == nil {
				got := time.Now()
				live := holder.Err() == nil
				p.mu.Lock()
				p.probes = append(p.probes, probe{sent: sent, got: got, rec: rec, live: live})
				p.mu.Unlock()
			}
			select {
			case <-p.stop:
				return
			case <-e.ctx.Done():
				return
			case <-time.After(every):
			}
		}
	}()
	return p
}

// halt stops the prober and returns its probes.
func (p *prober) halt() []probe {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probes
}

// checkOutlasts checks that the store kept holder's grant until at least
// deadline, and that the holder was told of its loss before the store let
// the grant go: no probe answered before deadline, or while the holder's
// lease was still live after the reply, saw another owner or a free
// lock. The server's answer came before the reply reached the prober, so
// such a probe proves the store could grant the lock to someone else
// while the holder still believed it held it.
func (e *env) checkOutlasts(probes []probe, holder string, deadline, cut time.Time) {
	e.t.Helper()
	for _, p := range probes {
		if p.rec.OwnerID != holder && p.got.Before(deadline) {
			e.t.Errorf("a Get answered %v after the cut saw owner %q (token %d, transition %v): the store let the holder's grant go before the holder's deadline (%v after the cut); a renewal must keep the grant for ttl + transition from the server's now",
				p.got.Sub(cut), p.rec.OwnerID, p.rec.Token, p.rec.Transition, deadline.Sub(cut))
			return
		}
	}
	for _, p := range probes {
		if p.rec.OwnerID != holder && p.live {
			e.t.Errorf("a Get answered %v after the cut saw owner %q (token %d) while the holder's lease was still live (its deadline %v after the cut): a holder must be told of its loss at its deadline, without waiting for a hung store call",
				p.got.Sub(cut), p.rec.OwnerID, p.rec.Token, deadline.Sub(cut))
			return
		}
	}
}

// checkDeadline checks that l's deadline lies no later than ttl +
// transition after the sending of the newest call of t on l's lock that
// succeeded: a deadline counts from when the confirming call was sent (the
// grant can be no older on the server), never from when its reply came.
func (e *env) checkDeadline(what string, l *lease.Lease, t *tap) {
	e.t.Helper()
	d := l.Deadline() // first: every call it counts from has returned by now
	sent := t.newestSent(l.Name())
	if sent.IsZero() {
		e.t.Errorf("%s: no call on %q succeeded, yet the lease has a deadline", what, l.Name())
		return
	}
	if limit := sent.Add(e.ttl + e.transition); d.After(limit) {
		e.t.Errorf("%s: the deadline lies %v after the sending of the newest call that succeeded, more than ttl + transition (%v): does it count from the reply?",
			what, d.Sub(sent), e.ttl+e.transition)
	}
}

// slowReply is how late the replies of a slow store come in the cases
// that make them slow: a bit more than the lease's default safety margin,
// max(transition/2, ttl/10), so a deadline counted from a reply instead of
// its request lies past the grant's end on the server.
func (e *env) slowReply() time.Duration {
	return max(e.transition/2, e.ttl/10) + e.ttl/20
}

// waitCall waits up to d for a call of t for which match is true and
// returns the first one.
func (e *env) waitCall(t *tap, d time.Duration, what string, match func(c call) bool) call {
	e.t.Helper()
	var found []call
	if !e.eventually(d, func() bool { found = t.calls(match); return len(found) > 0 }) {
		e.t.Fatalf("%s: not within %v", what, d)
	}
	return found[0]
}

// poll is one Acquire of a waiter: who sent it, and when.
type poll struct {
	who int
	at  time.Time
}

// polls returns the Acquire calls on name that the taps logged, sent
// between from and to; first keeps only each tap's first one.
func polls(taps []*tap, name string, from, to time.Time, first bool) []poll {
	var ps []poll
	for i, t := range taps {
		cs := t.calls(func(c call) bool {
			return c.op == opAcquire && c.mutex == name && !c.sent.Before(from) && !c.sent.After(to)
		})
		if first && len(cs) > 1 {
			cs = cs[:1]
		}
		for _, c := range cs {
			ps = append(ps, poll{who: i, at: c.sent})
		}
	}
	return ps
}

// checkJitter checks that the waiters' polls are spread: waiters that
// lost to one grant retry around its transition end with a random jitter,
// so few polls come within a millisecond of another waiter's. Without
// jitter they all come at the same instant. Five polls at least are needed
// to judge.
//
// Timers due while the test process was not running (a loaded machine)
// all fire when it runs again, however well they were spread: polls made
// during a stall that st saw, or within 2 ms after it, are not judged.
func (e *env) checkJitter(ps []poll, st *stallWatch) {
	e.t.Helper()
	ps = slices.DeleteFunc(ps, func(p poll) bool { return st.stalled(p.at) })
	if len(ps) < 5 {
		e.t.Logf("only %d polls of waiters outside stalls of this process: too few to judge their jitter", len(ps))
		return
	}
	slices.SortFunc(ps, func(a, b poll) int { return a.at.Compare(b.at) })
	clustered := 0
	for i := range ps {
		if crowded(ps, i) {
			clustered++
		}
	}
	if clustered*2 > len(ps) {
		e.t.Errorf("%d of %d polls of waiters came within 1ms of another waiter's: waiters must retry with a jitter (-200ms to +1s around the owner's transition end), not all at once",
			clustered, len(ps))
	}
}

// stallWatch records when this process did not run for a while: a
// goroutine that sleeps a millisecond at a time notes every gap of more
// than stallGap between its wake-ups. It ends with the test.
type stallWatch struct {
	mu     sync.Mutex
	stalls [][2]time.Time
}

// stallGap is the least gap between wake-ups that counts as a stall.
const stallGap = 10 * time.Millisecond

// watchStalls starts a stallWatch that ends when the test does.
func (e *env) watchStalls() *stallWatch {
	st := &stallWatch{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	e.t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		prev := time.Now()
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			now := time.Now()
			if now.Sub(prev) > stallGap {
				st.mu.Lock()
				st.stalls = append(st.stalls, [2]time.Time{prev, now})
				st.mu.Unlock()
			}
			prev = now
		}
	}()
	return st
}

// stalled reports whether at falls in a stall, or within 2 ms after one.
func (st *stallWatch) stalled(at time.Time) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range st.stalls {
		if !at.Before(s[0]) && !at.After(s[1].Add(2*time.Millisecond)) {
			return true
		}
	}
	return false
}

// crowded reports whether another waiter's poll of the sorted ps came
// within a millisecond of ps[i].
func crowded(ps []poll, i int) bool {
	for j := i - 1; j >= 0 && ps[i].at.Sub(ps[j].at) <= time.Millisecond; j-- {
		if ps[j].who != ps[i].who {
			return true
		}
	}
	for j := i + 1; j < len(ps) && ps[j].at.Sub(ps[i].at) <= time.Millisecond; j++ {
		if ps[j].who != ps[i].who {
			return true
		}
	}
	return false
}

// liveAtGrant makes t, the tap of the next holder id of lock, note in
// each call's mark whether ctx (the previous holder's lease context) was
// still live when the call was sent, and report through the returned flag
// a grant of lock to id whose reply reached t while ctx was live: two
// holders at once.
func liveAtGrant(t *tap, id, name string, ctx func() context.Context) *atomic.Bool {
	var two atomic.Bool
	t.set(func(t *tap) {
		t.onSend = func(c *call) { c.mark = ctx().Err() == nil }
		t.onReply = func(c *call) {
			if c.op == opAcquire && c.mutex == name && c.err == nil && c.rec.Held(id) && ctx().Err() == nil {
				two.Store(true)
			}
		}
	})
	return &two
}
