package zkstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// rounds bounds the attempts of one call while the queue changes under it.
const rounds = 5

// Acquire implements [lease.Store]. It finds or creates contender's node
// under the mutex's znode, then either claims the mutex (its node is the
// lowest) or stays queued, reports the owner, and deletes the owner's node
// when its grant has lapsed on the server's clock.
func (s *Store) Acquire(ctx context.Context, mutex, contender string, ttl, transition time.Duration) (lease.Record, error) {
	if err := checkCall(mutex, contender, ttl, transition); err != nil {
		return lease.Record{}, err
	}
	k := nodeKey{mutex, contender}
	dir := s.dirOf(mutex)
	g := grant{contender: contender, ttl: ttl, transition: transition}
	synced := false
	for range rounds {
		own, q, err := s.enqueue(ctx, dir, k, g)
		if err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: acquire %q: %w", mutex, err)
		}
		if own == nil {
			continue
		}
		low, _ := q.lowest()
		var rec lease.Record
		var done bool
		switch {
		case low.name == path.Base(own.path):
			// Safe on any listing: ours shows every node created before
			// our own, and none can come below it.
			rec, done, err = s.claim(ctx, k, own, g)
		case !synced:
			// The nodes ahead may be gone already on the leader: losing
			// must not rest on a lagging server's view.
			synced, err = true, s.sync(ctx, dir)
		default:
			rec, done, err = s.queued(ctx, q, low, k, own, g)
		}
		if err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: acquire %q: %w", mutex, err)
		}
		if done {
			return rec, nil
		}
	}
	return lease.Record{}, fmt.Errorf("zkstore: acquire %q: the queue changed %d times during the call", mutex, rounds)
}

// enqueue returns contender's node (nil: try again) and a listing of the
// queue made after the node existed.
func (s *Store) enqueue(ctx context.Context, dir string, k nodeKey, g grant) (*ownNode, queue, error) {
	own := s.cached(k)
	if own == nil && !s.inDoubt(k) {
		// No node of ours: create one, then see where it stands.
		n, err := s.create(ctx, dir, k, g)
		if err != nil {
			return nil, queue{}, err
		}
		return s.listed(ctx, dir, k, n)
	}
	q, err := s.list(ctx, dir)
	if err != nil {
		return nil, q, err
	}
	if mine := q.mine(k.contender); own != nil && len(mine) == 1 && mine[0].name == path.Base(own.path) {
		return own, q, nil // the common case: exactly our node
	}
	// A create whose reply was lost, a node this Store lost track of, or
	// nodes of this contender id from another session: sort them out.
	own, err = s.adopt(ctx, q, k)
	if err != nil {
		return nil, q, err
	}
	n := own
	if n == nil {
		if n, err = s.create(ctx, dir, k, g); err != nil {
			return nil, q, err
		}
	}
	return s.listed(ctx, dir, k, n)
}

// listed lists the queue after contender's node n was made or found; n
// is nil when it is not in the listing (its session expired meanwhile).
// A failed listing keeps n known: it exists.
func (s *Store) listed(ctx context.Context, dir string, k nodeKey, n *ownNode) (*ownNode, queue, error) {
	q, err := s.list(ctx, dir)
	if err != nil {
		return nil, q, err
	}
	if !q.has(path.Base(n.path)) {
		s.forget(k)
		return nil, q, nil
	}
	return n, q, nil
}

