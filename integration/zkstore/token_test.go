package zkstore_test

import (
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
)

// TestTokenAfterContainerReaped (I1, issue 14 item 10): the server reaps
// a lock's container znode once it is empty, and a new one numbers its
// sequential nodes from 0 again. Tokens must still grow: the czxid does,
// a sequence number would not. The reaping is done here by hand (the
// server does the same a minute later), before every grant.
func TestTokenAfterContainerReaped(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	spy := connect(t, srv.Servers(), tckSession).Conn()
	m := manager(t, s, lease.WithTTL(tckTTL), lease.WithTransition(tckTransition))
	ctx := t.Context()
	const name = "i1/reaped"
	var last uint64
	for i := range 4 {
		l, err := m.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Errorf("grant %d after the container was reaped has token %d, the one before had %d: tokens must grow", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := spy.Delete(dir(s, name), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("reaping the empty container: %v", err)
		}
		if ok, _, err := spy.Exists(dir(s, name)); err != nil || ok {
			t.Fatalf("the container is still there (%v): the next grant would not start a new one", err)
		}
	}
}
