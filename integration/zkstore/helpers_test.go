package zkstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/integration/faultproxy"
	"github.com/simba-go/simba/zkstore"
)

// connect opens a Session with servers and closes it when the test ends.
func connect(t testing.TB, servers []string, session time.Duration) *zkstore.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zkstore.Connect(ctx, servers, session, zkstore.WithConnOptions(zk.WithLogInfo(false), zk.WithLogger(quiet{})))
	if err != nil {
		t.Fatalf("zkstore.Connect: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// newStore returns a Store on sess under root.
func newStore(t testing.TB, sess *zkstore.Session, root string) *zkstore.Store {
	t.Helper()
	s, err := zkstore.New(sess, zkstore.WithRoot(root))
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
