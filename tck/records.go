package tck

import (
	"fmt"
	"strings"
	"time"

	"github.com/simba-go/simba/lease"
)

// The durations a record reports (lease/store.go, what a record promises).

// round is the rounding a store may apply to the durations it reports
// (milliseconds, truncated, on either end of a difference).
const round = 2 * time.Millisecond

// checkRecord checks the remaining durations of a live grant made with the
// harness timings: TTL at most ttl, Transition at most ttl + transition,
// and, while the grant is in its ttl, Transition exactly transition more
// than TTL (both ends were set from one instant of the server's clock).
func (e *env) checkRecord(what string, rec lease.Record) {
	e.t.Helper()
	if rec.TTL < 0 || rec.TTL > e.ttl+round || rec.Transition < rec.TTL || rec.Transition > e.ttl+e.transition+round {
		e.t.Errorf("%s: remaining TTL %v, Transition %v; want 0 <= TTL <= %v and TTL <= Transition <= %v",
			what, rec.TTL, rec.Transition, e.ttl, e.ttl+e.transition)
	}
	if gap := rec.Transition - rec.TTL; rec.TTL > round && (gap < e.transition-round || gap > e.transition+round) {
		e.t.Errorf("%s: remaining TTL %v, Transition %v: the transition runs %v after the ttl, want %v",
			what, rec.TTL, rec.Transition, gap, e.transition)
	}
}

// checkGrant checks the record of the holder's own Acquire or Renew, sent
// at sent and answered at got through s, that made or extended a grant
// with the harness timings. It reports the grant as asked: checkRecord,
// and a TTL of at least ttl less the call's time (set from the server's
// now, during the call). Only a store that limits its grants
// ([lease.GrantLimiter]) may report less, what it surely keeps: a
// Transition below ttl + transition, and a TTL of the smaller of ttl and
// Transition. Such a store never reports more than its MaxGrant.
func (e *env) checkGrant(what string, s lease.Store, rec lease.Record, sent, got time.Time) {
	e.t.Helper()
	took := got.Sub(sent)
	limit := grantLimit(s)
	if limit > 0 && rec.Transition > limit+round {
		e.t.Errorf("%s: remaining Transition %v, more than the store's MaxGrant %v: a store that limits its grants never promises more",
			what, rec.Transition, limit)
	}
	asked := rec.TTL >= e.ttl-took-round && rec.Transition >= rec.TTL+e.transition-round
	if asked || limit == 0 {
		e.checkRecord(what, rec)
		if least := e.ttl - took - round; rec.TTL < least {
			e.t.Errorf("%s: remaining TTL %v, %v after it was asked: want at least %v, ttl from the server's now (only a lease.GrantLimiter may report less)",
				what, rec.TTL, took, least)
		}
		return
	}
	// Less than asked, from a store that limits its grants.
	if rec.TTL < 0 || rec.Transition < rec.TTL || rec.Transition > e.ttl+e.transition+round || rec.TTL > e.ttl+round ||
		rec.TTL < min(e.ttl-took, rec.Transition)-round {
		e.t.Errorf("%s: remaining TTL %v, Transition %v, less than asked (ttl %v, transition %v): want Transition below ttl + transition and TTL the smaller of ttl and Transition",
			what, rec.TTL, rec.Transition, e.ttl, e.transition)
	}
}

// grantLimit returns the MaxGrant of a store that limits its grants, 0
// for any other; a tap's client is judged by the client it wraps.
func grantLimit(s lease.Store) time.Duration {
	for {
		if gl, ok := s.(lease.GrantLimiter); ok {
			return gl.MaxGrant()
		}
		t, ok := s.(interface{ wrapped() lease.Store })
		if !ok {
			return 0
		}
		s = t.wrapped()
	}
}

// checkGetChangesNothing reads name twice, ttl/4 apart, through s, the
// client that made holder's grant (so it knows the server's clock, and
// the time left of a grant that its holder renews without writing), and
// checks that the grant's time left shrank by at least the time between
// the two reads: a Get that extends or re-arms the grant fails.
func (e *env) checkGetChangesNothing(s lease.Store, name, holder string, token uint64) {
	e.t.Helper()
	sent1 := time.Now()
	first := e.rawGet(s, name)
	got1 := time.Now()
	time.Sleep(e.ttl / 4)
	sent2 := time.Now()
	second := e.rawGet(s, name)
	for i, rec := range []lease.Record{first, second} {
		if rec.OwnerID != holder || rec.Token != token {
			e.t.Errorf("Get %d of a held lock = %+v, want owner %q token %d", i+1, rec, holder, token)
			return
		}
	}
	if passed := sent2.Sub(got1); first.Transition-second.Transition < passed-round {
		e.t.Errorf("two Gets %v apart (%v between the first's sending and the second's) report %v then %v left: the time left must shrink by the time passed; does Get extend the grant?",
			passed, sent2.Sub(sent1), first.Transition, second.Transition)
	}
}

// Replies that come late (the slow cases) leave a holder less of its
// grant: a store that tells its holder less than asked may leave no room
// for them.

// noRoom reports why every lost lease of ls, held through t, a client of
// a store that limits its grants, was lost for want of room: its deadline
// came less than a slow reply after the reply of its newest call
// confirmed in time (renewals are sent one after the other, so the next
// one could not come back before the deadline). ok is false when one was
// not, or the store does not limit grants.
func (e *env) noRoom(t *tap, ls ...*lease.Lease) (why string, ok bool) {
	if grantLimit(t.s) == 0 {
		return "", false
	}
	var whys []string
	for _, l := range ls {
		if l.Held() {
			continue
		}
		d := l.Deadline()
		last, found := t.newestConfirmed(l.Name(), l.Token(), d)
		room := d.Sub(last.returned)
		if !found || room >= e.slowReply() {
			return "", false
		}
		whys = append(whys, fmt.Sprintf("the lease of %q was told %v left by a call answered %v after its sending, which left %v from the reply to the deadline, less than a slow reply (%v)",
			l.Name(), last.rec.Transition, last.returned.Sub(last.sent), room, e.slowReply()))
	}
	return strings.Join(whys, "; "), len(whys) > 0
}

// lostBeforeCut skips a case whose holder lease l, held through t with
// slow replies until the cut at cut, was lost before the cut for want of
// room (see noRoom): there is no cut-off holder left to judge.
func (e *env) lostBeforeCut(t *tap, cut time.Time, l *lease.Lease) {
	e.t.Helper()
	if !l.Deadline().Before(cut) {
		return
	}
	e.eventually(e.prompt(), func() bool { return closed(l.Done()) }) // it is told at its deadline
	if why, ok := e.noRoom(t, l); ok {
		e.t.Skipf("before the cut: %s: not judged", why)
	}
}
