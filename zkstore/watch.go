package zkstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// Watch implements [lease.Watcher] with ZooKeeper watches.
//
// A queued contender watches only the node just ahead of its own, and is
// sent an event when its own node becomes the lowest, that is when its
// turn has come: a release wakes the next waiter only, never the herd.
// (A rewrite of the node ahead, a renewal or a poll, costs the watcher one
// request to watch it again, and sends no event.) An observer (contender
// "") and a contender without a node watch the mutex's children and are
// sent an event whenever the lowest node changes. Events carry only the
// mutex name: the caller reads the owner with Get or Acquire.
//
// The channel is closed when ctx ends, when a request fails, or when the
// session's watches are dropped (session expired, conn closed); the caller
// then polls. Watches survive a reconnection within the session. A watch
// set on a node that vanished before the event came stays registered in
// the conn until the session ends (a few bytes).
func (s *Store) Watch(ctx context.Context, mutex, contender string) (<-chan lease.Event, error) {
	if err := lease.ValidateName(mutex); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: zkstore: watch: nil context", lease.ErrInvalidArgument)
	}
	out := make(chan lease.Event, 1)
	go s.watch(ctx, mutex, contender, out)
	return out, nil
}

// Keys of what a watcher sees: an event is sent when the key changes to
// one that is not queued.
const (
	keyQueued = "queued"
	keyTurn   = "turn:"
	keyLowest = "lowest:"
)

func (s *Store) watch(ctx context.Context, mutex, contender string, out chan<- lease.Event) {
	defer close(out)
	dir := s.dirOf(mutex)
	last := ""
	for first := true; ; first = false {
		key, fired, ahead, err := s.arm(ctx, dir, contender)
		if err != nil {
			return
		}
		if !first && key != last && key != keyQueued {
			select {
			case out <- lease.Event{Mutex: mutex}:
			default: // one pending event says enough
			}
		}
		last = key
		for fired != nil {
			select {
			case ev := <-fired:
				switch {
				case ev.Type == zk.EventNotWatching:
					return
				case ev.Type == zk.EventNodeDataChanged && ahead != "":
					// The node ahead was rewritten, not removed.
					if fired, err = s.existsW(ctx, ahead); err != nil {
						return
					}
				default:
					fired = nil // look again
				}
			case <-ctx.Done():
				return
			}
		}
	}
}

// arm sets one ZooKeeper watch for the watcher. It returns what the
// watcher sees, the watch's channel (nil when the node to watch vanished
// in between: look again) and, for a queued contender, the node ahead.
func (s *Store) arm(ctx context.Context, dir, contender string) (key string, fired <-chan zk.Event, ahead string, err error) {
	if contender != "" {
		q, err := s.list(ctx, dir)
		if err != nil {
			return "", nil, "", err
		}
		if mine := q.mine(contender); len(mine) > 0 {
			if p, ok := q.predecessor(mine[0].name); ok {
				fired, err := s.existsW(ctx, q.path(p))
				return keyQueued, fired, q.path(p), err
			}
			key = keyTurn + mine[0].name // watch the children: our node may go and come back
		}
	}
	var names []string
	var st *zk.Stat
	var w <-chan zk.Event // set by do's goroutine: never touch it after a context error
	err = s.do(ctx, func() (err error) {
		names, st, w, err = s.conn.ChildrenW(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		fired, err = s.existsW(ctx, dir)
		return keyLowest, fired, "", err
	}
	if err != nil {
		return "", nil, "", err
	}
	q := newQueue(dir, st, names)
	if contender != "" && key == "" && len(q.mine(contender)) > 0 {
		// Our node came between the two requests: watch the node ahead
		// instead, or this watch would fire on every arrival and leave.
		return keyQueued, nil, "", nil
	}
	if !strings.HasPrefix(key, keyTurn) {
		low, _ := q.lowest()
		key = keyLowest + low.name
	}
	return key, w, "", nil
}

// existsW watches the node at p; nil when it does not exist (the watch
// would only fire on its creation).
func (s *Store) existsW(ctx context.Context, p string) (<-chan zk.Event, error) {
	var ok bool
	var fired <-chan zk.Event
	err := s.do(ctx, func() (err error) {
		ok, _, fired, err = s.conn.ExistsW(p)
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	return fired, nil
}
