package lease_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/memstore"
)

// failReleases makes every Release fail without being applied.
func failReleases(op memstore.Op, _, _ string) memstore.Fault {
	if op == memstore.OpRelease {
		return memstore.FaultFail
	}
	return memstore.FaultNone
}

// TestPerNameStateIsBounded (issue 14 item 9, S18): a service that locks
// one name per order id keeps a bounded number of per-name entries in its
// Manager, also when every release fails and each grant must be refused
// until it could have lapsed: the entries go once they have expired, even
// though the names are never used again.
func TestPerNameStateIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m := newMgr(t, st, "a")
		most := 0
		for i := range 20_000 {
			l := mustAcquire(t, m, fmt.Sprintf("orders/%d", i))
			if err := l.Release(bg); err != nil {
				t.Fatal(err)
			}
			most = max(most, lease.PerNameEntries(m))
		}
		if most > 2 {
			t.Errorf("%d per-name entries at most while names were acquired and released one at a time", most)
		}

		st.SetFault(failReleases)
		most = 0
		for i := range 3000 {
			l := mustAcquire(t, m, fmt.Sprintf("failing/%d", i))
			if err := l.Release(bg); err == nil {
				t.Fatal("Release succeeded through a failing store")
			}
			time.Sleep(10 * time.Millisecond)
			most = max(most, lease.PerNameEntries(m))
		}
		// Each grant is refused for ttl + transition (4s); one name every
		// ≥ 10ms makes a few hundred live entries at most.
		if most > 1000 {
			t.Errorf("%d per-name entries at most over 3,000 names whose releases failed", most)
		}
		st.Heal()
		time.Sleep(tTTL + tTransition)
		for i := range 10 { // later use of other names sweeps the expired entries
			l := mustAcquire(t, m, fmt.Sprintf("later/%d", i))
			_ = l.Release(bg)
		}
		if n := lease.PerNameEntries(m); n > 1 {
			t.Errorf("%d per-name entries left once every refused grant had lapsed", n)
		}
	})
}

// hidePush hides the store's Watcher (and BatchRenewer): a store that
// cannot push.
type hidePush struct{ lease.Store }

// TestWatchOfAFreeMutexIsCheap (issue 14 item 9): watching a free lock
// costs about one Get per ttl where the store pushes changes, and a
// bounded modest rate where it does not (ttl/4, at most a second apart),
// not one every 0–200ms; a new owner is still seen at once (push) or
// within one poll.
func TestWatchOfAFreeMutexIsCheap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		push    bool
		maxGets int
		seen    time.Duration
	}{
		{"push", true, 60/3 + 3, 0},
		{"poll", false, 60*4/3 + 6, tTTL / 4 * 6 / 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				var store lease.Store = st
				if !tc.push {
					store = hidePush{st}
				}
				w := newMgr(t, store, "w")
				ctx, cancel := context.WithCancel(bg)
				defer cancel()
				owners, err := w.Watch(ctx, "job")
				if err != nil {
					t.Fatal(err)
				}
				if o := <-owners; !o.Free() {
					t.Fatalf("first owner %+v, want free", o)
				}
				st.ResetStats()
				time.Sleep(time.Minute)
				if n := st.Stats().Get; n > tc.maxGets {
					t.Errorf("%d Gets in a minute of watching a free lock (ttl %v), want at most %d", n, tTTL, tc.maxGets)
				}
				a := newMgr(t, st, "a")
				acquired := time.Now()
				l := mustAcquire(t, a, "job")
				if o := <-owners; o.ID != "a" {
					t.Fatalf("owner %+v after a acquired, want a", o)
				}
				if d := time.Since(acquired); d > tc.seen {
					t.Errorf("new owner seen %v after the grant, want within %v", d, tc.seen)
				}
				_ = l.Release(bg)
			})
		})
	}
}
