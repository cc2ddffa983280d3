package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// TestLongHoldOutlivesRetention: a lease held (and renewed by PEXPIRE)
// for longer than the retention keeps its record, so nobody else is
// granted the lock, also when waiters' Stores have another retention.
// Whether the lease is held is the lease's own state: another contender's
// grant fails the test if it came before the lease's deadline (as last
// renewed) plus the transition, when the holder's grant must still be
// live; a lease whose renewals a loaded machine delayed past its deadline
// lapses rightly, says nothing of the retention, and is held anew under
// another name.
func TestLongHoldOutlivesRetention(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	const keep = 4 * time.Second // at least 4 × (ttl + transition): renewals are PEXPIREs
	const holdTr = 400 * time.Millisecond
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithRetention(keep))
	m, err := lease.NewManager(s, lease.WithTTL(600*time.Millisecond), lease.WithTransition(holdTr))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(bg)
	others := []lease.Store{ // the first to queue writes the record
		newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithRetention(time.Second)),
		newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()),
	}
	const holds = 3
	for i := range holds {
		if holdPastRetention(t, m, others, fmt.Sprintf("long%d", i), 2*keep, holdTr) {
			return
		}
	}
	t.Fatalf("all %d holds lapsed before 2 × the retention (renewals late on a loaded machine)", holds)
}

// holdPastRetention holds name with m for span while others try to take
// it, and fails t if one is granted it while m's grant must be live (see
// TestLongHoldOutlivesRetention), or if the store refuses a renewal before
// the lease's deadline. It reports false if the lease lapsed at its
// deadline (renewals came late) before span ended.
func holdPastRetention(t *testing.T, m *lease.Manager, others []lease.Store, name string, span, holdTr time.Duration) bool {
	t.Helper()
	l, err := m.Acquire(bg, name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(bg) }() // a lapsed lease's release fails
	start := time.Now()
	for end := start.Add(span); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		select {
		case <-l.Done():
			if now := time.Now(); now.Before(l.Deadline()) {
				t.Fatalf("lease of %q ended %v before its deadline: %v", name, l.Deadline().Sub(now), l.Err())
			}
			t.Logf("lease of %q lapsed at its deadline after %v (renewals late): holding anew", name, time.Since(start))
			return false
		default:
		}
		live := l.Deadline().Add(holdTr) // the holder's grant lasts at least until then
		for i, o := range others {
			id := fmt.Sprintf("other%d", i)
			rec, err := o.Acquire(bg, name, id, ttl, tr)
			if err != nil {
				t.Fatalf("Acquire(%q, %q): %v", name, id, err)
			}
			if rec.Held(id) || rec.OwnerID != l.Owner().ID || rec.Token != l.Token() {
				if now := time.Now(); now.Before(live) {
					t.Fatalf("%s's Acquire of %q %v after the hold began, %v before the holder's grant could lapse: %+v, want the holder's grant",
						id, name, now.Sub(start), live.Sub(now), rec)
				}
				t.Logf("lease of %q lapsed after %v (renewals late): %s got %+v; holding anew", name, time.Since(start), id, rec)
				return false
			}
		}
	}
	return true
}

// TestDefaultRetention: the constant TestFreeMutexLeavesOneKey checks.
func TestDefaultRetention(t *testing.T) {
	if redisstore.DefaultRetention != retention {
		t.Fatalf("DefaultRetention %v, the tests promise %v", redisstore.DefaultRetention, retention)
	}
}