// adopt keeps the lowest of contender's nodes that belongs to this
// session, and deletes the others: duplicates left by retried creates,
// and nodes of other sessions, whose expiry this session's heartbeats do
// not hold off (a restarted process under the same id leaves those). It
// returns nil when there is no node to keep.
func (s *Store) adopt(ctx context.Context, q queue, k nodeKey) (*ownNode, error) {
	sid := s.conn.SessionID()
	var own *ownNode
	for _, c := range q.mine(k.contender) {
		p := q.path(c)
		g, st, err := s.read(ctx, p)
		if gone(err) {
			continue
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		if own == nil && err == nil && st.EphemeralOwner == sid {
			own = &ownNode{path: p, session: sid, czxid: st.Czxid, version: st.Version, mtime: st.Mtime, g: g}
			continue
		}
		if err := s.remove(ctx, q.dir, p, st.Version); err != nil && !gone(err) {
			return nil, err
		}
	}
	s.setDoubt(k, false)
	if own == nil {
		s.forget(k)
		return nil, nil
	}
	s.remember(k, own)
	return own, nil
}

// create adds a node for contender to the queue of dir, making the dir
// (a container node, removed by the server when empty) and the root as
// needed. Until its reply arrives, a node may exist unknown to the Store:
// the next Acquire looks for it before creating another (I7).
func (s *Store) create(ctx context.Context, dir string, k nodeKey, g grant) (*ownNode, error) {
	s.setDoubt(k, true)
	for range rounds {
		var p string
		err := s.do(ctx, func() (err error) {
			p, err = s.conn.Create(dir+"/"+prefixOf(k.contender), g.encode(), zk.FlagEphemeral|zk.FlagSequence, s.acl)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			if err := s.makeDir(ctx, dir); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		n := &ownNode{path: p, session: s.conn.SessionID(), g: g}
		s.remember(k, n)
		return n, nil
	}
	return nil, fmt.Errorf("the znode %s kept disappearing", dir)
}

// makeDir creates the container node dir, and the root above it.
func (s *Store) makeDir(ctx context.Context, dir string) error {
	err := s.do(ctx, func() error {
		_, err := s.conn.CreateContainer(dir, nil, zk.FlagContainer, s.acl)
		return err
	})
	if !errors.Is(err, zk.ErrNoNode) {
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	}
	p := ""
	for _, part := range strings.Split(s.root[1:], "/") {
		p += "/" + part
		err := s.do(ctx, func() error {
			_, err := s.conn.Create(p, nil, zk.FlagPersistent, s.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// claim takes the mutex for contender, whose node is the lowest, or
// extends its live grant. The write is conditional on the node's version,
// so a concurrent expiry by a waiter makes it fail instead of reviving
// the node; done is false when the caller must look again.
func (s *Store) claim(ctx context.Context, k nodeKey, own *ownNode, g grant) (lease.Record, bool, error) {
	g.claimed = true
	st, err := s.write(ctx, own.path, g, own.version)
	if err != nil {
		return lease.Record{}, false, s.lost(ctx, k, own, err)
	}
	if own.g.claimed && st.Mtime-own.mtime >= ms(own.g.ttl+own.g.transition) {
		// Our earlier grant lapsed before this call came: it must not come
		// back under the same token. Drop the node; the next round queues
		// a new one, with a larger czxid.
		if err := s.remove(ctx, path.Dir(own.path), own.path, st.Version); err != nil && !gone(err) {
			return lease.Record{}, false, err
		}
		s.forget(k)
		return lease.Record{}, false, nil
	}
	s.remember(k, &ownNode{path: own.path, session: own.session, czxid: st.Czxid, version: st.Version, mtime: st.Mtime, g: g})
	return s.held(k.contender, st.Czxid, g.ttl, g.transition), true, nil
}

// queued refreshes contender's waiting node (which also reads the
// server's clock), reads the owner, and deletes the owner's node when its
// grant has lapsed. done is false when the caller must look again.
func (s *Store) queued(ctx context.Context, q queue, low child, k nodeKey, own *ownNode, g grant) (lease.Record, bool, error) {
	if low.contender == k.contender {
		return lease.Record{}, false, nil // ours, of another session: enqueue removes it
	}
	st, err := s.write(ctx, own.path, g, own.version)
	if err != nil {
		return lease.Record{}, false, s.lost(ctx, k, own, err)
	}
	s.remember(k, &ownNode{path: own.path, session: own.session, czxid: st.Czxid, version: st.Version, mtime: st.Mtime, g: g})
	now := st.Mtime
	og, ost, err := s.read(ctx, q.path(low))
	switch {
	case gone(err):
		return lease.Record{}, false, nil
	case errors.Is(err, ErrCorrupt):
		og = grant{ttl: g.ttl, transition: g.transition} // not ours to trust: a waiter with our timings
	case err != nil:
		return lease.Record{}, false, err
	}
	end := ost.Mtime + ms(og.ttl+og.transition)
	if !og.claimed {
		// Next in line but not yet claimed: its window runs from when it
		// became the lowest (the last removal stamped the dir) or its own
		// last poll, whichever is later.
		end = max(ost.Mtime, q.dirMtime) + ms(og.ttl+og.transition)
	}
	if now >= end {
		if err := s.remove(ctx, q.dir, q.path(low), ost.Version); err != nil && !gone(err) {
			return lease.Record{}, false, err
		}
		return lease.Record{}, false, nil
	}
	left := time.Duration(end-now) * time.Millisecond
	if !og.claimed {
		return lease.Record{Transition: left}, true, nil // held back for the next in line
	}
	return lease.Record{Owner: og.contender, Token: uint64(ost.Czxid), TTL: max(0, left-og.transition), Transition: left}, true, nil
}

// lost handles a failed write to contender's own node: gone means look
// again (after re-reading the node when only its version moved on, as
// after a write whose reply was lost); other errors are returned.
func (s *Store) lost(ctx context.Context, k nodeKey, own *ownNode, err error) error {
	switch {
	case errors.Is(err, zk.ErrNoNode):
		s.forget(k)
		return nil
	case errors.Is(err, zk.ErrBadVersion):
		g, st, err := s.read(ctx, own.path)
		if gone(err) || errors.Is(err, ErrCorrupt) {
			s.forget(k)
			return nil
		}
		if err != nil {
			return err
		}
		s.remember(k, &ownNode{path: own.path, session: own.session, czxid: st.Czxid, version: st.Version, mtime: st.Mtime, g: g})
		return nil
	}
	return err
}

// ms converts d to milliseconds, the unit of ZooKeeper's clock.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// checkCall validates the arguments every call shares.
func checkCall(mutex, contender string, ttl, transition time.Duration) error {
	if err := lease.ValidateName(mutex); err != nil {
		return err
	}
	if contender == "" || len(contender) > lease.MaxContenderIDLength {
		return fmt.Errorf("%w: zkstore: contender id of %d bytes", lease.ErrInvalidArgument, len(contender))
	}
	if ttl < time.Millisecond || transition < 0 {
		return fmt.Errorf("%w: zkstore: ttl %v, transition %v", lease.ErrInvalidArgument, ttl, transition)
	}
	return nil
}
