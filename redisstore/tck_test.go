package redisstore_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/tck"
)

// tckMultiContend keeps the ten-contender case short; the other cases take
// a few ttl each and run in parallel.
const tckMultiContend = 3 * time.Second

// TestTCK runs the conformance suite on a standalone Redis (a new client
// per Manager, and a partitioned client through a black-holing proxy) and
// on a three-master Redis Cluster.
func TestTCK(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		tck.Run(t, tck.Harness{
			MultiContend: tckMultiContend,
			Open: func(t *testing.T) tck.Backend {
				srv := sharedRedis(t)
				return tck.Backend{
					Client: func() lease.Store { return newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()) },
					Partitioned: func() (lease.Store, tck.Partition) {
						p := newProxy(t, srv.Addr())
						return newStore(t, dial(t, p.Addr()), srv.KeyPrefix()), faultproxy.Hanging{Proxy: p}
					},
				}
			},
		})
	})
	t.Run("cluster", func(t *testing.T) {
		tck.Run(t, tck.Harness{
			MultiContend: tckMultiContend,
			Open: func(t *testing.T) tck.Backend {
				srv := sharedCluster(t)
				return tck.Backend{
					Client: func() lease.Store { return newStore(t, dialCluster(t, srv.Addrs()), srv.KeyPrefix()) },
				}
			},
		})
	})
}

// newProxy starts a fault proxy to target, closed when the test ends.
func newProxy(t testing.TB, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
