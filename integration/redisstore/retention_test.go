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
func TestLongHoldOutlivesRetention(t *testing.T) {
	t.Parallel()
	srv := privateRedis(t)
	const keep = 4 * time.Second // at least 4 × (ttl + transition): renewals are PEXPIREs
	s := newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithRetention(keep))
	m, err := lease.NewManager(s, lease.WithTTL(600*time.Millisecond), lease.WithTransition(400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(bg)
	l, err := m.Acquire(bg, "long")
	if err != nil {
		t.Fatal(err)
	}
	others := []lease.Store{ // the first to queue writes the record
		newStore(t, dial(t, srv.Addr()), srv.KeyPrefix(), redisstore.WithRetention(time.Second)),
		newStore(t, dial(t, srv.Addr()), srv.KeyPrefix()),
	}
	for end := time.Now().Add(2 * keep); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		select {
		case <-l.Done():
			t.Fatalf("lease lost: %v", l.Err())
		default:
		}
		for i, o := range others {
			if rec := mustLose(t, o, "long", fmt.Sprintf("other%d", i)); rec.OwnerID != l.Owner().ID || rec.Token != l.Token() {
				t.Fatalf("while held: %+v, want the holder's grant", rec)
			}
		}
	}
}

// TestDefaultRetention: the constant TestFreeMutexLeavesOneKey checks.
func TestDefaultRetention(t *testing.T) {
	if redisstore.DefaultRetention != retention {
		t.Fatalf("DefaultRetention %v, the tests promise %v", redisstore.DefaultRetention, retention)
	}
}
