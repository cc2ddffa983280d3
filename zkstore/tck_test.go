package zkstore_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/tck"
)

// TCK timings: an 8 s session outlives ttl + transition (1.5 s) and the
// suite's partitions (a few seconds), so the suite sees grants lapse on the
// server's clock and a healed client finds its session alive (a new one
// takes go-zookeeper a second or more to make). Session expiry has tests
// of its own.
const (
	tckSession    = 8 * time.Second
	tckTTL        = time.Second
	tckTransition = 500 * time.Millisecond
)

// TestTCK runs the conformance suite on a standalone ZooKeeper and on a
// three-node ensemble: a new session per client, and partitioned clients
// whose every server is reached through a black-holing proxy.
func TestTCK(t *testing.T) {
	t.Run("Standalone", func(t *testing.T) {
		srv := testserver.ZooKeeper(t)
		runTCK(t, srv.Servers(), srv.Root())
	})
	t.Run("Ensemble", func(t *testing.T) {
		e := testserver.ZooKeeperEnsemble(t)
		runTCK(t, e.Servers(), e.Root())
	})
}

func runTCK(t *testing.T, servers []string, root string) {
	tck.Run(t, tck.Harness{
		TTL: tckTTL, Transition: tckTransition,
		MultiContend: 5 * time.Second,
		Open: func(t *testing.T) tck.Backend {
			return tck.Backend{
				Client: func() lease.Store {
					return newStore(t, connect(t, servers, tckSession), tckSession, root)
				},
				Partitioned: func() (lease.Store, tck.Partition) {
					p, addrs := proxied(t, servers)
					return newStore(t, connect(t, addrs, tckSession), tckSession, root), p
				},
			}
		},
	})
}
