package zkstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// rounds bounds the attempts of one call while the queue changes under it.
const rounds = 5

// Acquire implements [lease.Store]. The contender's node is created (or
// found) in the lock's queue; when it is first in line it owns the
// lock, and the grant lasts while the session lives and the holder's
// Manager keeps calling (see the package documentation); its queue is
// watched for the renewals, unless the last grant of the lock here ended
// before any renewal (see watchQueueNow). Otherwise the record names the
// owner, and the node ahead is watched.
//
// Requests: 2 for a free lock (create, list; one round trip when the
// lock's znode exists, see createListed), none when the node was
// already seen first in line (a waiter whose turn came, a retried
// Acquire), 1 for the next in line polling (list), none for a waiter
// further back whose Watch subscription keeps an eye on the node ahead:
// its record names the owner as its last look at the queue saw it.
func (s *Store) Acquire(ctx context.Context, name, contender string, ttl, transition time.Duration) (lease.Record, error) {
	if err := checkCall(name, contender, ttl, transition); err != nil {
		return lease.Record{}, err
	}
	k := nodeKey{name, contender}
	g := grant{contender: contender, ttl: ttl, transition: transition}
	start := time.Now() // no grant of this call can end before start + its Transition
	for range rounds {
		n, st := s.current(k)
		switch {
		case n != nil && n.held && !start.Before(n.due):
			// The grant lapsed before this call came: its holder was told.
			// It never comes back under the same token.
			if err := s.drop(ctx, k, n); err != nil {
				return lease.Record{}, fmt.Errorf("zkstore: acquire %q: %w", name, err)
			}
			continue
		case n != nil && n.lowest:
			if there, err := s.recheck(ctx, k, n, false); err != nil || !there {
				if err != nil {
					return lease.Record{}, fmt.Errorf("zkstore: acquire %q: %w", name, err)
				}
				continue // deleted behind our back: queue anew
			}
			rec, ok, err := s.grant(k, n, g, start, st)
			if err != nil {
				return lease.Record{}, fmt.Errorf("zkstore: acquire %q: %w", name, err)
			}
			if ok {
				return rec, nil
			}
			continue
		case n != nil && n.pred != n.owner.name && s.watched(k, n.path):
			// Further back in the queue, with the node ahead watched:
			// nothing that matters changed since the last look.
			if rec, ok := s.wait(k, n, g, start); ok {
				return rec, nil
			}
		}
		rec, done, err := s.look(ctx, k, g, start)
		if err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: acquire %q: %w", name, err)
		}
		if done {
			return rec, nil
		}
	}
	return lease.Record{}, fmt.Errorf("zkstore: acquire %q: the queue changed %d times during the call", name, rounds)
}

// grant gives k's node, first in line, to its contender (again): for
// ttl + transition from start, but no longer than the session surely
// lives. ok is false when the node was deleted meanwhile, or when its
// session ended: st, read after the queue, may be a later session's, which
// says nothing of n (a process resumed after its session expired reads its
// old node in a listing, then its conn opens a new session; the server has
// deleted the node since, and the next in line holds the lock).
func (s *Store) grant(k nodeKey, n *node, g grant, start time.Time, st sessionState) (lease.Record, bool, error) {
	if st.sid != n.session && st.sid != 0 {
		s.forget(k, n.path)
		return lease.Record{}, false, nil
	}
	left := st.left(start)
	if left <= 0 {
		return lease.Record{}, false, noSession(st)
	}
	end := start.Add(g.ttl + g.transition)
	ok := s.update(k, n.path, func(x *node) {
		if !x.held || x.due.Before(end) {
			x.due = end
		}
		if ttlEnd := start.Add(g.ttl); !x.held || x.ttlEnd.Before(ttlEnd) {
			x.ttlEnd = ttlEnd
		}
		x.held, x.lowest = true, true
	})
	if !ok {
		return lease.Record{}, false, nil
	}
	s.watchdogAt(end)
	tr := min(g.ttl+g.transition, left)
	return lease.Record{OwnerID: k.contender, Token: uint64(n.czxid), TTL: min(g.ttl, tr), Transition: tr}, true, nil
}

