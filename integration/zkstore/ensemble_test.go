package zkstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/integration/testserver"
	"github.com/simba-go/simba/lease"
)

// TestEnsembleNodeKilled: three Managers, each with a session on the whole
// ensemble, take turns on one lock while the leader node is killed and
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

// TestHeartbeatNeedsLeader: a holder connected to a follower that lost
// its leader (and its quorum: the other two nodes are stopped) keeps no
// lease alive. The follower still answers pings until it notices (a few
// ticks), but the Session's heartbeats are syncs, which only the leader
// answers: the holder's deadline stays where the last answered heartbeat
// before the stop put it, though the Manager keeps renewing.
func TestHeartbeatNeedsLeader(t *testing.T) {
	t.Parallel()
	e := testserver.ZooKeeperEnsemble(t)
	leader := e.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	follower := (leader + 1) % 3
	const session = 3 * time.Second
	s := newStore(t, connect(t, []string{e.Node(follower).Addr()}, session), e.Root())
	m := manager(t, s, s.LeaseOptions()...)
	l, err := m.Acquire(t.Context(), "ensemble/heartbeat")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(session) // renewals and heartbeats are under way
	for i := range 3 {
		if i != follower {
			if err := e.Node(i).Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Node(i).Resume() })
		}
	}
	paused := time.Now()
	safety := max(session*3/8/2, session*5/8/10)
	time.Sleep(2 * time.Second) // pings every second: the follower answers some
	if latest := paused.Add(session - safety); l.Deadline().After(latest) {
		t.Errorf("the lease's deadline moved to %v after the quorum stopped, past the %v a heartbeat sent before could give: an answer without the leader kept it alive",
			l.Deadline().Sub(paused), latest.Sub(paused))
	}
}
