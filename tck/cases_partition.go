package tck

import (
	"context"
	"errors"
	"time"

	"github.com/simba-go/simba/lease"
)

// Holders cut off from the store (Backend.Partitioned): RELIABILITY.md I3,
// I4 and I5, scenarios S1 and S4. All times are read on the one clock of
// this process, so "before" is exact.

// casePartitionedHolder: a holder whose store calls hang is told of the
// loss (Done, ErrLost) strictly before the waiter's winning Acquire is even
// sent; the waiter takes over within the takeover bound under a greater
// token; after healing, the old holder's late calls disturb nobody, its
// Release reports ErrLost, and it does not hold the mutex again.
func casePartitionedHolder(e *env) {
	ps, part := e.partitioned()
	a := e.manager(ps)
	bs, grants := observed(e.client())
	b := e.manager(bs)
	raw := e.client()
	name := e.name("holder")

	la := e.acquire(a, name)
	doneAt := make(chan time.Time, 1)
	go func() {
		<-la.Done()
		doneAt <- time.Now()
	}()
	wb := e.acquireAsync(e.ctx, b, name)
	time.Sleep(e.settle())
	cut := time.Now()
	part.Cut()

	rb := e.granted(wb, e.takeover(), "takeover from a holder cut off from the store")
	if !closed(la.Done()) {
		e.t.Fatalf("the waiter was granted the mutex %v after the cut while the cut-off holder's lease is live: two holders",
			rb.at.Sub(cut))
	}
	done := recv(e, doneAt, e.prompt(), "the cut-off holder's Done")
	sent, ok := grants.sentAt(rb.l.Token())
	switch {
	case !ok:
		e.t.Errorf("no Acquire of the new holder returned its grant (token %d)", rb.l.Token())
	case !done.Before(sent):
		e.t.Errorf("the cut-off holder was told of its loss %v after the cut, the new holder's winning Acquire was sent %v after it: the holder must be told first",
			done.Sub(cut), sent.Sub(cut))
	}
	e.checkEnded(la, lease.ErrLost)
	if rb.l.Token() <= la.Token() {
		e.t.Errorf("takeover token %d, the cut-off holder had %d; want greater", rb.l.Token(), la.Token())
	}

	part.Heal()
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
	if rec := e.rawGet(raw, name); rec.Owner != b.ID() || rec.Token != rb.l.Token() {
		e.t.Errorf("after healing the store has %+v, want owner %q token %d", rec, b.ID(), rb.l.Token())
	}
	if l, err := a.TryAcquire(e.ctx, name); !errors.Is(err, lease.ErrNotAcquired) {
		e.t.Errorf("TryAcquire by the healed Manager while another holds the mutex = %v, %v; want ErrNotAcquired", l, err)
	}
	e.release(rb.l)
}

// casePartitionedLeader: a leader whose store calls hang has its
// OnAcquired context cancelled before the next leader's winning Acquire is
// sent, and its OnReleased called before the next leader's OnAcquired,
// without waiting for the hung calls. After healing it contends again as a
// follower and leads again when the new leader stops.
func casePartitionedLeader(e *env) {
	ps, part := e.partitioned()
	a := e.manager(ps)
	bs, grants := observed(e.client())
	b := e.manager(bs)
	name := e.name("leader")

	ca, ra := e.contend(a, name)
	aa := ra.next(e, e.takeover(), "OnAcquired of the first leader")
	cb, rb := e.contend(b, name)
	time.Sleep(e.settle())
	cut := time.Now()
	part.Cut()

	ab := rb.next(e, e.takeover(), "OnAcquired of the next leader after the first was cut off")
	select {
	case ended := <-ra.ended:
		if sent, ok := grants.sentAt(ab.l.Token()); !ok {
			e.t.Errorf("no Acquire of the new leader returned its grant (token %d)", ab.l.Token())
		} else if !ended.Before(sent) {
			e.t.Errorf("the cut-off leader's context ended %v after the cut, the new leader's winning Acquire was sent %v after it",
				ended.Sub(cut), sent.Sub(cut))
		}
	default:
		e.t.Fatalf("the next leader's OnAcquired ran while the cut-off leader's context was live: two leaders")
	}
	select {
	case rel := <-ra.released:
		if !rel.at.Before(ab.at) {
			e.t.Errorf("the cut-off leader's OnReleased ran %v after the next leader's OnAcquired", rel.at.Sub(ab.at))
		}
		if rel.prev.Token != aa.l.Token() {
			e.t.Errorf("OnReleased with token %d, want %d", rel.prev.Token, aa.l.Token())
		}
	default:
		e.t.Errorf("the cut-off leader's OnReleased had not run when the next leader's OnAcquired ran: it must not wait for hung store calls")
	}
	if ca.Leading() || !errors.Is(aa.l.Err(), lease.ErrLost) {
		e.t.Errorf("cut-off leader: Leading() = %v, lease Err() = %v; want false, ErrLost", ca.Leading(), aa.l.Err())
	}
	if ab.l.Token() <= aa.l.Token() {
		e.t.Errorf("next leader's token %d after %d, want greater", ab.l.Token(), aa.l.Token())
	}

	part.Heal()
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
	e.stop(ca)
	ra.verify(e, a.ID())
	rb.verify(e, b.ID())
}
