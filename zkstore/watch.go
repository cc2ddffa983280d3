package zkstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// Watch implements [lease.Watcher] with ZooKeeper watches.
//
// A contender is sent an event when its node becomes first in line (its
// turn came: its Acquire now takes the lock without a request), when its
// node is gone (its session ended), and when the watch breaks. It watches
// only the node just ahead of its own: a release wakes the next waiter
// only, never the herd, and a waiter further back costs nothing until the
// node ahead of it leaves. An observer (contender "") watches the lock's
// children and is sent an event whenever the first node changes. Events
// carry only the lock name: the caller reads the owner with Get or
// Acquire.
//
// The channel is closed when ctx ends, and after a last event when a
// request fails or the watch breaks (the conn closed); the caller then
// polls, and may subscribe again. Watches survive a reconnection within
// the session.
func (s *Store) Watch(ctx context.Context, name, contender string) (<-chan lease.Event, error) {
	if err := lease.ValidateName(name); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: zkstore: watch: nil context", lease.ErrInvalidArgument)
	}
	out := make(chan lease.Event, 1)
	if contender == "" {
		go s.observe(ctx, name, out)
		return out, nil
	}
	k := nodeKey{name, contender}
	s.subscribe(k)
	go s.follow(ctx, k, out)
	return out, nil
}

// send delivers an event unless one is pending: one says enough.
func send(out chan<- lease.Event, name string) {
	select {
	case out <- lease.Event{Name: name}:
	default:
	}
}

// follow tells k's Manager when k's node becomes first in line or goes.
func (s *Store) follow(ctx context.Context, k nodeKey, out chan<- lease.Event) {
	defer close(out)
	defer s.unsubscribe(k)
	had := ""
	for {
		n, kick := s.snapshot(k)
		st := s.sess.tap.state()
		if n != nil && n.session != st.sid {
			n = nil
		}
		if n == nil {
			if had != "" {
				send(out, k.mutex) // gone: look again (and queue anew)
			}
			had = ""
			if !pause(ctx, kick, st.changed, nil) {
				return
			}
			continue
		}
		had = n.path
		switch {
		case n.lowest:
			if !n.told {
				send(out, k.mutex)
				s.update(k, n.path, func(x *node) { x.told = true })
			}
			if !pause(ctx, kick, st.changed, nil) {
				return
			}
		case n.watch != nil && !n.fired:
			ev, ok, woke := waitWatch(ctx, n.watch, kick, st.changed)
			if ctx.Err() != nil {
				return
			}
			if !woke {
				continue
			}
			// The node ahead was first in line, and is gone: ours is first
			// now, since no node can come ahead of it. Nothing to list.
			first := ok && ev.Type == zk.EventNodeDeleted && n.pred == n.owner.name
			s.updateKick(k, n.path, true, func(x *node) {
				if x.watch == n.watch {
					x.fired = true
				}
			})
			switch {
			case !ok || ev.Type == zk.EventNotWatching:
				send(out, k.mutex) // the session's watches were dropped
			case first:
				s.turn(k, n)
			}
		case !n.looked:
			// A node just made: the Acquire that made it looks at the
			// queue and arms the watch, then wakes us.
			if !pause(ctx, kick, st.changed, nil) {
				return
			}
		default:
			// In place: the request ends when the conn answers or fails it,
			// and a goroutine less is a scheduling delay less on the way
			// from a release to the next holder.
			if err := s.refresh(context.WithoutCancel(ctx), k, n); err != nil {
				if ctx.Err() == nil {
					send(out, k.mutex)
				}
				return
			}
		}
	}
}

// pause waits for a change; false when ctx ended.
func pause(ctx context.Context, a, b <-chan struct{}, c <-chan zk.Event) bool {
	select {
	case <-a:
	case <-b:
	case <-c:
	case <-ctx.Done():
		return false
	}
	return true
}

// waitWatch waits for w to fire (woke), or for a change of state.
func waitWatch(ctx context.Context, w <-chan zk.Event, kick, changed <-chan struct{}) (zk.Event, bool, bool) {
	select {
	case ev, ok := <-w:
		return ev, ok, true
	case <-kick:
	case <-changed:
	case <-ctx.Done():
	}
	return zk.Event{}, true, false
}

