package zkstore_test

import (
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
)

// Allocations per uncontended Acquire and Release (issue 19), counted
// over the whole process (go-zookeeper's included) against a private
// server: the Store's own share is what these bounds hold down. On a
// machine shared with the server, the client's CPU is throughput.
const (
	maxStoreAllocs   = 62 // was 82 per cycle
	maxManagerAllocs = 87 // was 108 per cycle
)

// TestCycleAllocs counts the allocations of an uncontended cycle through
// the Store alone and through a Manager. Not parallel: it counts the
// process's allocations.
func TestCycleAllocs(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	s := newStore(t, connect(t, srv.Servers(), tckSession), srv.Root())
	ctx := t.Context()
	t.Run("Store", func(t *testing.T) {
		cycle := func() {
			rec, err := s.Acquire(ctx, "alloc/store", "a", 10*time.Second, 6*time.Second)
			if err != nil || !rec.Held("a") {
				t.Fatal(rec, err)
			}
			if err := s.Release(ctx, "alloc/store", "a", rec.Token); err != nil {
				t.Fatal(err)
			}
		}
		cycle() // the lock's znode, and the brief mark
		if n := testing.AllocsPerRun(300, cycle); n > maxStoreAllocs {
			t.Errorf("a Store cycle made %.1f allocations, want at most %d", n, maxStoreAllocs)
		} else {
			t.Logf("a Store cycle made %.1f allocations", n)
		}
	})
	t.Run("Manager", func(t *testing.T) {
		m, err := lease.NewManager(s, s.LeaseOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(ctx)
		cycle := func() {
			l, err := m.Acquire(ctx, "alloc/manager")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		cycle()
		if n := testing.AllocsPerRun(300, cycle); n > maxManagerAllocs {
			t.Errorf("a Manager cycle made %.1f allocations, want at most %d", n, maxManagerAllocs)
		} else {
			t.Logf("a Manager cycle made %.1f allocations", n)
		}
	})
}
