package redisstore

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/simba-go/simba/lease"
)

// DefaultKeyPrefix is the prefix of every key and channel of a Store made
// without [WithKeyPrefix].
const DefaultKeyPrefix = "simba:"

// DefaultHandoff is the default hand-off window: how long a lock freed by
// a Release is held back for the longest live waiter.
const DefaultHandoff = time.Second

// DefaultRetention is the default of [WithRetention]: how long a lock's
// record, and with it its fencing counter, outlives its last use.
const DefaultRetention = 10 * time.Minute

// maxKeyPrefix bounds the key prefix, so keys stay short.
const maxKeyPrefix = 256

// An Option configures a Store made by [New]. Options validate their input:
// New returns the first option's error.
type Option func(*config) error

type config struct {
	prefix      string
	handoff     time.Duration
	waitN       int
	waitTimeout time.Duration
	logger      *slog.Logger
	noGuard     bool
	keep        time.Duration // retention of a record
	health      time.Duration // see healthCheck; shorter in tests
}

func defaultConfig() config {
	return config{prefix: DefaultKeyPrefix, handoff: DefaultHandoff, keep: DefaultRetention, health: healthCheck}
}

// WithRestartGuard turns the restart guard on (the default) or off. A
// Redis server that restarts, also from an RDB snapshot or an AOF, or
// whose data is flushed (FLUSHALL, FLUSHDB, SWAPDB), may have lost a
// grant whose holder still believes it holds the lock. With the guard, a
// lock whose record the server lost or restored is held back, as a
// hand-off is (Acquire reports an empty OwnerID and the time to wait, and
// queues the caller), until ttl + transition after the restart or the
// flush: every grant the server may have forgotten has run out by then,
// and its holder has been told. The guard assumes the lost holder used the
// requester's ttl and transition (or shorter ones). It costs no command on
// a lock whose record the server kept; see the package documentation for
// how restarts and flushes are told apart from new names. Turn it off only
// if Redis persists every write (AOF with appendfsync always) and nobody
// flushes it, or the delay after a restart is unacceptable.
func WithRestartGuard(on bool) Option {
	return func(c *config) error {
		c.noGuard = !on
		return nil
	}
}

// WithRetention sets how long a lock's record outlives its last use
// (default [DefaultRetention]): the one key a free lock leaves behind,
// which carries its fencing counter. A service that locks one name per
// order keeps about (names used per retention) records. After the record
// expires, the name's next token starts again at the server's time in µs
// (see the package documentation). Renewals are cheapest (one PEXPIRE)
// when d is at least 4 × (ttl + transition). d is 1 s to 30 days.
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second || d > 30*24*time.Hour {
			return fmt.Errorf("%w: redisstore: retention %v out of [1s, 720h]", lease.ErrInvalidArgument, d)
		}
		c.keep = d
		return nil
	}
}

// WithKeyPrefix puts every key and channel of the Store under prefix
// (default [DefaultKeyPrefix]), for example to share a Redis database with
// other applications or to keep the locks of two environments apart.
// Stores that must see the same locks need the same prefix. The prefix
// may be empty; it must not contain '{' or '}' (the Store puts its own hash
// tag after it) and is at most 256 bytes.
func WithKeyPrefix(prefix string) Option {
	return func(c *config) error {
		if strings.ContainsAny(prefix, "{}") || len(prefix) > maxKeyPrefix {
			return fmt.Errorf("%w: redisstore: key prefix %q (want at most %d bytes without '{' or '}')",
				lease.ErrInvalidArgument, prefix, maxKeyPrefix)
		}
		c.prefix = prefix
		return nil
	}
}

// WithHandoff sets the hand-off window (default [DefaultHandoff]): when a
// Release frees a lock that has live waiters, only the longest waiter may
// take it for d (at most its own ttl + transition); others are told to try
// again when the window ends. The waiter after it is woken when the window
// ends, unless the first one took the lock: a waiter that does not come
// in time (a crashed process) leaves the queue and the next one takes its
// turn. d = 0 disables the reservation: a Release then wakes the longest
// waiter, and the next one 100 ms later unless the first took the lock.
// Keep d well below ttl + transition; it is at most one minute.
func WithHandoff(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || d > time.Minute {
			return fmt.Errorf("%w: redisstore: hand-off window %v out of [0, 1m]", lease.ErrInvalidArgument, d)
		}
		c.handoff = d
		return nil
	}
}

// WithWaitReplicas makes every Acquire that grants or extends a grant,
// and every renewal, wait until n replicas have acknowledged it (Redis
// WAIT, at most timeout, one WAIT per server and renewal batch). When
// fewer do, the call fails with an error wrapping [ErrNotReplicated]: the
// outcome is unknown to the caller, which retries (a retried Acquire
// extends the same grant and waits again) or gives up, and a lease whose
// renewals go unacknowledged is lost at its deadline. A replica that
// acknowledged every grant and renewal a holder counted has each of them
// when it is promoted; see the package documentation for what this does
// and does not close. n is 1 to 100, timeout 1 ms to one minute, and must
// stay below the client's ReadTimeout (WAIT is read with it). It needs a
// *redis.Client (standalone or Sentinel) or a *redis.ClusterClient.
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(c *config) error {
		if n < 1 || n > 100 || timeout < time.Millisecond || timeout > time.Minute {
			return fmt.Errorf("%w: redisstore: wait for %d replicas for %v (want 1 to 100 replicas, 1ms to 1m)",
				lease.ErrInvalidArgument, n, timeout)
		}
		c.waitN, c.waitTimeout = n, timeout
		return nil
	}
}

// WithLogger makes the Store log what it otherwise only recovers from: a
// broken subscription connection, an unreadable notification. nil (the
// default) discards these records.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}
