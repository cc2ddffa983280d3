package testserver_test

import (
	"errors"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/integration/testserver"
)

// zkRoundTrip creates a node under root and reads it back.
func zkRoundTrip(conn *zk.Conn, root, name string) error {
	p := path.Join(root, name)
	if _, err := conn.Create(p, []byte(name), 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	data, _, err := conn.Get(p)
	if err != nil {
		return err
	}
	if string(data) != name {
		return errors.New("read " + string(data) + ", want " + name)
	}
	return nil
}

func TestZooKeeperShared(t *testing.T) {
	t.Parallel()
	a, b := testserver.ZooKeeper(t), testserver.ZooKeeper(t)
	if a.Root() == b.Root() || a.Addr() != b.Addr() {
		t.Fatalf("want one server, two roots: %v %s, %v %s", a.Servers(), a.Root(), b.Servers(), b.Root())
	}
	conn := zkConn(t, a.Servers(), 4*time.Second)
	if ok, _, err := conn.Exists(a.Root()); err != nil || !ok {
		t.Fatalf("root %s exists = %v, %v", a.Root(), ok, err)
	}
	if err := zkRoundTrip(conn, a.Root(), "n"); err != nil {
		t.Fatal(err)
	}
	notControllable(t, a.Process)
}

func TestPrivateZooKeeperFaults(t *testing.T) {
	t.Parallel()
	srv := testserver.PrivateZooKeeper(t)
	conn := zkConn(t, srv.Servers(), 4*time.Second)
	if err := zkRoundTrip(conn, srv.Root(), "before"); err != nil {
		t.Fatal(err)
	}

	timed(t, "zookeeper restart", srv.Restart)
	eventually(t, 60*time.Second, "data after restart", func() error { return zkRoundTrip(conn, srv.Root(), "before") })

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := conn.Get(srv.Root()); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("GET answered by a paused server: %v", err)
	case <-time.After(short):
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	<-done // answered late or failed by the client's own timeout
	eventually(t, 60*time.Second, "round trip after resume", func() error { return zkRoundTrip(conn, srv.Root(), "after") })

	timed(t, "zookeeper stop", srv.Stop)
	timed(t, "zookeeper start", srv.Start)
	// A start that takes longer than the session timeout (a loaded CI
	// machine) expires the session: the client needs a new one first.
	eventually(t, 60*time.Second, "round trip after start", func() error { return zkRoundTrip(conn, srv.Root(), "after") })
}

func TestZooKeeperEnsembleSurvivesNodeLoss(t *testing.T) {
	t.Parallel()
	e := testserver.ZooKeeperEnsemble(t)
	if len(e.Servers()) != 3 {
		t.Fatalf("servers %v", e.Servers())
	}
	if err := e.Node(3).Stop(); !errors.Is(err, testserver.ErrNotControllable) {
		t.Fatalf("Node(3).Stop: %v", err)
	}
	leader := e.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	conn := zkConn(t, e.Servers(), 4*time.Second)
	if err := zkRoundTrip(conn, e.Root(), "before"); err != nil {
		t.Fatal(err)
	}

	// Lose the leader: the two others elect a new one and keep serving.
	timed(t, "zookeeper ensemble kill leader", e.Node(leader).Kill)
	eventually(t, 60*time.Second, "round trip without the old leader", func() error {
		return zkRoundTrip(conn, e.Root(), "after")
	})
	if l := e.Leader(); l == leader || l < 0 {
		t.Fatalf("leader after the kill: %d (was %d)", l, leader)
	}

	// Lose a second node: no quorum; the last node gives up leading (or
	// following) within syncLimit ticks.
	other := (leader + 1) % 3
	timed(t, "zookeeper ensemble stop second node", e.Node(other).Stop)
	eventually(t, 60*time.Second, "no leader without quorum", func() error {
		if l := e.Leader(); l >= 0 {
			return errors.New("node " + e.Node(l).Addr() + " still leads")
		}
		return nil
	})

	// Bring both back: the old data is there.
	timed(t, "zookeeper ensemble start node", e.Node(leader).Start)
	timed(t, "zookeeper ensemble start node", e.Node(other).Start)
	eventually(t, 60*time.Second, "round trip after both came back", func() error {
		return zkRoundTrip(conn, e.Root(), "after")
	})
}
