package testserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// startSharedCluster starts the Redis Cluster the tests of this binary
// share: three masters in one container when Docker answers, else (unless
// SIMBA_TEST_DOCKER=1) three local redis-servers. Shutdown stops either.
func startSharedCluster() ([]*Process, error) {
	var cerr error
	if derr := dockerUsable(); derr == nil {
		nodes, err := clusterInContainer()
		if err == nil || containerMode() == dockerRequired {
			return nodes, err
		}
		cerr = err
	} else if containerMode() == dockerRequired {
		return nil, dockerMissing("redis cluster", derr.Error())
	}
	g, err := startCluster()
	if err != nil {
		return nil, errors.Join(cerr, err)
	}
	onShutdown(g.close)
	var nodes []*Process
	for _, p := range g.procs {
		nodes = append(nodes, detached("redis", p.Addr(), "local cluster shared by the tests of this binary; use PrivateRedisCluster"))
	}
	return nodes, nil
}

// clusterInContainer runs the three masters in one container of the Redis
// image. Each listens on a port that is free here and is published on the
// same number on 127.0.0.1, and announces 127.0.0.1: clients here and the
// nodes in the container (over the container's own loopback, bus port =
// port + 10000) reach every node at the same address, and no traffic
// leaves loopback.
func clusterInContainer() ([]*Process, error) {
	var nodes []*Process
	err := retryPorts(func() error {
		ports := make([]int, clusterSize)
		for i := range ports {
			p, err := freePortPair()
			if err != nil {
				return err
			}
			ports[i] = p
		}
		r, err := runContainer(containerSpec{
			image: imageRedis, fixedPorts: ports, what: fmt.Sprintf("a redis cluster (ports %v)", ports),
			cmd:   []string{"sh", "-c", clusterScript(ports)},
			ready: pingRedis,
		})
		if err != nil {
			if strings.Contains(err.Error(), "port is already allocated") || strings.Contains(err.Error(), "address already in use") {
				return fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return err
		}
		nodes = nil
		for _, p := range ports {
			nodes = append(nodes, detached(r.describe("redis"), addr(p), "container cluster shared by the tests of this binary; use PrivateRedisCluster"))
		}
		if err := pingAll(nodes); err != nil {
			return errors.Join(err, r.terminate())
		}
		if err := joinCluster(nodes); err != nil {
			return errors.Join(err, r.terminate())
		}
		onShutdown(r.terminate)
		return nil
	})
	return nodes, err
}

// clusterScript starts a cluster-enabled redis-server per port, the last
// in the foreground, as root in the image's working directory (nodes-PORT.conf).
func clusterScript(ports []int) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for i, p := range ports {
		daemon := "yes"
		if i == len(ports)-1 {
			b.WriteString("exec ")
			daemon = "no"
		}
		port := strconv.Itoa(p)
		fmt.Fprintf(&b, "redis-server --port %s --protected-mode no --cluster-enabled yes --cluster-config-file nodes-%s.conf"+
			" --cluster-node-timeout 2000 --cluster-announce-ip 127.0.0.1 --save '' --appendonly no --daemonize %s\n", port, port, daemon)
	}
	return b.String()
}

// pingAll waits until every node answers PING (the script starts them one
// after another).
func pingAll(nodes []*Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range nodes {
		for {
			probe, cancelProbe := context.WithTimeout(ctx, 2*time.Second)
			err := pingRedis(probe, n.Addr())
			cancelProbe()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("testserver: redis cluster node %s: %w", n, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