// refresh looks at k's queue for a subscription: it marks the node first
// in line (which starts its hand-off window: the watchdog deletes it
// unless an Acquire comes within its ttl + transition), or watches the
// node ahead. The listing watches the queue as an Acquire's does (see
// watchQueueNow).
func (s *Store) refresh(ctx context.Context, k nodeKey, n *node) error {
	dir := path.Dir(n.path)
	q, qw, err := s.listW(ctx, dir, s.watchQueueNow(dir))
	if err != nil {
		return err
	}
	name := path.Base(n.path)
	if !q.has(name) {
		s.forget(k, n.path)
		return nil
	}
	low, _ := q.lowest()
	if low.name == name {
		s.update(k, n.path, func(x *node) {
			if qw != nil {
				x.queueWatch, x.queueStale = qw, false
			}
		})
		s.turn(k, n)
		return nil
	}
	pred, _ := q.predecessor(name)
	var ow owner
	var w <-chan zk.Event
	if pred.name == low.name {
		ow, w, err = s.readOwner(ctx, q.path(low), true)
	} else {
		w, err = s.existsW(ctx, q.path(pred))
	}
	if err != nil || w == nil {
		return ignoreGone(err) // it just left: look again
	}
	s.updateKick(k, n.path, true, func(x *node) {
		x.pred, x.watch, x.fired, x.looked = pred.name, w, false, true
		if ow.name != "" {
			x.owner = ow
		}
	})
	return nil
}

// turn marks k's node n first in line, which starts its hand-off window:
// the watchdog deletes it unless an Acquire comes within its ttl +
// transition.
func (s *Store) turn(k nodeKey, n *node) {
	window := time.Now().Add(n.g.ttl + n.g.transition)
	if s.updateKick(k, n.path, true, func(x *node) {
		x.lowest = true
		if !x.held && window.Before(x.due) {
			x.due = window
		}
	}) {
		s.announce(n)
	}
	s.watchdogAt(window)
}

// announce tells the waiter behind n, which became first in line, that
// it did: the node's data is written again, unchanged, which fires the
// watch that waiter keeps on it (a watch set by exists fires on a change
// of data too). The waiter then looks at the queue, finds itself next in
// line, and watches the owner, while this grant lasts; when it is
// released, the waiter's turn comes with the delete's event alone, no
// listing after it. In the background: a node deleted meanwhile, or a
// request that fails, costs only that.
func (s *Store) announce(n *node) {
	s.trips.Add(1)
	go func() { _, _ = s.sess.conn.Set(n.path, n.g.encode(), -1) }()
}

// observe sends an event whenever the first node of the lock's queue
// changes.
func (s *Store) observe(ctx context.Context, name string, out chan<- lease.Event) {
	defer close(out)
	dir := s.dirOf(name)
	last := ""
	for first := true; ; first = false {
		key, fired, err := s.armChildren(ctx, dir)
		if err != nil {
			if ctx.Err() == nil {
				send(out, name)
			}
			return
		}
		if !first && key != last {
			send(out, name)
		}
		last = key
		if fired == nil {
			continue // what to watch vanished in between
		}
		select {
		case ev, ok := <-fired:
			if !ok || ev.Type == zk.EventNotWatching {
				send(out, name)
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// armChildren watches dir's children, or dir's creation when it is
// missing, and returns the first node's name ("" for none).
func (s *Store) armChildren(ctx context.Context, dir string) (string, <-chan zk.Event, error) {
	var names []string
	var w <-chan zk.Event // set by do's goroutine: never touch it after a context error
	err := s.do(ctx, func() (err error) {
		names, _, w, err = s.sess.conn.ChildrenW(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		var ok bool
		err = s.do(ctx, func() (err error) {
			ok, _, w, err = s.sess.conn.ExistsW(dir)
			return err
		})
		if err != nil {
			return "", nil, err
		}
		if ok {
			w = nil // created in between: list it
		}
		return "", w, nil
	}
	if err != nil {
		return "", nil, err
	}
	low, _ := newQueue(dir, names).lowest()
	return low.name, w, nil
}
