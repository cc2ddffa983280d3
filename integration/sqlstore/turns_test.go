package sqlstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
)

// TestTakingTurnsNoMissedWake (issue 14, item 7): three Managers on three
// Stores with pools of their own (as three processes) take turns on one
// lock for several seconds, each holding it briefly, while busy
// goroutines keep the CPUs saturated (as on a loaded host, which widens
// every gap between two steps of a goroutine). With push on, every waiter
// must be woken by the release it waits for; a wake-up that went missing
// shows as an Acquire that sleeps until its poll, seconds at these timings
// where a hand-off takes milliseconds. On MySQL the doorbell of a waiter
// loop that had just rung refused to re-arm for an Acquire that lost in
// the gap before the loop's cleanup.
func TestTakingTurnsNoMissedWake(t *testing.T) {
	hog, stopHog := context.WithCancel(context.Background())
	t.Cleanup(stopHog) // after the parallel subtests
	for range runtime.GOMAXPROCS(0) {
		go func() {
			for hog.Err() == nil {
			}
		}()
	}
	forPush(t, func(t *testing.T, d dialect) {
		dsn := d.migrated(t)
		const (
			players = 3
			playFor = 8 * time.Second
			hold    = 2 * time.Millisecond
			// A waiter that missed its wake-up sleeps until the owner's
			// transition end, about turnTTL + turnTr away, since the owner
			// holds for milliseconds. Woken waiters took up to about 3 s
			// under load 10-19 on two cores (waiting for the other two
			// players' turns on starved CPUs), so the ttl is chosen long
			// enough to put an order of magnitude between the two.
			turnTTL = 20 * time.Second
			turnTr  = 10 * time.Second
			// stalled is what a woken waiter never needs, even on starved
			// CPUs, and a third of what a missed wake-up costs.
			stalled = (turnTTL + turnTr) / 3
		)
		// A missed wake-up near the end still completes (and is reported).
		ctx, cancel := context.WithTimeout(t.Context(), playFor+2*(turnTTL+turnTr))
		defer cancel()
		ms := make([]*lease.Manager, players)
		for i := range ms {
			m, err := lease.NewManager(d.newStore(t, dsn), lease.WithTTL(turnTTL), lease.WithTransition(turnTr),
				lease.WithContenderID(fmt.Sprint("player-", i)))
			if err != nil {
				t.Fatalf("NewManager: %v", err)
			}
			t.Cleanup(func() { m.Close(context.Background()) })
			ms[i] = m
		}
		type wait struct {
			player int
			took   time.Duration
		}
		var (
			mu    sync.Mutex
			slow  []wait
			turns int
			wg    sync.WaitGroup
		)
		start := time.Now()
		for i, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < playFor {
					begin := time.Now()
					l, err := m.Acquire(ctx, "turns/one")
					took := time.Since(begin)
					if err != nil {
						t.Errorf("player %d: Acquire: %v", i, err)
						return
					}
					time.Sleep(hold)
					if err := l.Release(ctx); err != nil {
						t.Errorf("player %d: Release: %v", i, err)
						return
					}
					mu.Lock()
					turns++
					if took > stalled {
						slow = append(slow, wait{i, took})
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		t.Logf("%s: %d turns in %v", d.name, turns, playFor)
		for _, w := range slow {
			t.Errorf("player %d waited %v for its turn (a missed wake-up: a hand-off takes milliseconds)", w.player, w.took)
		}
	})
}
