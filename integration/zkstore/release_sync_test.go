package zkstore_test

import (
	"testing"
	"time"
)

// TestReleaseBySessionThatDidNotCreateSyncs: a Release through a Store
// other than the one that holds the grant (another process ending a grant
// behind its holder's back, as the TCK's RevokedLease does) makes its
// server catch up with the leader before it lists the queue. On an
// ensemble its server may be a follower that has not yet applied the
// holder's create; listing there without a sync found no node and said
// ErrNotHeld of a grant that was held (TestTCK/Ensemble/RevokedLease, on a
// loaded machine: "Store.Release with the holder's id and token: lease:
// not held"). A lagging follower cannot be made on demand, so the test
// counts the requests: the sync, the listing, the read of the node and its
// delete.
func TestReleaseBySessionThatDidNotCreateSyncs(t *testing.T) {
	t.Parallel()
	const name, ttl, transition = "release/other-session", 4 * time.Second, 2 * time.Second
	srv, holder, other := twoStores(t, name)
	ctx := t.Context()
	g, err := holder.Acquire(ctx, name, "h", ttl, transition)
	if err != nil || !g.Held("h") {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	if _, err := other.Get(ctx, name); err != nil { // the lock's znode is known to other's server
		t.Fatal(err)
	}
	before := trips(other)
	if err := other.Release(ctx, name, "h", g.Token); err != nil {
		t.Fatalf("Release through another Store: %v", err)
	}
	if n := trips(other) - before; n != 4 {
		t.Errorf("Release through another Store sent %d requests, want 4 (sync, list, read, delete): without the sync a follower behind the leader lists no node", n)
	}
	wantNoNodes(t, holder, other, srv, name, "after the release through another Store")
}