// noSession describes a session that may have expired.
func noSession(st sessionState) error {
	if st.sid == 0 {
		return ErrNoSession
	}
	return fmt.Errorf("%w: no heartbeat answered for %v (session timeout %v)",
		ErrNoSession, time.Since(st.anchor).Round(time.Millisecond), st.timeout)
}

// wait answers a waiter from its last look at the queue, and keeps its
// node from the watchdog.
func (s *Store) wait(k nodeKey, n *node, g grant, start time.Time) (lease.Record, bool) {
	rec := waiting(n.owner, g, k.contender)
	ok := s.update(k, n.path, func(x *node) { x.due = start.Add(rec.Transition + g.ttl + g.transition + waitGrace) })
	return rec, ok
}

// waiting is the record of a waiter: the owner, and its whole ttl and
// transition, the longest it keeps the lock without a call of its
// Manager (holders renew without a write, so the time left is theirs).
// A node of the waiter's own contender id ahead of its node (one this
// Store is deleting after a release whose delete failed, or another
// session's under the same id) is no grant to it: the record is held
// back, with no owner, never the waiter's own id, which its Manager
// would take for a grant under that node's token.
func waiting(o owner, g grant, self string) lease.Record {
	og := o.g
	if og.ttl == 0 {
		og = g // unreadable: a node with the caller's timings
	}
	if o.contender == self {
		return lease.Record{TTL: og.ttl, Transition: og.ttl + og.transition}
	}
	return lease.Record{OwnerID: o.contender, Token: uint64(o.czxid), TTL: og.ttl, Transition: og.ttl + og.transition}
}

// look reads the queue: it grants the lock when k's node is first in
// line, or else reads the owner and watches the node ahead. done is false
// when the caller must look again.
func (s *Store) look(ctx context.Context, k nodeKey, g grant, start time.Time) (lease.Record, bool, error) {
	n, q, qw, err := s.enqueue(ctx, k, g, start)
	if err != nil || n == nil {
		return lease.Record{}, false, err
	}
	name := path.Base(n.path)
	low, _ := q.lowest()
	if low.name == name {
		// Safe on any listing: it holds every node created before ours,
		// and none can come before it later.
		s.update(k, n.path, func(x *node) {
			x.lowest = true
			if qw != nil {
				x.queueWatch, x.queueStale = qw, false
			}
		})
		return s.grant(k, n, g, start, s.sess.tap.state())
	}
	pred, _ := q.predecessor(name)
	ow, w := n.owner, (<-chan zk.Event)(nil)
	armed := n.watch != nil && !n.fired && n.pred == pred.name
	if pred.name == low.name && !(armed && ow.name == low.name) {
		// Next in line: one request reads the owner and watches it.
		if ow, w, err = s.readOwner(ctx, q.path(low), true); err != nil {
			return lease.Record{}, false, ignoreGone(err)
		}
	} else if pred.name != low.name {
		var left bool
		if ow, w, left, err = s.readBehind(ctx, q, low, pred, ow, armed); err != nil || left {
			return lease.Record{}, false, err // a node just left: look again
		}
	}
	rec := waiting(ow, g, k.contender)
	ok := s.updateKick(k, n.path, w != nil || !n.looked, func(x *node) {
		x.owner, x.looked = ow, true
		if w != nil {
			x.pred, x.watch, x.fired = pred.name, w, false
		}
		x.due = start.Add(rec.Transition + g.ttl + g.transition + waitGrace)
	})
	return rec, ok, nil
}

// readBehind reads the owner low, unless ow is it already, and watches
// the node pred ahead of a waiter further back, unless armed: both
// requests go out at once, in one round trip. left reports that either
// node was gone.
func (s *Store) readBehind(ctx context.Context, q queue, low, pred child, ow owner, armed bool) (_ owner, _ <-chan zk.Event, left bool, _ error) {
	type watched struct {
		w   <-chan zk.Event
		err error
	}
	var res chan watched
	if !armed {
		res = make(chan watched, 1)
		go func() {
			w, err := s.existsW(ctx, q.path(pred))
			res <- watched{w, err}
		}()
	}
	var oerr error
	if ow.name != low.name {
		ow, _, oerr = s.readOwner(ctx, q.path(low), false)
	}
	var wr watched
	if res != nil {
		wr = <-res
	}
	switch {
	case oerr != nil:
		return owner{}, nil, gone(oerr), ignoreGone(oerr)
	case wr.err != nil:
		return owner{}, nil, false, wr.err
	}
	return ow, wr.w, !armed && wr.w == nil, nil
}

