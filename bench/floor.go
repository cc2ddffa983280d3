package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The floors: not libraries, but the least a lock can cost on a backend
// when Lock returns only once the server granted it and Unlock only once
// the server freed it, which is what every library here promises. They
// run only in the scenarios that time whole uncontended cycles ((a), (b),
// (b′)): they queue nobody, wake nobody and renew nothing. There they
// bound what any library that sends each call as a request of its own
// can reach (in (b′) a library that sends the calls of many goroutines
// in one round trip can pass them). The report never counts them as
// peers; it gives simba's share of its backend's floor beside its factor.
//
// A floor does the least work a lock of its kind needs, each step one
// plain command or autocommit statement in one round trip:
//   - Redis: SET NX PX to take the key, DEL to free it. No token, no
//     owner check on release: less than a correct lock does, so no lock
//     with fencing tokens (a script) can be faster.
//   - PostgreSQL and MariaDB: a lease recorded in a row, as every
//     lease that outlives its connection needs (pglock, simba): one
//     single-row write that takes a free or expired row and bumps its
//     token, one single-row update that frees it. Two committed writes a
//     cycle; an advisory lock or GET_LOCK writes nothing, and dies with
//     its connection. The take is a plain UPDATE where the client freed
//     the row itself last (it knows the row is there), else an upsert.
const floorLib = "floor"

// floorRetry is how long a floor's Lock waits before it tries a taken key
// again: collisions are rare in (b) and absent in (a).
const floorRetry = time.Millisecond

// floorLease is how long a floor's grant lives, as long as the peers' and
// simba's (ttl + transition); nothing renews it.
const floorLease = simbaTTL + simbaTransition

// floorNote is the end of every floor's Settings.
const floorNote = "; a taken key is tried again after 1 ms; not a library: the least a lock of its kind can cost, " +
	"measured in (a), (b) and (b′) only and never a peer"

// redisFloorTarget is the Redis floor on addr.
func redisFloorTarget(addr, prefix string, ops func(context.Context) (int64, error)) Target {
	var n trips
	return Target{Lib: floorLib, Backend: "Redis", Floor: true, Ops: ops, Trips: n.load, Takeover: floorLease,
		Settings: fmt.Sprintf("SET key NX PX %v, then DEL key: one command a round trip, no token, no owner check", floorLease) + floorNote,
		Open: func(context.Context) (Client, error) {
			return &redisFloor{rdb: n.client(addr), prefix: prefix + "floor:", id: contenderID()}, nil
		},
	}
}

type redisFloor struct {
	rdb    *redis.Client
	prefix string
	id     string
}

// Lock implements Client.
func (c *redisFloor) Lock(ctx context.Context, key string) (Lock, error) {
	k := c.prefix + key
	for {
		ok, err := c.rdb.SetNX(ctx, k, c.id, floorLease).Result()
		if err != nil {
			return nil, fmt.Errorf("floor: SET NX: %w", err)
		}
		if ok {
			return redisFloorLock{c.rdb, k}, nil
		}
		if err := sleep(ctx, floorRetry); err != nil {
			return nil, fmt.Errorf("floor: lock: %w", err)
		}
	}
}

// Close implements Client: locks still held lapse after floorLease.
func (c *redisFloor) Close() error { return c.rdb.Close() }

type redisFloorLock struct {
	rdb *redis.Client
	key string
}

// Unlock implements Lock.
func (l redisFloorLock) Unlock(ctx context.Context) error {
	if err := l.rdb.Del(ctx, l.key).Err(); err != nil {
		return fmt.Errorf("floor: DEL: %w", err)
	}
	return nil
}

