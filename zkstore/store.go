package zkstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/lease"
)

// DefaultRoot is the znode under which a Store made without [WithRoot]
// keeps its mutexes.
const DefaultRoot = "/simba"

// Store is a [lease.Store] and [lease.Watcher] on ZooKeeper. It is safe for
// concurrent use; make one per *zk.Conn and share it.
type Store struct {
	conn    *zk.Conn
	session time.Duration
	root    string
	acl     []zk.ACL

	mu    sync.Mutex
	nodes map[nodeKey]*ownNode // nodes this Store created or adopted
	doubt map[nodeKey]bool     // a create whose reply was lost may have left a node

	clock serverClock
	trips atomic.Int64 // round trips sent, for tests and benchmarks
}

// nodeKey names one contender's interest in one mutex.
type nodeKey struct{ mutex, contender string }

// ownNode is what a Store knows of a node of its own session: the state
// after its last write or read.
type ownNode struct {
	path    string
	session int64
	czxid   int64
	version int32
	mtime   int64 // server time of the write that made version, in ms
	g       grant
}

// An Option configures a Store made by [New].
type Option func(*Store) error

// WithRoot keeps the mutexes under the znode root (default [DefaultRoot]),
// an absolute, clean path outside /zookeeper. Missing parents are created
// as persistent nodes with the Store's ACL. Stores that must see the same
// mutexes need the same root.
func WithRoot(root string) Option {
	return func(s *Store) error {
		if err := validRoot(root); err != nil {
			return fmt.Errorf("%w: zkstore: %v", lease.ErrInvalidArgument, err)
		}
		s.root = root
		return nil
	}
}

// WithACL sets the ACL of every node the Store creates (default
// zk.WorldACL(zk.PermAll)). The conn's credentials must allow it to read,
// create, write and delete under the root with this ACL.
func WithACL(acl ...zk.ACL) Option {
	return func(s *Store) error {
		if len(acl) == 0 {
			return fmt.Errorf("%w: zkstore: empty ACL", lease.ErrInvalidArgument)
		}
		for _, a := range acl {
			if a.Scheme == "" || a.Perms == 0 || a.Perms&^zk.PermAll != 0 {
				return fmt.Errorf("%w: zkstore: ACL entry %+v (want a scheme and permissions within zk.PermAll)",
					lease.ErrInvalidArgument, a)
			}
		}
		s.acl = append([]zk.ACL(nil), acl...)
		return nil
	}
}

// New returns a Store over conn, which the caller owns and closes (the Store
// never closes or reconfigures it). sessionTimeout is the session timeout
// conn negotiated: the one given to zk.Connect, unless the server clamped
// it into its [minSessionTimeout, maxSessionTimeout] (by default 2 to 20
// ticks). The Store never reports a holder more time than that, so a holder
// cut off from ZooKeeper is told of its loss before its session, and with
// it its node, can expire. Give the smaller value when unsure.
//
// New does no I/O; the root is created on first use.
func New(conn *zk.Conn, sessionTimeout time.Duration, opts ...Option) (*Store, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: zkstore: nil *zk.Conn", lease.ErrInvalidArgument)
	}
	if sessionTimeout < time.Millisecond {
		return nil, fmt.Errorf("%w: zkstore: session timeout %v (want at least 1ms)", lease.ErrInvalidArgument, sessionTimeout)
	}
	s := &Store{
		conn: conn, session: sessionTimeout, root: DefaultRoot, acl: zk.WorldACL(zk.PermAll),
		nodes: map[nodeKey]*ownNode{}, doubt: map[nodeKey]bool{},
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: zkstore: nil Option", lease.ErrInvalidArgument)
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// LeaseOptions returns the Manager timings that fit the session timeout:
// ttl + transition = sessionTimeout, split 5:3 as the lease defaults are
// (10 s and 6 s). A holder then loses its grant exactly when its session
// would expire, renews about every ttl/3, and a crashed holder's node is
// gone (session expiry) by the time a waiter could take over anyway.
//
//	m, err := lease.NewManager(store, store.LeaseOptions()...)
//
// Longer timings are clamped to the session timeout (safe, but renewals
// then come faster than ttl/3); shorter ones only make takeover faster
// than session expiry for a holder that hangs while its process lives.
func (s *Store) LeaseOptions() []lease.Option {
	ttl := s.session * 5 / 8
	return []lease.Option{lease.WithTTL(ttl), lease.WithTransition(s.session - ttl)}
}

// Root returns the znode under which the Store keeps its mutexes.
func (s *Store) Root() string { return s.root }

// held returns the record of a grant this Store's contender holds:
// what it asked for, but never more than the session timeout.
func (s *Store) held(contender string, czxid int64, ttl, transition time.Duration) lease.Record {
	tr := min(ttl+transition, s.session)
	return lease.Record{Owner: contender, Token: uint64(czxid), TTL: min(ttl, tr), Transition: tr}
}

func (s *Store) cached(k nodeKey) *ownNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[k]
	if n == nil || n.session != s.conn.SessionID() {
		delete(s.nodes, k) // a node of an expired session is gone with it
		return nil
	}
	c := *n
	return &c
}

func (s *Store) remember(k nodeKey, n *ownNode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *n
	s.nodes[k] = &c
	delete(s.doubt, k)
}

func (s *Store) forget(k nodeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, k)
}

func (s *Store) setDoubt(k nodeKey, v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v {
		s.doubt[k] = true
	} else {
		delete(s.doubt, k)
	}
}

func (s *Store) inDoubt(k nodeKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doubt[k]
}

// serverClock estimates ZooKeeper's clock from the mtime of the Store's
// last write and the local monotonic time since.
type serverClock struct {
	mu    sync.Mutex
	ms    int64
	local time.Time
}

func (c *serverClock) observe(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ms > c.ms {
		c.ms, c.local = ms, time.Now()
	}
}

// now returns the estimate, or false before any write.
func (c *serverClock) now() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ms == 0 {
		return 0, false
	}
	return c.ms + time.Since(c.local).Milliseconds(), true
}
