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
// keeps its locks.
const DefaultRoot = "/simba"

// Store is a [lease.Store], [lease.Watcher] and [lease.BatchRenewer] on
// ZooKeeper. It is safe for concurrent use; make one per Session and
// share it.
type Store struct {
	sess *Session
	root string
	acl  []zk.ACL

	mu   sync.Mutex
	keys map[nodeKey]*keyState
	dog  dogState
	// brief holds the lock znodes whose last grant by this Store ended
	// before any renewal, guarded by mu: the next Acquire of such a lock
	// leaves its queue unwatched (see watchQueueNow).
	brief map[string]struct{}
	// retiring holds the paths of the nodes this Store is deleting in the
	// background (retireLater), guarded by mu: an Acquire never adopts one.
	retiring map[string]struct{}

	trips atomic.Int64 // requests sent, for tests and benchmarks

	afterQueueRead func()                                  // a test's (hooks.go), guarded by mu
	adoptHook      func(adopt func())                      // a test's (hooks.go), guarded by mu
	retireGate     chan struct{}                           // a test's (hooks.go): retires wait until it closes; guarded by mu
	beforeRequest  atomic.Pointer[func(start func() bool)] // a test's (hooks.go): do's goroutine calls it instead of start
}

// nodeKey names one contender's interest in one lock.
type nodeKey struct{ mutex, contender string }

// keyState is what the Store knows of one contender's interest in one
// lock. It is dropped when it holds nothing.
type keyState struct {
	n     *node // the contender's node; nil: none known
	doubt bool  // a create of unknown outcome may have left a node
	// creating counts this contender's creates of this lock that may still
	// be sent or answered (see creating); settled is closed (and dropped)
	// when it falls to 0, nil when nobody waits for that.
	creating int
	settled  chan struct{}
	subs     int           // live Watch subscriptions
	kick     chan struct{} // closed (and dropped) when n changes; nil: none asked for (see snapshot)
}

// node is a contender's node of this Store's session.
type node struct {
	path    string
	session int64
	czxid   int64
	g       grant     // as written in the node
	held    bool      // an Acquire granted it, and its holder was told
	lowest  bool      // it was seen first in line: it owns the lock
	dead    bool      // this Store is deleting it: it is no grant any more
	due     time.Time // the watchdog deletes it unless a call comes first
	ttlEnd  time.Time // of a held node: the end of the ttl last given
	told    bool      // a subscription was told that its turn came

	// Of a node first in line: a watch on the queue, set by the listing
	// that found it first. When it fires, the next renewal lists the
	// queue again, to notice a node deleted behind the Store's back; with
	// none, the first renewal lists and watches it.
	queueWatch <-chan zk.Event
	queueStale bool
	renewed    bool // a Renew came for its grant

	// Of a waiting node, from the last look at the queue:
	looked bool            // an Acquire (or a subscription) looked since it was made
	pred   string          // name of the node just ahead
	watch  <-chan zk.Event // armed watch on pred; nil: none
	fired  bool            // the watch fired
	owner  owner           // the lowest node
}

// owner is the lowest node of a queue as a waiter read it.
type owner struct {
	name      string
	contender string
	czxid     int64
	g         grant
}

// An Option configures a Store made by [New]. Options validate their input:
// New returns the first option's error.
type Option func(*config) error

// config is what the options set and [New] reads.
type config struct {
	root string
	acl  []zk.ACL
}

// WithRoot keeps the locks under the znode root (default [DefaultRoot]),
// an absolute, clean path outside /zookeeper. Missing parents are created
// as persistent nodes with the Store's ACL. Stores that must see the same
// locks need the same root.
func WithRoot(root string) Option {
	return func(c *config) error {
		if err := validRoot(root); err != nil {
			return fmt.Errorf("%w: zkstore: %v", lease.ErrInvalidArgument, err)
		}
		c.root = root
		return nil
	}
}

// WithACL sets the ACL of every node the Store creates (default
// zk.WorldACL(zk.PermAll)). The conn's credentials must allow it to read,
// create, write and delete under the root with this ACL.
func WithACL(acl ...zk.ACL) Option {
	return func(c *config) error {
		if len(acl) == 0 {
			return fmt.Errorf("%w: zkstore: empty ACL", lease.ErrInvalidArgument)
		}
		for _, a := range acl {
			if a.Scheme == "" || a.Perms == 0 || a.Perms&^zk.PermAll != 0 {
				return fmt.Errorf("%w: zkstore: ACL entry %+v (want a scheme and permissions within zk.PermAll)",
					lease.ErrInvalidArgument, a)
			}
		}
		c.acl = append([]zk.ACL(nil), acl...)
		return nil
	}
}

// New returns a Store on sess, which the caller owns and closes (after the
// Managers on the Store). Only a Session made by [Connect] will do: the
// Store needs the session timeout the server granted and the heartbeats
// it answered, which a bare *zk.Conn does not tell.
//
// New does no I/O; the root is created on first use.
func New(sess *Session, opts ...Option) (*Store, error) {
	if sess == nil || sess.conn == nil || sess.tap == nil {
		return nil, fmt.Errorf("%w: zkstore: nil Session (make one with zkstore.Connect)", lease.ErrInvalidArgument)
	}
	c := config{root: DefaultRoot, acl: zk.WorldACL(zk.PermAll)}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: zkstore: nil Option", lease.ErrInvalidArgument)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	return &Store{sess: sess, root: c.root, acl: c.acl, keys: map[nodeKey]*keyState{}, brief: map[string]struct{}{}}, nil
}

// MaxGrant returns the longest ttl + transition the Store honours now: the
// session timeout the server granted. Longer timings are cut to it, since
// a holder cut off from ZooKeeper loses its node when its session
// expires, whatever its ttl. It is 0 while the conn has no session.
func (s *Store) MaxGrant() time.Duration { return s.sess.Timeout() }

// LeaseOptions returns the Manager timings that fit the session timeout
// the server granted: ttl + transition = [Store.MaxGrant], split 5:3 as
// the lease defaults are (10 s and 6 s). A holder that hangs and one that
// is cut off or dead are then taken over after about the same time.
//
//	m, err := lease.NewManager(store, store.LeaseOptions()...)
func (s *Store) LeaseOptions() []lease.Option {
	session := s.MaxGrant()
	ttl := session * 5 / 8
	return []lease.Option{lease.WithTTL(ttl), lease.WithTransition(session - ttl)}
}

// Root returns the znode under which the Store keeps its locks.
func (s *Store) Root() string { return s.root }

// Session returns the Session the Store runs on.
func (s *Store) Session() *Session { return s.sess }
