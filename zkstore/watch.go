package zkstore

import (
	"context"
	"errors"
	"path"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// Watch implements [lease.Watcher] with ZooKeeper watches.
//
// A waiting contender watches only the node just ahead of its own (no herd:
// one release wakes one waiter) and is sent an event when the lowest node
// changes, that is when its turn may have come. An observer (contender "")
// and a contender without a node watch the mutex's children and are sent
// an event whenever the lowest node changes. Events carry only the mutex
// name: the caller reads the owner with Get.
//
// The channel is closed when ctx ends, when a request fails, or when the
// session's watches are dropped (session expired, conn closed); the
// caller then polls. Watches survive a reconnection within the session.
func (s *Store) Watch(ctx context.Context, mutex, contender string) (<-chan lease.Event, error) {
	if err := lease.ValidateName(mutex); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, errors.New("zkstore: watch: nil context")
	}
	out := make(chan lease.Event, 1)
	go s.watch(ctx, mutex, contender, out)
	return out, nil
}

func (s *Store) watch(ctx context.Context, mutex, contender string, out chan<- lease.Event) {
	defer close(out)
	dir := s.dirOf(mutex)
	last, first := "", true
	for {
		low, fired, err := s.arm(ctx, dir, contender)
		if err != nil {
			return
		}
		if !first && low != last {
			select {
			case out <- lease.Event{Mutex: mutex}:
			default: // one pending event says enough
			}
		}
		last, first = low, false
		if fired == nil {
			continue // what we meant to watch is gone already: look again
		}
		select {
		case ev := <-fired:
			if ev.Type == zk.EventNotWatching {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// arm sets one ZooKeeper watch for the watcher and returns the lowest node
// as seen when it was set, and the watch's channel (nil when the node to
// watch vanished in between).
func (s *Store) arm(ctx context.Context, dir, contender string) (string, <-chan zk.Event, error) {
	if contender != "" {
		q, err := s.list(ctx, dir)
		if err != nil {
			return "", nil, err
		}
		low, _ := q.lowest()
		if mine := q.mine(contender); len(mine) > 0 {
			if p, ok := q.predecessor(mine[0].name); ok {
				var ok bool
				var ch <-chan zk.Event
				err := s.do(ctx, func() (err error) {
					ok, _, ch, err = s.conn.ExistsW(q.path(p))
					return err
				})
				if err != nil {
					return "", nil, err
				}
				if !ok {
					return low.name, nil, nil
				}
				return low.name, ch, nil
			}
		}
	}
	var names []string
	var st *zk.Stat
	var ch <-chan zk.Event
	err := s.do(ctx, func() (err error) {
		names, st, ch, err = s.conn.ChildrenW(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		var ok bool
		err = s.do(ctx, func() (err error) {
			ok, _, ch, err = s.conn.ExistsW(dir)
			return err
		})
		if err == nil && ok {
			return "", nil, nil // created in between
		}
		return "", ch, err
	}
	if err != nil {
		return "", nil, err
	}
	low, _ := newQueue(dir, st, names).lowest()
	return path.Base(low.name), ch, nil
}