// updateKick is update, waking k's subscriptions when kick is set.
func (s *Store) updateKick(k nodeKey, path string, kick bool, f func(n *node)) bool {
	return s.update(k, path, func(n *node) {
		f(n)
		if kick {
			s.keys[k].kickLocked()
		}
	})
}

// ignoreGone turns the errors of a node that vanished meanwhile into nil.
func ignoreGone(err error) error {
	if gone(err) {
		return nil
	}
	return err
}

// enqueue returns k's node (nil: look again) and a listing of the queue
// made after the node existed, with a watch on the queue when the listing
// set one.
func (s *Store) enqueue(ctx context.Context, k nodeKey, g grant, start time.Time) (*node, queue, <-chan zk.Event, error) {
	dir := s.dirOf(k.mutex)
	watch := s.watchQueueNow(dir)
	if err := s.settle(ctx, k); err != nil {
		return nil, queue{}, nil, err
	}
	n, _ := s.current(k)
	if n == nil && !s.inDoubt(k) {
		// No node of ours: create one, then see where it stands.
		return s.createListed(ctx, dir, k, g, start, watch)
	}
	q, err := s.list(ctx, dir)
	if err != nil {
		return nil, q, nil, err
	}
	s.mu.Lock()
	hook := s.afterQueueRead
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	if mine := q.mine(k.contender); n != nil && len(mine) == 1 && mine[0].name == path.Base(n.path) {
		return n, q, nil, nil // the common case: exactly our node
	}
	// A create whose reply was lost, a node this Store lost track of, or
	// nodes of this contender id from another session: sort them out.
	if n, err = s.adopt(ctx, q, k, start); err != nil {
		return nil, q, nil, err
	}
	if n == nil {
		if n, err = s.create(ctx, dir, nodePrefix(dir, k.contender), k, g, start, true); err != nil || n == nil {
			return nil, q, nil, err
		}
	}
	return s.listed(ctx, dir, k, watch)
}

// createListed creates k's node and lists the queue (and watches it, with
// watch set: see watchQueueNow). The listing goes out right behind the
// create, as soon as the create's request was written: the server runs a
// session's requests in order, so both take one round trip. The listing
// is used only if it shows the new node, and so every node created before
// it (that one alone makes the first-in-line check safe); else the queue
// is listed again after the create. So a lock's znode this Store has not
// seen yet costs no round trip more when it exists (one Store of many, or
// a new one, takes a lock others took before), and a failed listing more
// when it does not (the create makes it first).
//
// A missing lock znode fails both: it is created, and the create and its
// listing go out together again.
func (s *Store) createListed(ctx context.Context, dir string, k nodeKey, g grant, start time.Time, watch bool) (*node, queue, <-chan zk.Event, error) {
	n, q, w, err := s.createListedOnce(ctx, dir, k, g, start, watch, false)
	if !errors.Is(err, errNoDir) {
		return n, q, w, err
	}
	if err := s.makeDir(ctx, dir); err != nil {
		return nil, queue{}, nil, err
	}
	return s.createListedOnce(ctx, dir, k, g, start, watch, true)
}

// createListedOnce is createListed; without mkdir, a missing lock znode
// fails it with errNoDir.
func (s *Store) createListedOnce(ctx context.Context, dir string, k nodeKey, g grant, start time.Time, watch, mkdir bool) (*node, queue, <-chan zk.Event, error) {
	prefix := nodePrefix(dir, k.contender)
	l := &createListing{wait: sendWait{path: prefix, sent: make(chan struct{})},
		created: make(chan struct{}), done: make(chan struct{})}
	s.sess.tap.awaitCreate(&l.wait)
	go s.listAfterCreate(ctx, l, dir, watch)
	n, err := s.create(ctx, dir, prefix, k, g, start, mkdir)
	l.made.Store(err == nil && n != nil)
	close(l.created)
	if err != nil || n == nil {
		return nil, queue{}, nil, err // the listing ends in the background
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, queue{}, nil, context.Cause(ctx)
	}
	if l.err == nil {
		q := newQueue(dir, l.names)
		if cur, _, ok := s.lookup(k); ok && cur.path == n.path && q.has(path.Base(n.path)) {
			*n = cur // n is create's copy, the caller's alone
			return n, q, l.w, nil
		}
	}
	return s.listed(ctx, dir, k, watch) // it went out before the create, or failed
}

