package zkstore

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/simba-go/simba/lease"
)

// Renew implements [lease.Store] without a request. On ZooKeeper a grant
// is its holder's node, which lives while the holder's session lives and
// until the holder's Store deletes it; no other client deletes it. So
// Renew is a promise of this Store, kept locally:
//
//   - The node stays until ttl + transition after this call, unless the
//     next Renew (or Release) comes first; then the watchdog deletes it,
//     so a hung holder loses the lock as a lapsed grant would. The
//     holder's deadline, computed from the same calls, passes before.
//   - The record's Transition is the smaller of ttl + transition and the
//     time the session surely lives (see [Session]). A holder
//     cut off from ZooKeeper is thus told of its loss before its session,
//     and with it its node, can expire.
//
// Renew fails with [lease.ErrNotHeld] when the grant is not this Store's
// live node with that token: released, deleted by the watchdog, ended
// with its session, or never made by this Store. A renewal that comes
// after ttl + transition never revives the grant, even when the node is
// still there. It fails with [ErrNoSession] (outcome unknown) when the
// session may have expired: no heartbeat was answered for too long.
func (s *Store) Renew(ctx context.Context, name, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	if err := checkCall(name, contender, ttl, transition); err != nil {
		return lease.Record{}, err
	}
	return s.renew(ctx, lease.RenewRequest{Name: name, Contender: contender, Token: token, TTL: ttl, Transition: transition})
}

func (s *Store) renew(ctx context.Context, r lease.RenewRequest) (lease.Record, error) {
	start := time.Now()
	k := nodeKey{r.Name, r.Contender}
	n, st := s.current(k)
	why := ""
	switch {
	case n == nil || !n.held || uint64(n.czxid) != r.Token:
		why = "no such grant of this contender in this session"
		if d := s.dying(k); d != nil && uint64(d.czxid) == r.Token {
			why = "the grant had lapsed"
			s.drop(ctx, k, d) // best effort: the watchdog is on it already
		}
	case !start.Before(n.due):
		why = "the grant had lapsed"
		if err := s.drop(ctx, k, n); err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: renew %q: %w", r.Name, err)
		}
	default:
		left := st.left(start)
		if left <= 0 {
			return lease.Record{}, fmt.Errorf("zkstore: renew %q: %w", r.Name, noSession(st))
		}
		if there, err := s.recheck(ctx, k, n, true); err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: renew %q: %w", r.Name, err)
		} else if !there {
			why = "the node was deleted"
			break
		}
		end := start.Add(r.TTL + r.Transition)
		if s.update(k, n.path, func(x *node) {
			x.renewed = true
			if x.due.Before(end) {
				x.due = end
			}
			if ttlEnd := start.Add(r.TTL); x.ttlEnd.Before(ttlEnd) {
				x.ttlEnd = ttlEnd
			}
		}) {
			tr := min(r.TTL+r.Transition, left)
			return lease.Record{OwnerID: r.Contender, Token: r.Token, TTL: min(r.TTL, tr), Transition: tr}, nil
		}
		why = "the grant ended during the call"
	}
	rec, _ := s.Get(ctx, r.Name) // best effort: tell the caller who owns
	return rec, fmt.Errorf("%w: zkstore: renew %q token %d: %s", lease.ErrNotHeld, r.Name, r.Token, why)
}

// recheck lists the queue of k's node n again (and watches it) when the
// queue changed since n was found first in line (a waiter came or left,
// or someone deleted n behind the Store's back), or for a renewal when the
// queue is not watched yet (see watchQueueNow), and reports whether n is
// still there. Renewals of an unchanged, watched queue send no request;
// an Acquire of a node found first in line sends none for an unwatched
// queue either (the node was there when it was found; the first renewal
// looks).
func (s *Store) recheck(ctx context.Context, k nodeKey, n *node, renewal bool) (bool, error) {
	if !n.queueStale && (n.queueWatch != nil || !renewal) {
		select {
		case <-n.queueWatch: // nil, unwatched: never fires (an Acquire trusts it)
			s.update(k, n.path, func(x *node) { x.queueStale = true })
		default:
			return true, nil
		}
	}
	q, w, err := s.listW(ctx, path.Dir(n.path), true)
	if err != nil {
		return false, err
	}
	if !q.has(path.Base(n.path)) {
		s.forget(k, n.path)
		return false, nil
	}
	s.update(k, n.path, func(x *node) { x.queueWatch, x.queueStale = w, false })
	return true, nil
}

// RenewMany implements [lease.BatchRenewer]: each request as Renew, so a
// Manager's renewals of live grants cost no request at all.
func (s *Store) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	res := make([]lease.RenewResult, len(reqs))
	for i, r := range reqs {
		if err := checkCall(r.Name, r.Contender, r.TTL, r.Transition); err != nil {
			res[i].Err = err
			continue
		}
		res[i].Record, res[i].Err = s.renew(ctx, r)
	}
	return res, nil
}
