package zkstore

import (
	"context"
	"errors"
	"sort"

	"github.com/go-zookeeper/zk"
)

// do runs f, one blocking go-zookeeper request, bounded by ctx.
// go-zookeeper takes no context: when ctx ends first, do returns ctx's
// error at once, and f finishes in its own goroutine when the conn answers
// or fails the request (within about the session timeout on a live conn,
// or at once when the conn is closed). f must only write variables the
// caller reads after a nil or non-context error.
func (s *Store) do(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.trips.Add(1)
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// queue is a mutex's nodes in sequence order, as one listing saw them.
type queue struct {
	dir      string
	exists   bool  // the mutex's znode exists
	dirMtime int64 // last time a node left the queue through this package
	kids     []child
}

// sync makes the server this Store is connected to catch up with the
// leader, so that the next read sees every write completed before: reads
// in ZooKeeper may lag behind other clients' writes, never behind the
// Store's own.
func (s *Store) sync(ctx context.Context, dir string) error {
	err := s.do(ctx, func() error {
		_, err := s.conn.Sync(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// list reads the queue of dir. A missing dir is an empty queue.
func (s *Store) list(ctx context.Context, dir string) (queue, error) {
	var names []string
	var st *zk.Stat
	err := s.do(ctx, func() (err error) {
		names, st, err = s.conn.Children(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return queue{dir: dir}, nil
	}
	if err != nil {
		return queue{}, err
	}
	return newQueue(dir, st, names), nil
}

func newQueue(dir string, st *zk.Stat, names []string) queue {
	q := queue{dir: dir, exists: true, dirMtime: st.Mtime}
	for _, n := range names {
		if c, ok := parseChild(n); ok {
			q.kids = append(q.kids, c)
		}
	}
	sort.Slice(q.kids, func(i, j int) bool { return q.kids[i].seq < q.kids[j].seq })
	return q
}

func (q queue) path(c child) string { return q.dir + "/" + c.name }

// lowest returns the node that owns the mutex, or is next to claim it.
func (q queue) lowest() (child, bool) {
	if len(q.kids) == 0 {
		return child{}, false
	}
	return q.kids[0], true
}

// mine returns contender's nodes, lowest first.
func (q queue) mine(contender string) []child {
	var out []child
	for _, c := range q.kids {
		if c.contender == contender {
			out = append(out, c)
		}
	}
	return out
}

// has reports whether the node name is in the queue.
func (q queue) has(name string) bool {
	for _, c := range q.kids {
		if c.name == name {
			return true
		}
	}
	return false
}

// predecessor returns the node just ahead of name.
func (q queue) predecessor(name string) (child, bool) {
	for i, c := range q.kids {
		if c.name == name && i > 0 {
			return q.kids[i-1], true
		}
	}
	return child{}, false
}

// read returns the grant and stat of the node at p.
func (s *Store) read(ctx context.Context, p string) (grant, *zk.Stat, error) {
	var data []byte
	var st *zk.Stat
	if err := s.do(ctx, func() (err error) {
		data, st, err = s.conn.Get(p)
		return err
	}); err != nil {
		return grant{}, nil, err
	}
	g, err := decodeGrant(data)
	return g, st, err
}

// write sets the data of the node at p if its version is still version.
func (s *Store) write(ctx context.Context, p string, g grant, version int32) (*zk.Stat, error) {
	var st *zk.Stat
	err := s.do(ctx, func() (err error) {
		st, err = s.conn.Set(p, g.encode(), version)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.clock.observe(st.Mtime)
	return st, nil
}

// remove deletes the node at p (if its version is still version; -1: any)
// and, in the same transaction, stamps the mutex's znode with the time, so
// that the node next in line has a full hand-off window from now on.
func (s *Store) remove(ctx context.Context, dir, p string, version int32) error {
	return s.do(ctx, func() error {
		res, err := s.conn.Multi(&zk.DeleteRequest{Path: p, Version: version}, &zk.SetDataRequest{Path: dir, Version: -1})
		for _, r := range res {
			if gone(r.Error) {
				return r.Error
			}
		}
		if err == nil && len(res) == 2 && res[1].Stat != nil {
			s.clock.observe(res[1].Stat.Mtime)
		}
		return err
	})
}

// gone reports errors after which a node is not (or no longer) what the
// caller expected: deleted, or changed by someone else.
func gone(err error) bool {
	return errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion)
}