// createListing is what createListedOnce shares with the goroutine that
// lists the queue behind its create, in one allocation (and a channel
// each for the create's request written, its call returned and the
// listing done): every Acquire of a free lock makes one.
type createListing struct {
	wait    sendWait      // for the create's request to be written
	created chan struct{} // closed once the create returned
	made    atomic.Bool   // the create made the node; set before created is closed

	// The listing, set before done is closed.
	names []string
	w     <-chan zk.Event
	err   error
	done  chan struct{}
}

// listAfterCreate lists (with watch set, and watches) the queue of dir as
// soon as l's create request was written, unless the create fails first.
func (s *Store) listAfterCreate(ctx context.Context, l *createListing, dir string, watch bool) {
	defer close(l.done)
	defer s.sess.tap.stopWait(&l.wait)
	select {
	case <-l.wait.sent:
	case <-l.created: // a connection the tap cannot follow, or a failed create
		if !l.made.Load() {
			l.err = errNotCreated
			return
		}
	}
	if err := ctx.Err(); err != nil {
		l.err = err
		return
	}
	s.trips.Add(1)
	if watch {
		l.names, _, l.w, l.err = s.sess.conn.ChildrenW(dir)
	} else {
		l.names, _, l.err = s.sess.conn.Children(dir)
	}
}

// watchQueueNow reports whether an Acquire's listing of dir watches the
// queue, for the renewals of the grant it may find (see recheck). Set with
// the listing, a watch costs no request, but the holder's own Release
// fires it: the server sends its event ahead of the delete's reply, which
// waits for it (a frame more to send and to read: about 30 µs of a 300 µs
// release, measured at the wire). A queue left unwatched costs one
// listing, at the grant's first renewal, and none when it is released
// before. So a lock whose last grant here ended before any renewal (and
// will likely be held briefly again) is left unwatched, and any other is
// watched: holding many locks for long costs no request.
func (s *Store) watchQueueNow(dir string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, brief := s.brief[dir]
	return !brief
}

// endedHold records how a grant of this Store on the lock znode dir
// ended: before any renewal, or after one (see watchQueueNow).
func (s *Store) endedHold(dir string, renewed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if renewed {
		delete(s.brief, dir)
		return
	}
	if len(s.brief) >= maxDirs {
		clear(s.brief)
	}
	s.brief[dir] = struct{}{}
}

// errNotCreated ends a listing meant to follow a create that failed.
var errNotCreated = errors.New("zkstore: the create failed")

// errNoDir fails a create, made without mkdir, whose lock znode is
// missing: nothing was created.
var errNoDir = errors.New("zkstore: the lock's znode is missing")

// maxDirs bounds the lock znodes a Store remembers (see endedHold).
const maxDirs = 4096

// listed lists (and with watch set, watches) the queue after k's node was
// made or found; the node is nil when it is not in the listing (its
// session expired meanwhile).
func (s *Store) listed(ctx context.Context, dir string, k nodeKey, watch bool) (*node, queue, <-chan zk.Event, error) {
	q, w, err := s.listW(ctx, dir, watch)
	if err != nil {
		return nil, q, nil, err
	}
	n, _ := s.current(k)
	if n == nil || !q.has(path.Base(n.path)) {
		if n != nil {
			s.forget(k, n.path)
		}
		return nil, q, nil, nil
	}
	return n, q, w, nil
}

