package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
	"github.com/simba-go/simba/sqlstore"
	"github.com/simba-go/simba/zkstore"
)

// The environment of a contender process that names its store.
const (
	envStore  = "SIMBA_CHAOS_STORE"  // postgres, postgres-listen, mysql, sqlite, redis, redis-replica, redis-cluster, zookeeper
	envTarget = "SIMBA_CHAOS_TARGET" // DSN, address, or a comma list (see childStore)
	envRoot   = "SIMBA_CHAOS_ROOT"   // Redis key prefix or ZooKeeper root
	// envSession is the ZooKeeper session timeout to ask for (default
	// ttl + transition).
	envSession = "SIMBA_CHAOS_SESSION"
	// envLiteClock is the file of a SQLite set-up's clock offset (see
	// liteClock).
	envLiteClock = "SIMBA_CHAOS_LITE_CLOCK"
)

// child returns the command of a contender process: this test binary,
// which TestMain turns into ChildMain with the store childStore makes.
func child(store, target, root string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envStore+"="+store, envTarget+"="+target, envRoot+"="+root)
	return cmd
}

// childStore makes a contender process's store from its environment:
// target is a DSN (postgres, mysql, sqlite), an address (redis), a comma
// list of node=proxy pairs (redis-cluster) or of addresses (zookeeper).
// A ZooKeeper process waits for its session until ctx ends: one respawned
// while the nemesis restarts the server (10–20 s at load 20) gave up after
// 20 s and exited, failing the campaign ("zkstore: no session with
// [127.0.0.1:44687]: context deadline exceeded").
func childStore(ctx context.Context) (lease.Store, []lease.Option, func(), error) {
	target, root := os.Getenv(envTarget), os.Getenv(envRoot)
	kind := os.Getenv(envStore)
	switch kind {
	case "postgres", "postgres-listen", "mysql", "sqlite":
		driver, newStore := "pgx", sqlstore.NewPostgres
		switch kind {
		case "mysql":
			driver, newStore = "mysql", sqlstore.NewMySQL
		case "sqlite":
			driver, newStore = "sqlite", sqlstore.NewSQLite
		}
		db, err := sql.Open(driver, target)
		if err != nil {
			return nil, nil, nil, err
		}
		var opts []sqlstore.Option
		if kind == "postgres-listen" {
			opts = append(opts, sqlstore.WithPostgresDoorbells(false))
		}
		if f := os.Getenv(envLiteClock); kind == "sqlite" && f != "" {
			opts = append(opts, sqlstore.WithSQLiteClockOffset(liteOffset(f)))
		}
		s, err := newStore(db, opts...)
		if err != nil {
			db.Close()
			return nil, nil, nil, err
		}
		return s, nil, func() { s.Close(); db.Close() }, nil
	case "redis", "redis-replica", "redis-cluster":
		var c redis.UniversalClient
		var opts []redisstore.Option
		if kind == "redis-replica" {
			opts = append(opts, redisstore.WithWaitReplicas(1, replicaWait))
		}
		if kind != "redis-cluster" {
			c = redis.NewClient(&redis.Options{Addr: target, MaxRetries: -1})
		} else {
			via := map[string]string{}
			var addrs []string
			for _, pair := range strings.Split(target, ",") {
				node, proxy, _ := strings.Cut(pair, "=")
				via[node] = proxy
				addrs = append(addrs, node)
			}
			var d net.Dialer
			c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1,
				Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
					if p, ok := via[addr]; ok {
						addr = p
					}
					return d.DialContext(ctx, network, addr)
				}})
		}
		s, err := redisstore.New(c, append(opts, redisstore.WithKeyPrefix(root))...)
		if err != nil {
			c.Close()
			return nil, nil, nil, err
		}
		return s, nil, func() { s.Close(); c.Close() }, nil
	case "zookeeper":
		session := realTTL + realTr
		if v := os.Getenv(envSession); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", envSession, err)
			}
			session = d
		}
		conn, err := dialZK(ctx, strings.Split(target, ","), session)
		if err != nil {
			return nil, nil, nil, err
		}
		s, err := zkstore.New(conn, zkstore.WithRoot(root))
		if err != nil {
			conn.Close()
			return nil, nil, nil, err
		}
		return s, nil, conn.Close, nil
	}
	return nil, nil, nil, fmt.Errorf("%s=%q: unknown store", envStore, kind)
}

// killPushSessions terminates, from the server, every session of the
// store's database that holds or waits on a doorbell (postgres: its
// advisory locks are the bells), is listening (postgres-listen) or waits
// on a doorbell (mysql): S6, a lost release notification.
func killPushSessions(kind string, db *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch kind {
	case "postgres-listen":
		_, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		      WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
		return err
	case "postgres":
		_, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		      WHERE datname = current_database() AND pid <> pg_backend_pid()
		        AND (query LIKE '%name: Wait%' OR pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory'))`)
		return err
	}
	rows, err := db.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST
	      WHERE DB = DATABASE() AND INFO LIKE '%GET_LOCK%' AND ID <> CONNECTION_ID()`)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, id := range ids {
		var me *mysql.MySQLError
		if _, err := db.ExecContext(ctx, "KILL ?", id); err != nil && !(errors.As(err, &me) && me.Number == 1094) {
			return err // 1094: unknown thread, it ended meanwhile
		}
	}
	return nil
}

// killSubscribers closes, from the server at addr, every connection in
// subscriber mode (S6).
func killSubscribers(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err()
}

// The MySQL driver logs every connection the nemesis breaks; the campaign
// counts what matters.
func init() { _ = mysql.SetLogger(log.New(io.Discard, "", 0)) }
