package zkstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/lease"
)

// TestEnsembleNodeKilled: three Managers, each with a session on the whole
// ensemble, take turns on one mutex while the leader node is killed and
// later started again. Never two holders at once, tokens grow in the order
// of acquisition, and turns go on after the kill.
func TestEnsembleNodeKilled(t *testing.T) {
	t.Parallel()
	e := testserver.ZooKeeperEnsemble(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const name = "ensemble/kill"

	var (
		holders   atomic.Int32
		mu        sync.Mutex
		lastToken uint64
		turns     []time.Time
		wg        sync.WaitGroup
	)
	worker := func(m *lease.Manager) {
		defer wg.Done()
		for ctx.Err() == nil {
			l, err := m.Acquire(ctx, name)
			if err != nil {
				continue // cancelled, or the store failed: try again
			}
			if n := holders.Add(1); n != 1 {
				t.Errorf("%d holders at once", n)
			}
			mu.Lock()
			if l.Token() <= lastToken {
				t.Errorf("token %d granted after %d", l.Token(), lastToken)
			}
			lastToken = l.Token()
			turns = append(turns, time.Now())
			mu.Unlock()
			select { // work, unless the lease ends first
			case <-time.After(20 * time.Millisecond):
			case <-l.Done():
			}
			holders.Add(-1)
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = l.Release(rctx)
			rcancel()
		}
	}
	for range 3 {
		s := newStore(t, connect(t, e.Servers(), tckSession), e.Root())
		m := manager(t, s, lease.WithTTL(tckTTL), lease.WithTransition(tckTransition))
		wg.Add(1)
		go worker(m)
	}

	time.Sleep(1500 * time.Millisecond)
	leader := e.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	killed := time.Now()
	if err := e.Node(leader).Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if err := e.Node(leader).Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	after := 0
	for _, at := range turns {
		if at.After(killed) {
			after++
		}
	}
	t.Logf("%d turns, %d after killing leader node %d", len(turns), after, leader)
	if after == 0 {
		t.Errorf("no turn after the leader node was killed")
	}
}
