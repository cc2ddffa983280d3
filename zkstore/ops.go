package zkstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// do runs f, one blocking go-zookeeper request, bounded by ctx.
// go-zookeeper takes no context: when ctx ends first, do returns ctx's
// error at once, and f finishes in its own goroutine when the conn answers
// or fails the request (within about the session timeout on a live conn,
// or at once when the conn is closed). f must only write variables the
// caller reads after a nil or non-context error. A ctx that cannot end
// (context.WithoutCancel) runs f in the caller's goroutine.
//
// f never starts after do returned: when ctx ends before f's goroutine
// ran (a loaded machine runs it late), f is not run at all. A request
// sent after its caller gave up would land behind later requests of the
// same key, a create among them: a node nobody waits for, listed after
// the listings that were to find it (the TCK's OddNames saw one as the
// owner of a lock its holder had just released).
func (s *Store) do(ctx context.Context, f func() error) error {
	return s.doThen(ctx, f, nil)
}

// doThen is do, calling then (unless nil) once f has returned or once it
// is sure that f never runs, whichever way do itself returned.
func (s *Store) doThen(ctx context.Context, f func() error, then func()) error {
	if err := ctx.Err(); err != nil {
		if then != nil {
			then()
		}
		return err
	}
	s.trips.Add(1)
	if ctx.Done() == nil {
		if then != nil {
			defer then()
		}
		return f()
	}
	// One allocation carries what the caller and f's goroutine share (and
	// the goroutine's closure and done another each): every request of a
	// cancellable call comes here.
	r := &request{f: f, then: then, done: make(chan struct{})}
	go r.run(s.beforeRequest.Load())
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		if r.gate.CompareAndSwap(reqWaiting, reqAbandoned) {
			r.finish() // f never runs
		}
		return context.Cause(ctx)
	}
}

// The states of a request's gate: f runs only if its goroutine moves the
// gate from waiting to running before the caller, giving up, moves it to
// abandoned.
const (
	reqWaiting = iota
	reqRunning
	reqAbandoned
)

// request is one call of f by doThen in a goroutine of its own.
type request struct {
	f    func() error
	then func()
	gate atomic.Int32
	err  error         // f's, written before done is closed
	done chan struct{} // closed once f returned (never when it did not run)
}

// run is the request's goroutine: hook, a test's (see hooks.go), decides
// when it starts, or nil.
func (r *request) run(hook *func(start func() bool)) {
	if hook != nil {
		(*hook)(r.start)
	} else {
		r.start()
	}
	if r.gate.Load() != reqRunning {
		return // the caller gave up first, and called then
	}
	defer r.finish()
	r.err = r.f()
	close(r.done)
}

// start moves the gate to running, unless the caller gave up first.
func (r *request) start() bool { return r.gate.CompareAndSwap(reqWaiting, reqRunning) }

// finish calls then, if any.
func (r *request) finish() {
	if r.then != nil {
		r.then()
	}
}

// queue is a lock's nodes in sequence order, as one listing saw them.
type queue struct {
	dir  string
	kids []child
}

// sync makes the server this Store is connected to catch up with the
// leader, so that the next read sees every write completed before: reads
// in ZooKeeper may lag behind other clients' writes, never behind the
// Store's own.
func (s *Store) sync(ctx context.Context, dir string) error {
	err := s.do(ctx, func() error {
		_, err := s.sess.conn.Sync(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// list reads the queue of dir. A missing dir is an empty queue.
func (s *Store) list(ctx context.Context, dir string) (queue, error) {
	q, _, err := s.listW(ctx, dir, false)
	return q, err
}

// listW reads the queue of dir and, with watch set, watches its children
// (in the same request; nil when dir is missing).
func (s *Store) listW(ctx context.Context, dir string, watch bool) (queue, <-chan zk.Event, error) {
	var names []string
	var w <-chan zk.Event // set by do's goroutine: never touch it after a context error
	err := s.do(ctx, func() (err error) {
		if watch {
			names, _, w, err = s.sess.conn.ChildrenW(dir)
		} else {
			names, _, err = s.sess.conn.Children(dir)
		}
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return queue{dir: dir}, nil, nil
	}
	if err != nil {
		return queue{}, nil, err
	}
	return newQueue(dir, names), w, nil
}

func newQueue(dir string, names []string) queue {
	q := queue{dir: dir, kids: make([]child, 0, len(names))}
	for _, n := range names {
		if c, ok := parseChild(n); ok {
			q.kids = append(q.kids, c)
		}
	}
	slices.SortFunc(q.kids, func(a, b child) int { return cmp.Compare(a.seq, b.seq) })
	return q
}

func (q queue) path(c child) string { return q.dir + "/" + c.name }

// lowest returns the node that owns the lock.
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
		data, st, err = s.sess.conn.Get(p)
		return err
	}); err != nil {
		return grant{}, nil, err
	}
	g, err := decodeGrant(data)
	return g, st, err
}

// readOwner reads the owner's node at p, and with watch set watches it
// (one request either way). A node whose data this package cannot read
// still names its contender and token.
func (s *Store) readOwner(ctx context.Context, p string, watch bool) (owner, <-chan zk.Event, error) {
	var data []byte
	var st *zk.Stat
	var w <-chan zk.Event // set by do's goroutine: never touch it after a context error
	err := s.do(ctx, func() (err error) {
		if watch {
			data, st, w, err = s.sess.conn.GetW(p)
		} else {
			data, st, err = s.sess.conn.Get(p)
		}
		return err
	})
	if err != nil {
		return owner{}, nil, err
	}
	c, _ := parseChild(path.Base(p))
	o := owner{name: c.name, contender: c.contender, czxid: st.Czxid}
	if g, err := decodeGrant(data); err == nil {
		o.g = g
	}
	return o, w, nil
}

// existsW watches the node at p; nil when it does not exist (the watch
// would only fire on its creation).
func (s *Store) existsW(ctx context.Context, p string) (<-chan zk.Event, error) {
	var ok bool
	var fired <-chan zk.Event
	err := s.do(ctx, func() (err error) {
		ok, _, fired, err = s.sess.conn.ExistsW(p)
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	return fired, nil
}

// remove deletes the node at p, whatever its version: the Store that
// owns a node rewrites its data when it comes first in line (announce),
// and what decides a delete (the node's token, its session) never
// changes.
func (s *Store) remove(ctx context.Context, p string) error {
	return s.do(ctx, func() error { return s.sess.conn.Delete(p, -1) })
}

// drop ends k's node n: from now on it is no grant, and it is deleted
// (by the watchdog, should this call fail).
func (s *Store) drop(ctx context.Context, k nodeKey, n *node) error {
	s.kill(k, n.path)
	err := s.remove(ctx, n.path)
	if err == nil || gone(err) {
		s.forget(k, n.path)
		return nil
	}
	s.retireLater(k, *n)
	return err
}

// gone reports errors after which a node is not (or no longer) what the
// caller expected: deleted, or changed by someone else.
func gone(err error) bool {
	return errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion)
}

// checkCall validates the arguments every call shares.
func checkCall(name, contender string, ttl, transition time.Duration) error {
	if err := lease.ValidateName(name); err != nil {
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
