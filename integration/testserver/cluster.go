package testserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSize is the number of masters (no replicas) of a local cluster;
// clusterSlots splits the 16384 slots among them as redis-cli does.
const clusterSize = 3

var clusterSlots = [clusterSize][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}

// ClusterServer is a Redis Cluster of three masters for one test, with a
// key prefix of its own (without a hash tag, so keys spread over all slots).
type ClusterServer struct {
	nodes  []*Process
	prefix string
}

// Addrs returns the addresses of the masters, for redis.ClusterOptions.Addrs.
func (c *ClusterServer) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// KeyPrefix returns the test's unique key prefix.
func (c *ClusterServer) KeyPrefix() string { return c.prefix }

// Node returns master i (0, 1 or 2; controllable for PrivateRedisCluster
// only). A restarted master keeps its slots (nodes.conf) but not its keys.
// For any other i it returns a Process whose methods all fail.
func (c *ClusterServer) Node(i int) *Process {
	if i < 0 || i >= len(c.nodes) {
		return detached("redis", "", fmt.Sprintf("no cluster node %d (have %d)", i, len(c.nodes)))
	}
	return c.nodes[i]
}

var sharedCluster lazy[[]*Process]

// RedisCluster returns a Redis Cluster for the test: the one named by
// SIMBA_TEST_REDIS_CLUSTER, else three masters in one container when Docker
// answers, else three local redis-server masters, shared by the tests of
// this binary. Only the key prefix is the test's own; the nodes are not
// controllable (see PrivateRedisCluster).
func RedisCluster(t testing.TB) *ClusterServer {
	t.Helper()
	prefix := unique("simba-test-") + ":"
	if addrs := envList(EnvRedisCluster); len(addrs) > 0 {
		var nodes []*Process
		for _, a := range addrs {
			if !hostPort(a) {
				t.Fatalf("testserver: %s: %q is not host:port", EnvRedisCluster, a)
			}
			nodes = append(nodes, detached("redis", a, "named by "+EnvRedisCluster))
		}
		c := &ClusterServer{nodes: nodes, prefix: prefix}
		t.Cleanup(func() { deleteClusterKeys(t, addrs, prefix) })
		return c
	}
	begin := time.Now()
	nodes, err := sharedCluster.get(startSharedCluster)
	need(t, err)
	c := &ClusterServer{nodes: nodes, prefix: prefix}
	logStart(t, "shared redis cluster "+strings.Join(c.Addrs(), ","), begin)
	return c
}

// PrivateRedisCluster starts a local three-master Redis Cluster for this
// test alone, stopped when the test ends; its nodes are controllable.
func PrivateRedisCluster(t testing.TB) *ClusterServer {
	t.Helper()
	begin := time.Now()
	g, err := startCluster()
	need(t, err)
	private(t, g)
	c := &ClusterServer{nodes: g.procs, prefix: unique("simba-test-") + ":"}
	logStart(t, "private redis cluster "+strings.Join(c.Addrs(), ","), begin)
	return c
}

// startCluster starts three cluster-enabled redis-servers (bus port =
// port + 10000), assigns the slots, joins them and waits until every node
// reports cluster_state:ok.
func startCluster() (*group, error) {
	bin, err := redisBinary()
	if err != nil {
		return nil, err
	}
	dir, err := newWorkDir("rediscluster")
	if err != nil {
		return nil, err
	}
	g := &group{dir: dir}
	for i := range clusterSize {
		nodeDir := filepath.Join(dir, "node"+strconv.Itoa(i+1))
		if err := os.Mkdir(nodeDir, 0o755); err != nil {
			_ = g.close()
			return nil, fmt.Errorf("testserver: %w", err)
		}
		err := retryPorts(func() error {
			port, err := freePortPair()
			if err != nil {
				return err
			}
			p := newRedisProcess(bin, nodeDir, port, "--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
			if err := p.Start(); err != nil {
				return err
			}
			g.procs = append(g.procs, p)
			return nil
		})
		if err != nil {
			_ = g.close()
			return nil, err
		}
	}
	if err := joinCluster(g.procs); err != nil {
		_ = g.close()
		return nil, err
	}
	return g, nil
}

// joinCluster does what `redis-cli --cluster create --cluster-replicas 0`
// does, without its one-second polls.
func joinCluster(nodes []*Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		defer clients[i].Close()
	}
	for i, c := range clients {
		if err := c.ClusterAddSlotsRange(ctx, clusterSlots[i][0], clusterSlots[i][1]).Err(); err != nil {
			return fmt.Errorf("testserver: redis cluster: add slots on %s: %w", nodes[i].Addr(), err)
		}
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("testserver: redis cluster: config epoch on %s: %w", nodes[i].Addr(), err)
		}
	}
	for _, n := range nodes[1:] {
		host, port, _ := strings.Cut(n.Addr(), ":")
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("testserver: redis cluster: meet %s: %w", n.Addr(), err)
		}
	}
	for i, c := range clients {
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r", len(nodes))) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("testserver: redis cluster: %s not ok after 30 s: %v %q; log %s:\n%s",
					nodes[i].Addr(), err, info, nodes[i].spec.logPath, nodes[i].logTail())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// deleteClusterKeys removes the keys under prefix from an external cluster.
func deleteClusterKeys(t testing.TB, addrs []string, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	var (
		mu      sync.Mutex
		masters []string
	)
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { // concurrently
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, m.Options().Addr)
		return nil
	})
	if err != nil {
		t.Logf("testserver: cleaning keys %s*: %v", prefix, err)
		return
	}
	deleteRedisKeys(t, masters, prefix)
}
