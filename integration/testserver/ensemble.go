package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ensemble is a three-node ZooKeeper ensemble of local processes for one
// test, stopped when the test ends. Each node is controllable on its own.
type Ensemble struct {
	nodes []*Process
	root  string
}

// Servers returns the client addresses of all nodes, for zk.Connect.
func (e *Ensemble) Servers() []string {
	out := make([]string, len(e.nodes))
	for i, n := range e.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Root returns the test's unique znode path; it exists when
// ZooKeeperEnsemble returns.
func (e *Ensemble) Root() string { return e.root }

// Node returns node i (0, 1 or 2). A node started while fewer than two
// nodes run answers `srvr` but serves no client until a quorum is back. For
// any other i it returns a Process whose methods all fail.
func (e *Ensemble) Node(i int) *Process {
	if i < 0 || i >= len(e.nodes) {
		return detached("zookeeper", "", fmt.Sprintf("no ensemble node %d (have %d)", i, len(e.nodes)))
	}
	return e.nodes[i]
}

// Leader returns the index of the node that is leader now, or -1 when none
// says so (no quorum, or an election is running).
func (e *Ensemble) Leader() int {
	for i, n := range e.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		mode, err := zkMode(ctx, n.Addr())
		cancel()
		if err == nil && mode == "leader" {
			return i
		}
	}
	return -1
}

// ZooKeeperEnsemble starts a three-node ensemble of local ZooKeepers
// (QuorumPeerMain) for this test alone and waits until every node serves
// as leader or follower. Containers and environment servers are not used:
// the point of an ensemble here is to stop its nodes.
func ZooKeeperEnsemble(t testing.TB) *Ensemble {
	t.Helper()
	begin := time.Now()
	var e *Ensemble
	g, err := startEnsemble(func(x *Ensemble) { e = x })
	need(t, err)
	private(t, g)
	logStart(t, "private zookeeper ensemble "+strings.Join(e.Servers(), ","), begin)
	e.root = makeRoot(t, e.Servers())
	return e
}

// startEnsemble starts the three nodes; publish receives the ensemble.
func startEnsemble(publish func(*Ensemble)) (*group, error) {
	java, classpath, err := zkJava()
	if err != nil {
		return nil, err
	}
	var g *group
	err = retryPorts(func() error {
		dir, err := newWorkDir("zkensemble")
		if err != nil {
			return err
		}
		g = &group{dir: dir}
		e := &Ensemble{}
		if err := e.configure(g, java, classpath); err != nil {
			_ = g.close()
			return err
		}
		if err := e.startAll(); err != nil {
			_ = g.close()
			return err
		}
		publish(e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// configure writes myid and zoo.cfg for three nodes on free ports.
func (e *Ensemble) configure(g *group, java, classpath string) error {
	const n = 3
	var client [n]int
	var servers strings.Builder
	for i := range n {
		var ps [3]int
		for j := range ps {
			p, err := freePort()
			if err != nil {
				return err
			}
			ps[j] = p
		}
		client[i] = ps[0]
		fmt.Fprintf(&servers, "server.%d=127.0.0.1:%d:%d\n", i+1, ps[1], ps[2])
	}
	for i := range n {
		dir := filepath.Join(g.dir, "node"+strconv.Itoa(i+1))
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return fmt.Errorf("testserver: %w", err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
			return fmt.Errorf("testserver: %w", err)
		}
		cfg := zkConfig(data, client[i], defaultZKSettings()) + "initLimit=20\nsyncLimit=10\nreconfigEnabled=false\n" + servers.String()
		cfgPath := filepath.Join(dir, "zoo.cfg")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			return fmt.Errorf("testserver: %w", err)
		}
		p := zkProcess(java, classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", dir, cfgPath, client[i], e.nodeReady)
		e.nodes = append(e.nodes, p)
		g.procs = append(g.procs, p)
	}
	return nil
}

// nodeReady is a node's start-up probe: it serves, or it answers while too
// few nodes run for a quorum.
func (e *Ensemble) nodeReady(ctx context.Context, a string) error {
	mode, err := zkMode(ctx, a)
	if err != nil {
		return err
	}
	up := 0
	for _, n := range e.nodes {
		if n.isUp() {
			up++
		}
	}
	if mode != "" || up <= len(e.nodes)/2 {
		return nil
	}
	return fmt.Errorf("zookeeper %s: not serving yet", a)
}

// startAll starts the nodes together and waits until all serve.
func (e *Ensemble) startAll() error {
	errs := make([]error, len(e.nodes))
	var wg sync.WaitGroup
	for i, n := range e.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Start()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, n := range e.nodes {
		for {
			probe, cancelProbe := context.WithTimeout(ctx, 2*time.Second)
			err := zkServing(probe, n.Addr())
			cancelProbe()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("testserver: zookeeper ensemble: %w; log %s:\n%s", err, n.spec.logPath, n.logTail())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