// The statements of the SQL floors, on a table of the benchmark's own. The
// grant's expiry is on the server's clock, as a lease's must be.
const (
	pgFloorTable = `CREATE TABLE IF NOT EXISTS bench_floor (
		k varchar(255) COLLATE "C" PRIMARY KEY,
		owner varchar(128) COLLATE "C" NOT NULL DEFAULT '',
		token bigint NOT NULL DEFAULT 0,
		until_ms bigint NOT NULL DEFAULT 0)`
	pgFloorLock = `INSERT INTO bench_floor AS f (k, owner, token, until_ms)
		VALUES ($1, $2, 1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint + $3)
		ON CONFLICT (k) DO UPDATE SET owner = excluded.owner, token = f.token + 1, until_ms = excluded.until_ms
		WHERE f.owner = '' OR f.until_ms < (extract(epoch FROM clock_timestamp()) * 1000)::bigint
		RETURNING token`
	// The arguments of a retake come as MySQL's placeholders take them:
	// the owner, the lease (ms), the name.
	pgFloorRetake = `UPDATE bench_floor SET owner = $1, token = token + 1,
		until_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint + $2
		WHERE k = $3 AND (owner = '' OR until_ms < (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
		RETURNING token`
	pgFloorUnlock = `UPDATE bench_floor SET owner = '' WHERE k = $1 AND owner = $2 AND token = $3`

	// MariaDB evaluates the assignments of ON DUPLICATE KEY UPDATE left
	// to right, each seeing the ones before it: @w keeps whether the row
	// was free before any of them. Affected rows: 1 for an insert, 2 for
	// an update, 0 when the row was taken (nothing changed).
	myFloorTable = `CREATE TABLE IF NOT EXISTS bench_floor (
		k varbinary(255) NOT NULL PRIMARY KEY,
		owner varbinary(128) NOT NULL DEFAULT '',
		token bigint NOT NULL DEFAULT 0,
		until_ms bigint NOT NULL DEFAULT 0)`
	myFloorLock = `INSERT INTO bench_floor (k, owner, token, until_ms)
		VALUES (?, ?, 1, CAST(UNIX_TIMESTAMP(UTC_TIMESTAMP(3)) * 1000 AS SIGNED) + ?)
		ON DUPLICATE KEY UPDATE
		token = IF(@w := (owner = '' OR until_ms < CAST(UNIX_TIMESTAMP(UTC_TIMESTAMP(3)) * 1000 AS SIGNED)), token + 1, token),
		until_ms = IF(@w, VALUES(until_ms), until_ms),
		owner = IF(@w, VALUES(owner), owner)`
	// The WHERE clause of an UPDATE sees the row before its assignments.
	myFloorRetake = `UPDATE bench_floor SET owner = ?, token = token + 1,
		until_ms = CAST(UNIX_TIMESTAMP(UTC_TIMESTAMP(3)) * 1000 AS SIGNED) + ?
		WHERE k = ? AND (owner = '' OR until_ms < CAST(UNIX_TIMESTAMP(UTC_TIMESTAMP(3)) * 1000 AS SIGNED))`
	myFloorUnlock = `UPDATE bench_floor SET owner = '' WHERE k = ? AND owner = ?`
)

// sqlFloor opens floor clients on one SQL database, creating the table
// before the first client of this process.
type sqlFloor struct {
	driver, dsn, prefix string
	table               string // the CREATE TABLE statement
	returning           bool   // the take statements return the token (else affected rows tell)
	lock, unlock        string
	retake              string // the plain UPDATE that takes a row the client freed last: (owner, lease ms, name)

	mu      sync.Mutex
	created bool
}

// pgFloorTarget is the PostgreSQL floor, on pgx as simba's target.
func pgFloorTarget(s Servers) Target {
	f := &sqlFloor{driver: "pgx", dsn: s.Postgres, prefix: s.KeyPrefix, table: pgFloorTable, returning: true,
		lock: pgFloorLock, unlock: pgFloorUnlock, retake: pgFloorRetake}
	return Target{Lib: floorLib, Backend: "PostgreSQL", Floor: true, Open: f.open, Ops: pgOps(s.Postgres), Settle: pgStatsSettle,
		Takeover: floorLease,
		Settings: "a lease in a row: INSERT … ON CONFLICT DO UPDATE … WHERE free or expired RETURNING token " +
			"(a plain UPDATE … RETURNING token where the client freed the row last), then UPDATE … SET owner = ''; " +
			"autocommit, one round trip each (pgx prepares once per connection), pool of 16 as simba's" + floorNote}
}

