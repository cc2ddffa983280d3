package zkstore_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/zkstore"
)

// connect opens a session with servers and closes it when the test ends.
func connect(t testing.TB, servers []string, session time.Duration) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(servers, session, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go drain(events)
				return conn
			}
		case <-deadline:
			t.Fatalf("no ZooKeeper session with %v after 20 s", servers)
		}
	}
}

// drain empties a conn's event channel until the conn closes it.
func drain(events <-chan zk.Event) {
	for range events {
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// newStore returns a Store on conn under root.
func newStore(t testing.TB, conn *zk.Conn, session time.Duration, root string) *zkstore.Store {
	t.Helper()
	s, err := zkstore.New(conn, session, zkstore.WithRoot(root))
	if err != nil {
		t.Fatalf("zkstore.New: %v", err)
	}
	return s
}

// partition black-holes every server of one client (a tck.Partition).
type partition []*faultproxy.Proxy

// Cut black-holes all traffic: calls hang without a reply.
func (p partition) Cut() {
	for _, x := range p {
		x.Blackhole()
	}
}

// Heal lets the traffic through again.
func (p partition) Heal() {
	for _, x := range p {
		x.Heal()
	}
}

// proxied starts one fault proxy per server and returns them with the
// addresses to connect to.
func proxied(t testing.TB, servers []string) (partition, []string) {
	t.Helper()
	var p partition
	var addrs []string
	for _, s := range servers {
		x, err := faultproxy.New(s)
		if err != nil {
			t.Fatalf("faultproxy: %v", err)
		}
		t.Cleanup(func() { x.Close() })
		p = append(p, x)
		addrs = append(addrs, x.Addr())
	}
	return p, addrs
}
