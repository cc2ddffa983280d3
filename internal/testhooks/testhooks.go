// Package testhooks lets the tests of the integration module
// (github.com/simba-go/simba/integration, the tests that need a server)
// reach the few internals of the stores that a package's export_test.go
// would expose to its external tests: tests in another module do not see
// this module's _test.go files. Each store sets its hooks in an init
// function (its hooks.go); a store's own types appear as any, so that this
// package imports no store and no driver. Being internal, it is no API: no
// user of the library can import it.
package testhooks

import (
	"context"
	"time"
)

// redisstore's hooks (redisstore/hooks.go).
var (
	// RedisWithHealthCheck returns a redisstore.Option that sets how long a
	// subscription may stay silent before the reader pings it, so tests
	// need not wait 20 s for a black-holed subscription to break.
	RedisWithHealthCheck func(d time.Duration) any
	// RedisPinned returns a connection of c (a *redis.Client) that never
	// dials again once it broke (a *redis.Conn), and the function that
	// releases it.
	RedisPinned func(c any) (conn any, done func())
)

// sqlstore's hook (sqlstore/hooks.go): SQLMySQLWithoutReturning makes s,
// a MySQL *sqlstore.Store, run the form of acquire that MySQL takes (no
// RETURNING: the token in the reply's insert id, a read after a loss), so
// that the tests run it on MariaDB too.
var SQLMySQLWithoutReturning func(s any)

// sqlstore's hooks of the SQLite push path; s is a SQLite
// *sqlstore.Store.
var (
	// SQLLitePollEvery sets the longest interval between two looks of s's
	// poller at the file (20 ms otherwise); call it before s's first
	// Watch.
	SQLLitePollEvery func(s any, every time.Duration)
	// SQLLitePolls returns how many times s's poller has read PRAGMA
	// data_version (-1 when s has no poller).
	SQLLitePolls func(s any) int64
	// SQLBusyRetries returns how many SQLITE_BUSY errors s has retried.
	SQLBusyRetries func(s any) int64
)

// zkstore's hooks (zkstore/hooks.go); s is a *zkstore.Store.
var (
	// ZKTrips returns the number of requests s has sent.
	ZKTrips func(s any) int64
	// ZKLoseCreateReply creates contender's node as a create whose reply
	// was lost leaves it: on the server, unknown to s but for the doubt.
	ZKLoseCreateReply func(ctx context.Context, s any, mutex, contender string, ttl, transition time.Duration) error
	// ZKDir returns the znode of lock.
	ZKDir func(s any, mutex string) string
	// ZKEscape is the name encoding of a lock.
	ZKEscape func(name string) string
	// ZKParseChild returns the contender id a node name carries.
	ZKParseChild func(name string) (string, bool)
	// ZKOfflineSession returns a *zkstore.Session whose conn never reaches
	// a server, for tests of input checks (New does no I/O).
	ZKOfflineSession func() (any, error)
	// ZKSubscribed reports whether a Watch subscription of contender for
	// lock is live in s.
	ZKSubscribed func(s any, mutex, contender string) bool
	// ZKAfterQueueRead makes s call f (nil: nothing) each time an Acquire
	// of a contender whose node s knows has read the lock's queue.
	ZKAfterQueueRead func(s any, f func())
	// ZKCreateAdopt makes s call f (nil: none) each time the reply of a
	// create came, with adopt, the step that records the new node: f
	// calls it (or not) when it likes.
	ZKCreateAdopt func(s any, f func(adopt func()))
	// ZKHoldWatchdog keeps s's watchdog from looking at s's nodes (it
	// neither deletes nor forgets any) until release is called.
	ZKHoldWatchdog func(s any) (release func())
	// ZKHoldRetire keeps s from retrying the deletes of its dead nodes (a
	// release or drop whose delete failed) until release is called.
	ZKHoldRetire func(s any) (release func())
	// ZKBeforeRequest makes s call f (nil: none) in the goroutine of each
	// request bounded by a context, before the request may be sent: f
	// calls start, which reports whether the request goes out (its caller
	// had not given up yet), when it likes.
	ZKBeforeRequest func(s any, f func(start func() bool))
)
