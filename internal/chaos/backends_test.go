package chaos

import (
	"context"
	"database/sql"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
	"github.com/simba-go/simba/schema"
	"github.com/simba-go/simba/sqlstore"
	"github.com/simba-go/simba/tck"
	"github.com/simba-go/simba/zkstore"
)

// Flags of `make chaos`; `make test` runs the short default.
var (
	chaosFor  = flag.Duration("chaos.duration", 20*time.Second, "how long the campaign runs on each backend")
	chaosSeed = flag.Uint64("chaos.seed", 1, "seed of the nemesis")
)

// Campaign timings on real servers: a safety margin (ttl/4) that the
// scheduling delays of a loaded 2-core machine cannot eat.
const (
	realTTL = 2 * time.Second
	realTr  = time.Second
)

// TestCampaign runs the fault campaign on every backend in parallel and
// fails on any invariant violation.
func TestCampaign(t *testing.T) {
	for _, b := range []struct {
		name  string
		setup func(t *testing.T) Setup
	}{
		{"postgres", func(t *testing.T) Setup { return sqlSetup(t, "postgres", testserver.PrivatePostgres(t)) }},
		{"mysql", func(t *testing.T) Setup { return sqlSetup(t, "mysql", testserver.PrivateMySQL(t)) }},
		{"sqlite", sqliteSetup},
		{"redis", redisSetup},
		{"zookeeper", zkSetup},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.setup(t)
			res := Run(t.Context(), s, *chaosFor, *chaosSeed)
			kinds := map[string]int{}
			for _, e := range res.Episodes {
				kinds[e.Fault]++
			}
			t.Logf("%s: %d episodes %v; %d holds (%d lost), margin %v; fenced %+v; unfenced %+v",
				b.name, len(res.Episodes), kinds, res.Report.Holds, res.Report.Lost, res.Report.Margin, res.Fenced, res.Unfenced)
			for _, v := range res.Violations {
				t.Error(v)
			}
			if res.Report.Holds < 3 || len(res.Episodes) == 0 {
				t.Errorf("the campaign did not run: %d holds, %d episodes", res.Report.Holds, len(res.Episodes))
			}
		})
	}
}

// partitionFaulter is the Faulter of an in-process store: every kind of
// connection fault is a hang of its calls (tck.Cuttable).
type partitionFaulter struct{ tck.Partition }

func (p partitionFaulter) Blackhole()          { p.Cut() }
func (p partitionFaulter) Delay(time.Duration) { p.Cut() }

func proxyTo(t *testing.T, addr string) *faultproxy.Proxy {
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func sqlSetup(t *testing.T, dialect string, srv *testserver.SQLServer) Setup {
	driver, d, newStore := "pgx", schema.Postgres, sqlstore.NewPostgres
	if dialect == "mysql" {
		driver, d, newStore = "mysql", schema.MySQL, sqlstore.NewMySQL
	}
	if err := schema.Migrate(t.Context(), openDB(t, driver, srv.DSN()), d); err != nil {
		t.Fatal(err)
	}
	return Setup{
		Name: dialect,
		Client: func() (lease.Store, Faulter, []lease.Option) {
			p := proxyTo(t, srv.Addr())
			s, err := newStore(openDB(t, driver, strings.Replace(srv.DSN(), srv.Addr(), p.Addr(), 1)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, p, nil
		},
		Server: srv.Process, TTL: realTTL, Transition: realTr,
	}
}

func sqliteSetup(t *testing.T) Setup {
	dsn := "file:" + filepath.Join(t.TempDir(), "chaos.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	if err := schema.Migrate(t.Context(), openDB(t, "sqlite", dsn), schema.SQLite); err != nil {
		t.Fatal(err)
	}
	return Setup{
		Name: "sqlite",
		Client: func() (lease.Store, Faulter, []lease.Option) {
			s, err := sqlstore.NewSQLite(openDB(t, "sqlite", dsn))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			c, p := tck.Cuttable(s)
			return c, partitionFaulter{p}, nil
		},
		TTL: realTTL, Transition: realTr,
	}
}

func redisSetup(t *testing.T) Setup {
	srv := testserver.PrivateRedis(t)
	return Setup{
		Name: "redis",
		Client: func() (lease.Store, Faulter, []lease.Option) {
			p := proxyTo(t, srv.Addr())
			c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
			t.Cleanup(func() { c.Close() })
			s, err := redisstore.New(c, redisstore.WithKeyPrefix(srv.KeyPrefix()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, p, nil
		},
		Server: srv.Process, TTL: realTTL, Transition: realTr,
	}
}

func zkSetup(t *testing.T) Setup {
	srv := testserver.PrivateZooKeeper(t)
	const session = realTTL + realTr
	return Setup{
		Name: "zookeeper",
		Client: func() (lease.Store, Faulter, []lease.Option) {
			p := proxyTo(t, srv.Addr())
			conn := zkConnect(t, p.Addr(), session)
			s, err := zkstore.New(conn, session, zkstore.WithRoot(srv.Root()))
			if err != nil {
				t.Fatal(err)
			}
			return s, p, []lease.Option{lease.WithTTL(realTTL), lease.WithTransition(realTr)}
		},
		Server: srv.Process, TTL: realTTL, Transition: realTr,
	}
}

// zkConnect opens a session through addr and waits for it.
func zkConnect(t *testing.T, addr string, session time.Duration) *zk.Conn {
	conn, events, err := zk.Connect([]string{addr}, session, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn
			}
		case <-ctx.Done():
			t.Fatalf("no ZooKeeper session through %s", addr)
		}
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
