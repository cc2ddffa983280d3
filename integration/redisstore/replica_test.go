package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/lease"
	"github.com/simba-go/simba/redisstore"
)

// TestPromotedReplicaHasEveryCountedRenewal: with WithWaitReplicas, a
// holder counts a renewal only once the replica acknowledged it. The
// replication link is cut (the replica falls behind) and the replica is
// promoted; a contender on the new primary must not be granted the lock
// while the holder still believes it holds it.
func TestPromotedReplicaHasEveryCountedRenewal(t *testing.T) {
	t.Parallel()
	primary, replica := privateRedis(t), privateRedis(t)
	link := newProxy(t, primary.Addr()) // the replica's connection to the primary
	pc, rc := dial(t, primary.Addr()), dial(t, replica.Addr())
	if err := pc.ConfigSet(bg, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	host, port := splitHostPort(t, link.Addr())
	if err := rc.ReplicaOf(bg, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replica to sync", func() bool {
		info, err := rc.Info(bg, "replication").Result()
		return err == nil && containsLine(info, "master_link_status:up")
	})
	holder := manager(t, newStore(t, pc, primary.KeyPrefix(), redisstore.WithWaitReplicas(1, 100*time.Millisecond)))
	l, err := holder.Acquire(bg, "m")
	if err != nil {
		t.Fatal(err)
	}
	link.Blackhole() // the replica hears nothing more: renewals reach the primary only
	defer link.Heal()
	time.Sleep(mTTL / 2) // a renewal or two
	if err := rc.ReplicaOf(bg, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	other := newStore(t, rc, primary.KeyPrefix())
	for deadline := time.Now().Add(2 * takeover); ; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("other not granted on the promoted replica")
		}
		rec, err := other.Acquire(bg, "m", "other", ttl, tr)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Held("other") {
			continue
		}
		select {
		case <-l.Done():
		default:
			t.Fatalf("other granted token %d on the promoted replica while the holder's lease (token %d) was not done", rec.Token, l.Token())
		}
		if rec.Token <= l.Token() || !errors.Is(l.Err(), lease.ErrLost) {
			t.Fatalf("tokens %d then %d, holder's error %v; want a larger token and ErrLost", l.Token(), rec.Token, l.Err())
		}
		return
	}
}