// adopt keeps the lowest of contender's nodes that belongs to this
// session, and deletes the others: duplicates left by retried creates,
// and nodes of other sessions, whose expiry this session's heartbeats do
// not hold off (a restarted process under the same id leaves those). It
// returns nil when there is no node to keep.
func (s *Store) adopt(ctx context.Context, q queue, k nodeKey, start time.Time) (*node, error) {
	sid := s.sess.tap.state().sid
	var keep *node
	for _, c := range q.mine(k.contender) {
		p := q.path(c)
		if s.isRetiring(p) {
			continue // released, its delete pending: never a grant again
		}
		g, st, err := s.read(ctx, p)
		if gone(err) {
			continue
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		if keep == nil && err == nil && st.EphemeralOwner == sid && sid != 0 {
			keep = &node{path: p, session: sid, czxid: st.Czxid, g: g, due: start.Add(g.ttl + g.transition + waitGrace)}
			continue
		}
		if err := s.remove(ctx, p); err != nil && !gone(err) {
			return nil, err
		}
	}
	s.setDoubt(k, false)
	if keep == nil {
		s.forget(k, "")
		return nil, nil
	}
	if cur, _ := s.current(k); cur == nil || cur.path != keep.path {
		s.adoptNode(k, keep)
	}
	return keep, nil
}

// isRetiring reports whether this Store is deleting the node at p in the
// background.
func (s *Store) isRetiring(p string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.retiring[p]
	return ok
}

// create adds a node for contender to the queue of dir (at prefix, see
// nodePrefix), making the dir (a container node, which the server
// removes when it is empty) and the root as needed (with mkdir set; without, a missing dir fails it with
// errNoDir). Until its reply arrives, a node may exist unknown to the
// Store: the next Acquire looks for it before creating another (I7). A
// reply that comes after the caller gave up still records the node, which
// the watchdog removes unless an Acquire comes for it.
func (s *Store) create(ctx context.Context, dir, prefix string, k nodeKey, g grant, start time.Time, mkdir bool) (*node, error) {
	s.setDoubt(k, true)
	for range rounds {
		var made struct { // one allocation: f's closure keeps it
			n  node
			ok bool // n is set
		}
		err := s.doThen(ctx, func() error {
			before := s.sess.tap.state().sid
			p, err := s.sess.conn.Create(prefix, g.encode(), zk.FlagEphemeral|zk.FlagSequence, s.acl)
			if err != nil {
				return err
			}
			czxid, ok := s.sess.tap.takeCreate(p)
			if !ok { // a connection the tap could not follow: ask
				var st *zk.Stat
				if _, st, err = s.sess.conn.Exists(p); err != nil || st == nil {
					return err // the doubt stays; the next Acquire finds the node
				}
				czxid = st.Czxid
			}
			s.mu.Lock()
			hook := s.adoptHook
			s.mu.Unlock()
			if hook != nil {
				hook(func() { made.n, made.ok = s.adoptMade(k, p, before, czxid, g, start) })
			} else {
				made.n, made.ok = s.adoptMade(k, p, before, czxid, g, start)
			}
			return nil
		}, s.beginCreate(k))
		switch {
		case errors.Is(err, zk.ErrNoNode):
			s.setDoubt(k, false) // refused: nothing was created
			if !mkdir {
				return nil, errNoDir
			}
			if err := s.makeDir(ctx, dir); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		}
		if !made.ok {
			return nil, nil // the session changed meanwhile; look again
		}
		return &made.n, nil
	}
	return nil, fmt.Errorf("the znode %s kept disappearing", dir)
}

// adoptMade makes the node a create made at p, with czxid, k's node, and
// returns it (ok), unless the session is no longer the one (before) in
// which the create was sent.
func (s *Store) adoptMade(k nodeKey, p string, before, czxid int64, g grant, start time.Time) (_ node, ok bool) {
	sid := s.sess.tap.state().sid
	if sid != before || sid == 0 {
		return node{}, false
	}
	n := node{path: p, session: sid, czxid: czxid, g: g, due: start.Add(g.ttl + g.transition + waitGrace)}
	s.adoptCreated(k, &n) // copied
	return n, true
}

// makeDir creates the container node dir, and the root above it.
func (s *Store) makeDir(ctx context.Context, dir string) error {
	err := s.do(ctx, func() error {
		_, err := s.sess.conn.CreateContainer(dir, nil, zk.FlagContainer, s.acl)
		return err
	})
	if !errors.Is(err, zk.ErrNoNode) {
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	}
	p := ""
	for _, part := range splitRoot(s.root) {
		p += "/" + part
		err := s.do(ctx, func() error {
			_, err := s.sess.conn.Create(p, nil, zk.FlagPersistent, s.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}
