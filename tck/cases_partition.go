package tck

import (
	"context"
	"errors"
	"time"

	"github.com/simba-go/simba/lease"
)

// Holders cut off from the store (Backend.Partitioned): RELIABILITY.md I3,
// I4 and I5, scenarios S1, S4 and S10. All times are read on the one clock
// of this process, so "before" is exact.
//
// Each case cuts its holder at an exact point of the protocol, which the
// holder's tap picks out: at the sending of its first renewal (so the
// grant's end was set by the Acquire), or at the reply of its first
// renewal that succeeded, sent while its replies came back slowly (so the
// grant's end was set by a renewal, and a deadline counted from a reply
// would lie too late). Hung calls either ignore their context (as a client
// that does not watch it) or return when it ends (as real clients do).
// Meanwhile a prober reads the lock from another client: no read answered
// before the holder's deadline may find the grant gone, and none may find
// it gone while the holder's lease is still live.
//
// A holder whose hung calls return when their context ends, each after a
// whole ttl (its call timeout), would learn of its loss late if it waited
// for one: its first renewal, sent a third of the way to its deadline,
// returns a ttl later, past the grant's end when the grant has little
// transition. The cases cut before a renewal ask for a grant without
// transition, with a safety margin of ttl/4: the deadline comes at 3/4
// ttl, the grant ends on the server at ttl, and a deadline that waited for
// the hung renewal (sent at ttl/4) would come at 5/4 ttl. The prober sees
// the grant gone while such a holder still believes, on any store; a
// correct holder is told ttl/4 before.

// cutPlan says when a holder is cut off and how its hung calls behave.
type cutPlan struct {
	renewed bool // at the reply of the first renewal that succeeded, replies slowed first
	honour  bool // hung calls return when their context ends
	long    bool // a ttl of call timeout, no transition, ttl/4 margin: a hung call outlasts the grant
}

// holderTap returns the holder's tap and the options of its Manager.
func (e *env) holderTap(plan cutPlan, name string) (*tap, []lease.Option) {
	t := e.partitioned(plan.honour)
	var opts []lease.Option
	if plan.renewed || plan.long {
		// The slow replies come within each call's context; a hung
		// call lasts a ttl.
		opts = append(opts, lease.WithCallTimeout(e.ttl))
	}
	if plan.renewed {
		t.delay = e.slowReply()
	}
	if plan.long {
		opts = append(opts, lease.WithTransition(0), lease.WithSafetyMargin(e.ttl/4))
	}
	t.trigger = func(c *call, replied bool) bool { // runs under t.mu
		if c.op != opRenew || c.mutex != name {
			return false
		}
		if plan.renewed {
			if replied && c.err == nil {
				t.delay = 0 // slow until the cut, prompt once healed
				return true
			}
			return false
		}
		return !replied
	}
	return t, opts
}

func casePartitionedHolder(e *env)        { partitionedHolder(e, cutPlan{honour: true, long: true}) }
func casePartitionedHolderRenewed(e *env) { partitionedHolder(e, cutPlan{renewed: true}) }
func casePartitionedLeader(e *env)        { partitionedLeader(e, cutPlan{honour: true, long: true}) }
func casePartitionedLeaderRenewed(e *env) { partitionedLeader(e, cutPlan{renewed: true, honour: true}) }

// partitionedHolder: a holder whose store calls hang is told of the loss
// (Done, ErrLost) strictly before the waiter's winning Acquire is even
// sent, and the store keeps its grant at least until its deadline; the
// waiter takes over within the takeover bound under a greater token; after
// healing, the old holder's late calls disturb nobody, its Release reports
// ErrLost, and it does not hold the lock again until it acquires anew;
// then it holds, renews and releases as before.
func partitionedHolder(e *env, plan cutPlan) {
	name := e.name("holder")
	at, opts := e.holderTap(plan, name)
	a := e.manager(at.client(), opts...)
	b, bt := e.tappedManager()
	raw := e.client()

	la := e.acquire(a, name)
	two := liveAtGrant(bt, b.ID(), name, la.Context)
	wb := e.acquireAsync(e.ctx, b, name)
	p := e.probe(raw, name, la.Context())
	cut := e.firstCut(at, e.takeover(), "the cut at the holder's first renewal")
	e.lostBeforeCut(at, cut, la)

	rb := e.granted(wb, e.takeover(), "takeover from a holder cut off from the store")
	probes := p.halt()
	if two.Load() || !closed(la.Done()) {
		e.t.Fatalf("the waiter was granted the lock %v after the cut while the cut-off holder's lease was live: two holders",
			rb.at.Sub(cut))
	}
	if _, live, ok := bt.grantSent(b.ID(), rb.l.Token()); !ok {
		e.t.Errorf("no Acquire of the new holder returned its grant (token %d)", rb.l.Token())
	} else if live {
		e.t.Errorf("the new holder's winning Acquire was sent while the cut-off holder's lease was live: the holder must be told first")
	}
	e.checkOutlasts(probes, a.ID(), la.Deadline(), cut)
	e.checkDeadline("the cut-off holder", la, at)
	e.checkEnded(la, lease.ErrLost)
	if rb.l.Token() <= la.Token() {
		e.t.Errorf("takeover token %d, the cut-off holder had %d; want greater", rb.l.Token(), la.Token())
	}

	at.Heal()
	time.Sleep(e.ttl) // the old holder's hung calls land now
	ctx, cancel := context.WithTimeout(e.ctx, e.takeover())
	defer cancel()
	if err := la.Release(ctx); !errors.Is(err, lease.ErrLost) {
		e.t.Errorf("Release of a lost lease after healing: %v, want ErrLost", err)
	}
	if la.Held() {
		e.t.Errorf("the lost lease is Held() again after healing")
	}
	if o := e.get(b, name); o.ID != b.ID() || o.Token != rb.l.Token() || !rb.l.Held() || rb.l.Err() != nil {
		e.t.Errorf("after healing: Get = %q token %d, new lease Held() = %v, Err() = %v; want %q token %d, held",
			o.ID, o.Token, rb.l.Held(), rb.l.Err(), b.ID(), rb.l.Token())
	}
	if rec := e.rawGet(raw, name); rec.OwnerID != b.ID() || rec.Token != rb.l.Token() {
		e.t.Errorf("after healing the store has %+v, want owner %q token %d", rec, b.ID(), rb.l.Token())
	}
	if l, err := a.TryAcquire(e.ctx, name); !errors.Is(err, lease.ErrNotAcquired) {
		e.t.Errorf("TryAcquire by the healed Manager while another holds the lock = %v, %v; want ErrNotAcquired", l, err)
	}
	e.release(rb.l)

	// The healed client works: it holds, renews and releases again.
	l := e.acquire(a, name)
	e.waitCall(at, e.ttl, "a renewal through the healed client", func(c call) bool {
		return c.op == opRenew && c.mutex == name && c.token == l.Token() && c.err == nil
	})
	e.release(l)
}

