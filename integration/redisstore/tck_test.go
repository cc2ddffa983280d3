package redisstore_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/integration/faultproxy"
	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/tck"
)

// tckMultiContend keeps the ten-contender case short; the other cases take
// a few ttl each and run in parallel.
const tckMultiContend = 3 * time.Second

// TestTCK runs the conformance suite on a standalone Redis and on a
// three-master Redis Cluster: a new client per Manager, and partitioned
// clients whose every connection goes through black-holing proxies.
func TestTCK(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		tck.Run(t, tck.Harness{
			MultiContend: tckMultiContend,
			Fair:         true,
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
			Fair:         true,
			Open: func(t *testing.T) tck.Backend {
				srv := sharedCluster(t)
				return tck.Backend{
					Client: func() lease.Store { return newStore(t, dialCluster(t, srv.Addrs()), srv.KeyPrefix()) },
					Partitioned: func() (lease.Store, tck.Partition) {
						c, p := dialClusterViaProxies(t, srv.Addrs())
						return newStore(t, c, srv.KeyPrefix()), p
					},
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

// dialClusterViaProxies returns a cluster client whose connections to every
// node (also those it learns of from CLUSTER SLOTS) go through a proxy of
// their own, and a partition that black-holes all of them.
func dialClusterViaProxies(t testing.TB, addrs []string) (*redis.ClusterClient, proxies) {
	t.Helper()
	ps := proxies{}
	for _, a := range addrs {
		ps[a] = newProxy(t, a)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p := ps[addr]; p != nil {
				addr = p.Addr()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { c.Close() })
	return c, ps
}

// proxies is a tck.Partition over the proxies of every cluster node, by
// node address.
type proxies map[string]*faultproxy.Proxy

func (ps proxies) Cut() {
	for _, p := range ps {
		p.Blackhole()
	}
}

func (ps proxies) Heal() {
	for _, p := range ps {
		p.Heal()
	}
}
