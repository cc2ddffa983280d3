package testserver

import (
	"errors"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkSession connects to servers and waits for a session (10 s at most).
func zkSession(servers []string) (*zk.Conn, error) {
	conn, events, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, err
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-deadline:
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session with %v after 10 s", servers)
		}
	}
}

// quietZK drops go-zookeeper's log lines (reconnects are expected here).
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// makeRoot creates a unique, empty znode for the test and returns its path.
func makeRoot(t testing.TB, servers []string) string {
	t.Helper()
	root := "/" + unique("simba-test-")
	conn, err := zkSession(servers)
	if err != nil {
		t.Fatalf("testserver: zookeeper %v: %v", servers, err)
	}
	defer conn.Close()
	if _, err := conn.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("testserver: create %s on zookeeper %v: %v", root, servers, err)
	}
	return root
}

// deleteTree removes root and everything below it from external servers,
// so tests leave nothing behind. Failures are only logged.
func deleteTree(t testing.TB, servers []string, root string) {
	conn, err := zkSession(servers)
	if err != nil {
		t.Logf("testserver: cleaning %s: %v", root, err)
		return
	}
	defer conn.Close()
	if err := deleteRecursive(conn, root); err != nil {
		t.Logf("testserver: cleaning %s: %v", root, err)
	}
}

func deleteRecursive(conn *zk.Conn, p string) error {
	children, _, err := conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := deleteRecursive(conn, path.Join(p, c)); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}
