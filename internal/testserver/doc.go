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
//     check, probed once per process; SIMBA_TEST_DOCKER=0 turns this off.
//     Redis Cluster and the ZooKeeper ensemble are never containers.
//  3. The server binary from the Debian package (redis-server, postgresql,
//     mariadb-server, zookeeper), started as a child process in a temporary
//     directory on a free 127.0.0.1 port and waited for until it answers real
//     requests.
//
// When none works the test is skipped with a message naming the Debian
// package, or failed when CI is set to a true value.
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
