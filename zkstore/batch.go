package zkstore

import (
	"context"
	"fmt"
	"path"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// RenewMany implements [lease.BatchRenewer]: the renewals of grants this
// Store knows go to ZooKeeper as one multi request, the conditional writes
// Renew would make, in one round trip. A multi is all or nothing: when
// one of its writes fails (a node gone, a version moved on), none is
// applied, and every request is renewed on its own as Renew does. So are
// requests for grants the Store does not know. A grant that had lapsed
// before the multi rewrote it is deleted and reported as Renew would.
func (s *Store) RenewMany(ctx context.Context, reqs []lease.RenewRequest) ([]lease.RenewResult, error) {
	res := make([]lease.RenewResult, len(reqs))
	var ops []any
	var idx []int
	var nodes []*ownNode
	var grants []grant
	for i, r := range reqs {
		if err := checkCall(r.Mutex, r.Contender, r.TTL, r.Transition); err != nil {
			res[i].Err = err
			continue
		}
		own := s.cached(nodeKey{r.Mutex, r.Contender})
		if own == nil || uint64(own.czxid) != r.Token || !own.g.claimed {
			res[i].Record, res[i].Err = s.Renew(ctx, r.Mutex, r.Contender, r.Token, r.TTL, r.Transition)
			continue
		}
		g := grant{contender: r.Contender, ttl: r.TTL, transition: r.Transition, claimed: true}
		ops = append(ops, &zk.SetDataRequest{Path: own.path, Data: g.encode(), Version: own.version})
		idx, nodes, grants = append(idx, i), append(nodes, own), append(grants, g)
	}
	if len(ops) == 0 {
		return res, nil
	}
	var stats []*zk.Stat
	err := s.do(ctx, func() error {
		out, err := s.conn.Multi(ops...)
		if err != nil {
			for _, r := range out {
				if gone(r.Error) {
					return r.Error
				}
			}
			return err
		}
		for _, r := range out {
			stats = append(stats, r.Stat)
		}
		return nil
	})
	if gone(err) {
		for _, i := range idx { // nothing was applied: one by one
			r := reqs[i]
			res[i].Record, res[i].Err = s.Renew(ctx, r.Mutex, r.Contender, r.Token, r.TTL, r.Transition)
		}
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zkstore: renew %d grants: %w", len(idx), err)
	}
	for j, i := range idx {
		res[i].Record, res[i].Err = s.renewed(ctx, reqs[i], nodes[j], grants[j], stats[j])
	}
	return res, nil
}

// renewed records a write that renewed own, or, when the node was
// replaced or the grant had lapsed before the write came, reports
// [lease.ErrNotHeld] (deleting the lapsed node: a late renewal never
// revives a grant).
func (s *Store) renewed(ctx context.Context, r lease.RenewRequest, own *ownNode, g grant, st *zk.Stat) (lease.Record, error) {
	k := nodeKey{r.Mutex, r.Contender}
	s.clock.observe(st.Mtime)
	why := ""
	switch {
	case st.Czxid != own.czxid:
		why = "the node was replaced"
	case st.Mtime-own.mtime >= ms(own.g.ttl+own.g.transition):
		why = "the grant had lapsed"
		if err := s.remove(ctx, path.Dir(own.path), own.path, st.Version); err != nil && !gone(err) {
			return lease.Record{}, fmt.Errorf("zkstore: renew %q: %w", r.Mutex, err)
		}
	default:
		s.remember(k, &ownNode{path: own.path, session: own.session, czxid: st.Czxid, version: st.Version, mtime: st.Mtime, g: g})
		return s.held(r.Contender, st.Czxid, r.TTL, r.Transition), nil
	}
	s.forget(k)
	rec, _ := s.Get(ctx, r.Mutex) // best effort: tell the caller who owns
	return rec, fmt.Errorf("%w: zkstore: renew %q token %d: %s", lease.ErrNotHeld, r.Mutex, r.Token, why)
}
