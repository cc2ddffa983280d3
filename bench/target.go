// Package bench measures simba-go beside the Go lock libraries people use
// today, on the same servers in the same run (make bench). It is a module of
// its own so that the peer libraries never enter the library's go.mod.
package bench

import (
	"context"
	"time"
)

// Servers says where the servers of one run listen. An empty field means the
// server is not part of the run. It is passed to holder processes (scenario
// f) as JSON in the environment.
type Servers struct {
	Redis      string `json:"redis,omitempty"`        // host:port
	Postgres   string `json:"postgres,omitempty"`     // pgx DSN
	MySQL      string `json:"mysql,omitempty"`        // go-sql-driver DSN
	SQLite     string `json:"sqlite,omitempty"`       // database file path
	ZooKeeper  string `json:"zookeeper,omitempty"`    // host:port
	Etcd       string `json:"etcd,omitempty"`         // host:port (client URL without scheme)
	KeyPrefix  string `json:"key_prefix,omitempty"`   // prefix for every key, znode and row of this run
	ZKSessionS int    `json:"zk_session_s,omitempty"` // ZooKeeper session timeout, seconds
}

// A Target is one lock library on one server, set up the way its
// documentation suggests, with the settings stated in Settings.
type Target struct {
	Lib      string // "simba", "redsync", "redislock", "pglock", "go-mysql-lock", "advisory lock", "zk lock recipe", "etcd Lock"
	Backend  string // "Redis", "PostgreSQL", "MariaDB", "SQLite", "ZooKeeper", "etcd"
	Settings string // ttl, retry interval, session timeout: what a reader needs to judge the numbers

	// Floor marks a reference that is not a library: the least a lock of
	// its kind can cost on the backend (see floor.go). It runs only in the
	// scenarios of floorScenarios and is never one of simba's peers.
	Floor bool

	// Open returns a client with connections of its own, as a separate
	// process would have. Every contender of a scenario opens its own.
	Open func(ctx context.Context) (Client, error)

	// OpenShared returns a client that many goroutines use at once
	// (scenario bs), where Open's is not safe for that; nil means Open's
	// client is, as every library's documentation here allows.
	OpenShared func(ctx context.Context) (Client, error)

	// Ops returns how many commands (Redis, etcd requests) or statements
	// (SQL, ZooKeeper requests) the server has executed so far, for the
	// waiter-load and renewal scenarios; nil when the server cannot tell.
	// The runner takes differences, so the counter may start anywhere.
	Ops func(ctx context.Context) (int64, error)

	// Trips, where the adapter counts on the client side, returns how many
	// requests all clients of this target have sent so far (a pipeline or
	// a script counts once, however many commands it runs on the server).
	// Nil means one request per server operation: the runner uses Ops.
	// Added for the waiter-load and renewal scenarios; optional.
	Trips func() int64

	// Takeover is the time the holder's lease or session needs to lapse
	// after kill -9 (scenario f), for the report; 0 when the lock dies
	// with the connection (advisory locks, GET_LOCK).
	Takeover time.Duration

	// Warm, where not nil, readies the server before any scenario runs
	// (once per run, whichever target of the server comes first), so that
	// the first target measured does not pay for a cold server, such as a
	// JVM that compiles its hot paths in the first seconds of load.
	// Holder processes and tests skip it.
	Warm func(ctx context.Context) error

	// Settle is how long work that ended may take to show in Ops: the
	// waiter-load and renewal scenarios wait that long before their first
	// count, so that the set-up's work (queueing the waiters, taking the
	// leases) is not counted in the window. 0 when counts are immediate.
	Settle time.Duration
}

// ID names the target in reports and in the holder process's environment.
func (t Target) ID() string { return t.Lib + "/" + t.Backend }

// A Client takes locks for one contender.
type Client interface {
	// Lock blocks until key is held or ctx ends. Where the library renews
	// only when asked (redsync, redislock), the returned Lock keeps itself
	// alive the way the library's documentation shows, until Unlock.
	Lock(ctx context.Context, key string) (Lock, error)
	// Close releases the client's connections. Locks still held are
	// abandoned, as a crashing process would abandon them.
	Close() error
}

// A Lock is one held lock.
type Lock interface {
	// Unlock releases the lock and stops keeping it alive.
	Unlock(ctx context.Context) error
}
