// Package testserver gives tests real servers: Redis, Redis Cluster,
// PostgreSQL, MySQL/MariaDB and ZooKeeper (standalone and a three-node
// ensemble).
//
// # Providers
//
// Each helper takes the first provider that works:
//
//  1. A server named by an environment variable (SIMBA_TEST_REDIS,
//     SIMBA_TEST_REDIS_CLUSTER, SIMBA_TEST_POSTGRES, SIMBA_TEST_MYSQL,
//     SIMBA_TEST_ZOOKEEPER; see the Env constants for their formats).
//  2. A container (testcontainers-go) when a Docker engine answers its health
//     check, probed once per process: SIMBA_TEST_IMAGE_REDIS (redis:7, also
//     for the three masters of a Redis Cluster, in one container),
//     SIMBA_TEST_IMAGE_POSTGRES (postgres:15), SIMBA_TEST_IMAGE_MYSQL
//     (mariadb:10.11), SIMBA_TEST_IMAGE_ZOOKEEPER (zookeeper:3.8). Ports are
//     published on 127.0.0.1 only, and TESTCONTAINERS_HOST_OVERRIDE defaults
//     to 127.0.0.1, so no traffic leaves loopback. SIMBA_TEST_DOCKER=0 turns
//     containers off; SIMBA_TEST_DOCKER=1 makes them the only provider (a
//     missing engine is then a missing server). The private helpers and the
//     ZooKeeper ensemble are never containers.
//  3. The server binary from the Debian package (redis-server, postgresql,
//     mariadb-server, zookeeper), started as a child process in a temporary
//     directory on a free 127.0.0.1 port and waited for until it answers real
//     requests.
//
// When none works the test is skipped with a message naming the Debian
// package, or failed when CI is set to a true value.
//
// Containers carry the label org.simba-go.testserver and are removed by
// [Shutdown]; when the test binary dies first (a panic, go test's timeout,
// SIGKILL), a reaper process it started removes them (testcontainers' own
// reaper, Ryuk, is turned off unless TESTCONTAINERS_RYUK_DISABLED is set:
// its image needs a registry). Every start and removal is logged to
// standard error with the container's image.
//
// # Isolation
//
// Redis(t), RedisCluster(t), Postgres(t), MySQL(t) and ZooKeeper(t) share one
// server per test binary, started on first use; each call gets its own
// namespace: a key prefix (Redis), a fresh database (SQL, dropped at the end
// of the test) or a znode root (ZooKeeper). Shared servers cannot be
// controlled. The Private… helpers and ZooKeeperEnsemble start local servers
// for one test alone, whose [Process] control methods (Stop, Start, Kill,
// Restart, Pause, Resume) work for fault tests; the port survives restarts.
//
// Local processes run in their own process group, are killed if the test
// binary dies (Linux), and are stopped with the test (private) or by
// [Shutdown] (shared). Use [VerifyTestMain] as TestMain to get both the
// shutdown and goleak's check:
//
//	func TestMain(m *testing.M) { testserver.VerifyTestMain(m) }
//
// PostgreSQL refuses to run as root; as root it is run as the postgres
// system user. MariaDB is run with --user=root as root.
package testserver
