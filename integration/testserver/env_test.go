package testserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
)

// TestEnvProviders points the environment variables at the shared local
// servers and checks that the helpers use them, isolate tests and clean up.
// It cannot run in parallel: the variables are process-wide (it runs before
// the parallel tests, which then reuse the servers it started).
func TestEnvProviders(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		local := testserver.Redis(t)
		t.Setenv(testserver.EnvRedis, local.Addr())
		var key string
		t.Run("inner", func(t *testing.T) {
			srv := testserver.Redis(t)
			if srv.Addr() != local.Addr() || srv.KeyPrefix() == local.KeyPrefix() {
				t.Fatalf("got %s %q", srv.Addr(), srv.KeyPrefix())
			}
			notControllable(t, srv.Process)
			key = srv.KeyPrefix() + "k"
			if err := redisClient(t, srv.Addr()).Set(context.Background(), key, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		})
		if n, err := redisClient(t, local.Addr()).Exists(context.Background(), key).Result(); err != nil || n != 0 {
			t.Fatalf("key %s left behind: %d, %v", key, n, err)
		}
	})
	t.Run("redis cluster", func(t *testing.T) {
		local := testserver.RedisCluster(t)
		t.Setenv(testserver.EnvRedisCluster, strings.Join(local.Addrs()[:2], ", "))
		var keys []string
		t.Run("inner", func(t *testing.T) {
			srv := testserver.RedisCluster(t)
			if len(srv.Addrs()) != 2 || srv.Addrs()[0] != local.Addrs()[0] {
				t.Fatalf("addrs %v", srv.Addrs())
			}
			notControllable(t, srv.Node(0))
			keys = keyPerSlot(srv.KeyPrefix())[:100]
			if err := writeEverySlot(ctxTimeout(t, 10*time.Second), clusterClient(t, srv.Addrs()), keys); err != nil {
				t.Fatal(err)
			}
		})
		if n, err := clusterClient(t, local.Addrs()).Exists(context.Background(), keys[0]).Result(); err != nil || n != 0 {
			t.Fatalf("key %s left behind: %d, %v", keys[0], n, err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		local := testserver.Postgres(t)
		t.Setenv(testserver.EnvPostgres, "postgres://postgres@"+local.Addr()+"/?sslmode=disable&application_name=envtest")
		envSQL(t, "pgx", testserver.Postgres, "SELECT count(*) FROM pg_database WHERE datname = $1", local)
	})
	t.Run("mysql", func(t *testing.T) {
		local := testserver.MySQL(t)
		t.Setenv(testserver.EnvMySQL, "root@tcp("+local.Addr()+")/?parseTime=true")
		srv := envSQL(t, "mysql", testserver.MySQL, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", local)
		if !strings.Contains(srv, "parseTime=true") {
			t.Errorf("DSN %s lost the parameters of %s", srv, testserver.EnvMySQL)
		}
	})
	t.Run("zookeeper", func(t *testing.T) {
		local := testserver.ZooKeeper(t)
		t.Setenv(testserver.EnvZooKeeper, local.Addr()+",")
		var root string
		t.Run("inner", func(t *testing.T) {
			srv := testserver.ZooKeeper(t)
			if len(srv.Servers()) != 1 || srv.Addr() != local.Addr() || srv.Root() == local.Root() {
				t.Fatalf("servers %v root %s", srv.Servers(), srv.Root())
			}
			notControllable(t, srv.Process)
			root = srv.Root()
			if err := zkRoundTrip(zkConn(t, srv.Servers(), 4*time.Second), root, "child"); err != nil {
				t.Fatal(err)
			}
		})
		if ok, _, err := zkConn(t, local.Servers(), 4*time.Second).Exists(root); err != nil || ok {
			t.Fatalf("root %s left behind: %v, %v", root, ok, err)
		}
	})
}

// envSQL checks a SQL helper whose variable points at local's server and
// returns the DSN it gave.
func envSQL(t *testing.T, driver string, helper func(testing.TB) *testserver.SQLServer, exists string, local *testserver.SQLServer) string {
	var name, dsn string
	t.Run("inner", func(t *testing.T) {
		srv := helper(t)
		if srv.Addr() != local.Addr() || srv.Database() == local.Database() || !strings.Contains(srv.DSN(), srv.Database()) {
			t.Fatalf("got %s %s", srv.Addr(), srv.DSN())
		}
		notControllable(t, srv.Process)
		name, dsn = srv.Database(), srv.DSN()
		if err := queryOne(openDB(t, driver, srv.DSN()), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	})
	var n int
	if err := openDB(t, driver, local.DSN()).QueryRow(exists, name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s left behind: %d, %v", name, n, err)
	}
	return dsn
}
