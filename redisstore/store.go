package redisstore

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
)

// Errors of the Store besides those of package lease. Each is wrapped with
// the operation and the lock name.
var (
	// ErrNotReplicated: an Acquire granted or extended the lock, or a
	// renewal extended a grant, on the primary, but fewer replicas than
	// [WithWaitReplicas] asked for acknowledged it in time. The outcome is
	// unknown to the caller.
	ErrNotReplicated = errors.New("redisstore: not acknowledged by enough replicas")
	// ErrUnexpectedReply: Redis answered a script with something the Store
	// did not write (a foreign value under its keys, or an old script).
	// The outcome is unknown.
	ErrUnexpectedReply = errors.New("redisstore: unexpected reply")
	// ErrClosed: Watch was called after [Store.Close].
	ErrClosed = errors.New("redisstore: store closed")
	// ErrNoPush: Watch on a client other than *redis.Client and
	// *redis.ClusterClient, for which the Store has no subscription. The
	// waiters of package lease then poll.
	ErrNoPush = errors.New("redisstore: no pub/sub for this client type")
)

// Compile-time checks that Store keeps the port and both capabilities.
var (
	_ lease.Store        = (*Store)(nil)
	_ lease.Watcher      = (*Store)(nil)
	_ lease.BatchRenewer = (*Store)(nil)
)

// Store is a [lease.Store] on Redis. Make one with [New]. All methods are
// safe for concurrent use. Call [Store.Close] when done with it to end its
// subscriptions; the client stays open.
type Store struct {
	c        redis.UniversalClient
	cluster  *redis.ClusterClient // non-nil on Redis Cluster
	single   *redis.Client        // non-nil on standalone or Sentinel
	ring     *redis.Ring          // non-nil on a Ring
	cfg      config
	pubCmd   string // PUBLISH, or SPUBLISH on Redis Cluster
	epoch    string // the epoch key outside Redis Cluster
	epochArg any    // epoch, boxed once
	consts   string // the constants of the acquire and release scripts
	release  script // the release script, with consts
	// Contender ids and durations (ms) of the scripts' calls, boxed once
	// per value (an interface of a string, or of an int64 above 255,
	// allocates).
	contenders boxes[string]
	durations  boxes[int64]
	log        *slog.Logger
	hub        *hub
	nodes      nodes      // the acquire script of each server's life
	grants     grants     // the Store's own live grants, for cheap renewals
	q          *coalescer // nil on Redis Cluster, a Ring and with WithWaitReplicas
}

// New returns a Store on client: a *redis.Client (standalone, or Sentinel
// through redis.NewFailoverClient), a *redis.ClusterClient, or a
// *redis.Ring (without push notifications). The Store never closes or
// reconfigures the client; size its pool for the Managers that share it.
// Redis 7 or later is needed on Redis Cluster (sharded pub/sub); 6.2 or
// later elsewhere (see the package documentation for what holds on 6.2).
//
// A nil client, another client type or an invalid option gives an error
// wrapping [lease.ErrInvalidArgument].
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: redisstore: nil client", lease.ErrInvalidArgument)
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Store{c: client, cfg: cfg, pubCmd: "PUBLISH", epoch: cfg.prefix + "{~}:epoch", log: cfg.logger}
	switch c := client.(type) {
	case *redis.ClusterClient:
		s.cluster, s.pubCmd = c, "SPUBLISH"
	case *redis.Client:
		s.single = c
		if cfg.waitN == 0 {
			s.q = &coalescer{c: c}
		}
	case *redis.Ring:
		if cfg.waitN > 0 {
			return nil, fmt.Errorf("%w: redisstore: WithWaitReplicas needs a *redis.Client or *redis.ClusterClient, not %T",
				lease.ErrInvalidArgument, client)
		}
		s.ring = c
	default:
		return nil, fmt.Errorf("%w: redisstore: a *redis.Client, *redis.ClusterClient or *redis.Ring, not %T",
			lease.ErrInvalidArgument, client)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.epochArg, s.consts = s.epoch, consts(cfg, s.pubCmd)
	s.release = newScript(s.consts + releaseFastLua + libLua + releaseLua)
	s.hub = newHub(s)
	return s, nil
}

// isNil reports whether c is nil or a typed nil pointer of a known client.
func isNil(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// Close ends every Watch channel and subscription of the Store and waits
// for its goroutines to stop. The other methods keep working; Watch then
// fails with [ErrClosed]. Close never closes the client. It is idempotent
// and always returns nil.
func (s *Store) Close() error {
	s.hub.close()
	return nil
}