// partitionedLeader: a leader whose store calls hang has its OnAcquired
// context cancelled before the next leader's winning Acquire is sent, and
// its OnReleased called before the next leader's OnAcquired, without
// waiting for the hung calls; the store keeps its grant at least until its
// deadline. After healing it contends again as a follower and leads (and
// renews) again when the new leader stops.
func partitionedLeader(e *env, plan cutPlan) {
	name := e.name("leader")
	at, opts := e.holderTap(plan, name)
	a := e.manager(at.client(), opts...)
	b, bt := e.tappedManager()
	raw := e.client()

	ca, ra := e.contend(a, name)
	aa := ra.next(e, e.takeover(), "OnAcquired of the first leader")
	two := liveAtGrant(bt, b.ID(), name, func() context.Context { return aa.ctx })
	cb, rb := e.contend(b, name)
	p := e.probe(raw, name, aa.l.Context())
	cut := e.firstCut(at, e.takeover(), "the cut at the leader's first renewal")
	e.lostBeforeCut(at, cut, aa.l)

	ab := rb.next(e, e.takeover(), "OnAcquired of the next leader after the first was cut off")
	probes := p.halt()
	if two.Load() || aa.ctx.Err() == nil {
		e.t.Fatalf("the next leader was granted the lock %v after the cut while the cut-off leader's context was live: two leaders",
			ab.at.Sub(cut))
	}
	if _, live, ok := bt.grantSent(b.ID(), ab.l.Token()); !ok {
		e.t.Errorf("no Acquire of the new leader returned its grant (token %d)", ab.l.Token())
	} else if live {
		e.t.Errorf("the new leader's winning Acquire was sent while the cut-off leader's context was live: it must end first")
	}
	e.checkOutlasts(probes, a.ID(), aa.l.Deadline(), cut)
	e.checkDeadline("the cut-off leader", aa.l, at)
	rel := recv(e, ra.released, e.prompt(), "OnReleased of the cut-off leader")
	if !rel.at.Before(ab.at) {
		e.t.Errorf("the cut-off leader's OnReleased ran %v after the next leader's OnAcquired: it must not wait for hung store calls", rel.at.Sub(ab.at))
	}
	if rel.prev.Token != aa.l.Token() {
		e.t.Errorf("OnReleased with token %d, want %d", rel.prev.Token, aa.l.Token())
	}
	if ca.Leading() || !errors.Is(aa.l.Err(), lease.ErrLost) {
		e.t.Errorf("cut-off leader: Leading() = %v, lease Err() = %v; want false, ErrLost", ca.Leading(), aa.l.Err())
	}
	if ab.l.Token() <= aa.l.Token() {
		e.t.Errorf("next leader's token %d after %d, want greater", ab.l.Token(), aa.l.Token())
	}

	at.Heal()
	time.Sleep(e.ttl) // the old leader's hung calls land now
	if !cb.Leading() || ca.Leading() || len(ra.acquired) != 0 {
		e.t.Errorf("after healing: new leader Leading() = %v, old leader Leading() = %v, old leader OnAcquired calls = %d; want true, false, 0",
			cb.Leading(), ca.Leading(), len(ra.acquired))
	}
	e.stop(cb)
	again := ra.next(e, e.takeover(), "OnAcquired of the healed contender after the leader stopped")
	if again.l.Token() <= ab.l.Token() {
		e.t.Errorf("the healed contender leads with token %d after %d, want greater", again.l.Token(), ab.l.Token())
	}
	e.waitCall(at, e.ttl, "a renewal of the healed contender's grant", func(c call) bool {
		return c.op == opRenew && c.mutex == name && c.token == again.l.Token() && c.err == nil
	})
	e.stop(ca)
	ra.verify(e, a.ID())
	rb.verify(e, b.ID())
}