// myFloorTarget is the MariaDB floor, with simba's DSN settings.
func myFloorTarget(s Servers) Target {
	f := &sqlFloor{driver: "mysql", dsn: withInterpolateParams(s.MySQL), prefix: s.KeyPrefix, table: myFloorTable,
		lock: myFloorLock, unlock: myFloorUnlock, retake: myFloorRetake}
	return Target{Lib: floorLib, Backend: "MariaDB", Floor: true, Open: f.open, Ops: mysqlOps(s.MySQL), Takeover: floorLease,
		Settings: "a lease in a row: INSERT … ON DUPLICATE KEY UPDATE (taken when free or expired, token bumped; affected rows tell; " +
			"a plain UPDATE where the client freed the row last), " +
			"then UPDATE … SET owner = ''; autocommit, one round trip each, interpolateParams=true and a pool of 16 as simba's" + floorNote}
}

func (f *sqlFloor) open(ctx context.Context) (Client, error) {
	db, err := sql.Open(f.driver, f.dsn)
	if err != nil {
		return nil, fmt.Errorf("floor: open: %w", err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	if err := f.create(ctx, db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &sqlFloorClient{f: f, db: db, id: contenderID(), freed: map[string]bool{}}, nil
}

// create makes the table once per target (a failure is retried by the
// next Open).
func (f *sqlFloor) create(ctx context.Context, db *sql.DB) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.created {
		return nil
	}
	if _, err := db.ExecContext(ctx, f.table); err != nil {
		return fmt.Errorf("floor: create table: %w", err)
	}
	f.created = true
	return nil
}

type sqlFloorClient struct {
	f  *sqlFloor
	db *sql.DB
	id string

	mu    sync.Mutex
	freed map[string]bool // rows this client freed last, for retake
}

// maxFreed bounds sqlFloorClient.freed, as simba's MariaDB Store bounds
// the same hint.
const maxFreed = 4096

// Lock implements Client.
func (c *sqlFloorClient) Lock(ctx context.Context, key string) (Lock, error) {
	name := lockName(c.f.prefix, key, nameMax)
	for {
		token, ok, err := c.try(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("floor: lock: %w", err)
		}
		if ok {
			return sqlFloorLock{c: c, name: name, token: token}, nil
		}
		if err := sleep(ctx, floorRetry); err != nil {
			return nil, fmt.Errorf("floor: lock: %w", err)
		}
	}
}

// try takes the row once, with a plain update when this client freed it
// last (then with the upsert when that finds it taken, or gone), else
// with the upsert: the token and true when it took the row.
func (c *sqlFloorClient) try(ctx context.Context, name string) (int64, bool, error) {
	lease := floorLease.Milliseconds()
	c.mu.Lock()
	mine := c.freed[name]
	delete(c.freed, name)
	c.mu.Unlock()
	if mine {
		token, ok, err := c.run(ctx, c.f.retake, c.id, lease, name)
		if err != nil || ok {
			return token, ok, err
		}
	}
	return c.run(ctx, c.f.lock, name, c.id, lease)
}

// run runs a take statement: the token and true when it took the row.
func (c *sqlFloorClient) run(ctx context.Context, stmt string, args ...any) (int64, bool, error) {
	if c.f.returning {
		var token int64
		err := c.db.QueryRowContext(ctx, stmt, args...).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return token, err == nil, err
	}
	res, err := c.db.ExecContext(ctx, stmt, args...)
	if err != nil {
		return 0, false, err
	}
	n, err := res.RowsAffected()
	return 0, n > 0, err
}

// Close implements Client: locks still held lapse after floorLease.
func (c *sqlFloorClient) Close() error { return c.db.Close() }

type sqlFloorLock struct {
	c     *sqlFloorClient
	name  string
	token int64
}

// Unlock implements Lock.
func (l sqlFloorLock) Unlock(ctx context.Context) error {
	args := []any{l.name, l.c.id}
	if l.c.f.returning {
		args = append(args, l.token)
	}
	res, err := l.c.db.ExecContext(ctx, l.c.f.unlock, args...)
	if err != nil {
		return fmt.Errorf("floor: unlock: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("floor: unlock: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("floor: unlock: %d rows changed, want 1 (not held)", n)
	}
	l.c.mu.Lock()
	if len(l.c.freed) < maxFreed {
		l.c.freed[l.name] = true
	}
	l.c.mu.Unlock()
	return nil
}
