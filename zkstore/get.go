package zkstore

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/lease"
)

// Get implements [lease.Store]: it syncs the server it is connected to
// with the leader, lists the queue and reads its first node, the owner.
// Holders renew without writing, so others cannot see how much of a
// grant is left: the record has the owner's whole ttl and transition, the
// longest it keeps the lock without a call of its Manager. When the
// owner's grant is this Store's, the record has its time left instead:
// until the end of the ttl and transition last given to its holder, when
// the watchdog deletes the node unless a renewal comes first.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	if err := lease.ValidateName(name); err != nil {
		return lease.Record{}, err
	}
	dir := s.dirOf(name)
	if err := s.sync(ctx, dir); err != nil {
		return lease.Record{}, fmt.Errorf("zkstore: get %q: %w", name, err)
	}
	for range rounds {
		q, err := s.list(ctx, dir)
		if err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: get %q: %w", name, err)
		}
		low, ok := q.lowest()
		if !ok {
			return lease.Record{}, nil
		}
		g, st, err := s.read(ctx, q.path(low))
		if gone(err) {
			continue
		}
		if err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: get %q: %w", name, err)
		}
		rec := lease.Record{OwnerID: g.contender, Token: uint64(st.Czxid), TTL: g.ttl, Transition: g.ttl + g.transition}
		if ttl, tr, ok := s.timeLeft(nodeKey{name, g.contender}, q.path(low), time.Now()); ok {
			rec.TTL, rec.Transition = ttl, tr
		}
		return rec, nil
	}
	return lease.Record{}, fmt.Errorf("zkstore: get %q: the queue kept changing", name)
}

// timeLeft returns, at now, the time left of the ttl and transition last
// given to the holder of k's node at path, when this Store granted it in
// its current session (ok); nothing is left of a node being deleted.
func (s *Store) timeLeft(k nodeKey, path string, now time.Time) (ttl, transition time.Duration, ok bool) {
	sid := s.sess.tap.state().sid
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[k]
	if ks == nil || ks.n == nil || ks.n.path != path || !ks.n.held || ks.n.session != sid || sid == 0 {
		return 0, 0, false
	}
	if ks.n.dead {
		return 0, 0, true
	}
	transition = max(0, ks.n.due.Sub(now))
	return min(max(0, ks.n.ttlEnd.Sub(now)), transition), transition, true
}
